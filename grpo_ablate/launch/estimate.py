"""What a sweep will do and cost, before anything trains (`grpo-ablate plan`): its jobs, how
many are recorded or in the run cache, for an adaptive sweep the runs its ladder is expected
to train (by simulation, when no trick matters and when every trick has the min-effect) and
its maximum, the cost of one run, and the predicted wall time and GPU-hours under the chosen
launcher's parallelism.

One run's cost comes from the records of finished runs of the baseline's config when there
are any (the sweep folder, the run cache), or of the same model under `--from PATH`, else from
a short pilot of the baseline on this machine (refused before it starts where it cannot run
here: a policy of a billion parameters without a CUDA device, or over the machine's memory):
two runs, of 1 and 1 + k optimizer steps, at the launcher's thread share, whose difference
is the cost of k steps (generation and training apart) and whose remainder is the fixed cost
of a run (model load, the held-out evaluation at the end). A run is then
fixed + max_steps x (generation + training) + its intermediate evaluations, with generation
and training scaled by `--length` (the expected mean completion length, e.g. the 95th
percentile from `grpo-ablate lengths`) against the pilot's."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from grpo_ablate.config import RunSpec, specs_for
from grpo_ablate.launch import run_cache
from grpo_ablate.launch.pilot import (
    check_pilot_fits,
    device_memory_mib,
    pilot_cost,
    slurm_pilot_cost,
)
from grpo_ablate.launch.run_cost import RunCost, cost_from, recorded_cost
from grpo_ablate.records import record_exists
from grpo_ablate.runtime import cuda_available, duration, say
from grpo_ablate.tasks import check_task_configs

# A run's metric spread assumed where no records give one: the seed effect and the run's own
# noise, 3 points of accuracy each (the review: one checkpoint differs by 3-5 points).
SEED_SD, NOISE_SD = 0.03, 0.03


@dataclass(frozen=True)
class Launch:
    """How many runs go at once, with how many torch threads and GPUs each."""

    name: str
    workers: int
    threads: int
    gpus_per_run: int


def launcher_of(overrides: list[str]) -> Launch:
    """The launcher a sweep's overrides choose (conf/launcher/*.yaml), and its parallelism."""
    cpus = os.cpu_count() or 1
    pick = {o.split("=", 1)[0].lstrip("+"): o.split("=", 1)[1] for o in overrides if "=" in o}
    name = pick.get("launcher", "serial")
    gpus = int(pick.get("launch.processes", 1)) if cuda_available() else 0
    if name == "joblib":
        workers = int(pick.get("hydra.launcher.n_jobs", cpus))
        return Launch(name, workers, max(1, cpus // max(1, workers)), gpus)
    if name == "local":
        return Launch(name, int(pick.get("hydra.sweeper.max_batch_size", cpus)), 1, gpus)
    if name == "slurm":  # the GPUs each job asks for, whatever this (login) node has
        asked = pick.get("hydra.launcher.gpus_per_node", "null")
        return Launch(name, int(pick.get("hydra.launcher.array_parallelism", 256)),
                      int(pick.get("hydra.launcher.cpus_per_task", 1)),
                      0 if asked in ("null", "0") else int(asked))
    return Launch("serial", 1, cpus, gpus)


@dataclass(frozen=True)
class Forecast:
    jobs: int
    recorded: int
    cached: int
    arms: int
    seeds: int
    strata: int
    runs: dict          # scenario -> expected runs to train
    per_run: float      # seconds of one run
    cost: RunCost
    launch: Launch
    wall: dict          # scenario -> predicted seconds
    gpu_hours: dict     # scenario -> GPU-hours (0 on a CPU)
    steps: int = 0      # optimizer steps of one run
    length: float | None = None  # the expected completion length (--length), or the measured
    extra: float = 0.0  # seconds beyond the runs themselves (overhead())


def overhead(cost: RunCost, launches: int, seeds: int, workers: int) -> float:
    """What a sweep pays beyond its runs: each launch starts its processes (imports,
    composition), the report at the end reads the records, and each seed's first run
    evaluates the starting policy once."""
    return (launches + 1) * cost.process_start + math.ceil(seeds / workers) * cost.start_eval


def wall_seconds(runs: float, per_run: float, workers: int, extra: float) -> float:
    """Predicted wall time of `runs` runs of `per_run` seconds, `workers` at a time."""
    return math.ceil(runs / workers) * per_run + extra if runs else 0.0


def adaptive_runs(spec: RunSpec, arms: int, strata: int, sims: int) -> dict:
    """Runs the ladder is expected to train: when no trick matters, when every trick has the
    min-effect, and at most."""
    from grpo_ablate.stats.expected import expected_ladder_runs
    from grpo_ablate.stats.sequential import Design

    a = spec.config["adaptive"]
    design = Design(rungs=tuple(a["rungs"]), alpha=a["alpha"], min_effect=a["min_effect"],
                    futility=a["futility"], arms=tuple(str(i) for i in range(arms)))
    null, _ = expected_ladder_runs(design, arms, 0.0, SEED_SD, NOISE_SD, sims)
    effect, _ = expected_ladder_runs(design, arms, a["min_effect"], SEED_SD, NOISE_SD, sims)
    return {"no trick matters": null * strata, "every trick has the min-effect": effect * strata,
            "at most": float((arms + 1) * design.rungs[-1] * strata)}


def adaptive_screening_runs(spec: RunSpec, design: dict, sims: int) -> dict:
    """Runs an adaptive screening is expected to train (replicates of every point)."""
    import numpy as np

    from grpo_ablate.launch.screening_ladder import screening_plan
    from grpo_ablate.report.screening import columns_of
    from grpo_ablate.stats.screening_expected import expected_screening_runs

    plan = screening_plan(spec.config["adaptive"], design)
    matrix, columns = np.asarray(design["design"]), columns_of(design)
    null, _ = expected_screening_runs(matrix, columns, plan, 0.0, SEED_SD, NOISE_SD, sims)
    effect, _ = expected_screening_runs(matrix, columns, plan, plan.min_effect, SEED_SD,
                                        NOISE_SD, sims)
    return {"no trick matters": null, "every trick has the min-effect": effect,
            "at most": float(len(matrix) * plan.rungs[-1])}


def early_stop_runs(spec: RunSpec, arms: int, seeds: int, todo: int, sims: int) -> dict:
    """Full runs' worth of steps an early-stop sweep is expected to train beside the runs
    without it: when no trick matters, when every trick has the min-effect from its first
    look (the most stopping can save), and at least (every arm settled at the first look)."""
    from grpo_ablate.results.early_stop import plan_of
    from grpo_ablate.stats.expected_stops import expected_stop_share

    plan = plan_of(spec.config["early_stop"], [str(i) for i in range(arms)], seeds)
    share = {k: expected_stop_share(plan, arms, effect, SEED_SD, NOISE_SD, sims)
             for k, effect in (("no trick matters", 0.0),
                               ("every trick has the min-effect", plan.min_effect))}
    return {"without early stopping": float(todo),
            **{f"with early stopping, {k}": todo * v for k, v in share.items()},
            "with early stopping, at least": todo * plan.looks[0]}


def forecast(overrides: list[str], pilot_steps: int = 3, length: float | None = None,
             sims: int = 200, from_folders: list[Path] | None = None,
             pilot_here: bool = False, design: dict | None = None) -> Forecast:
    """`design`: a screening's design.json (an adaptive one adds replicates of it)."""
    specs = specs_for(overrides, multirun=True)
    check_task_configs([s.config["task"] for s in specs])
    recorded = sum(record_exists(s.run_dir) for s in specs)
    cached = sum(1 for s in specs if not record_exists(s.run_dir) and run_cache.lookup(s))
    arms = sorted({s.arm for s in specs})
    strata = len({(s.config["model"]["name"], s.config["task"]["name"]) for s in specs})
    baseline = next((s for s in specs if s.arm == "baseline"), specs[0])
    launch = launcher_of(overrides)
    cost = cost_from(from_folders, baseline) if from_folders else recorded_cost(baseline)
    if cost is None and launch.name == "slurm" and not pilot_here:
        say(f"plan: no finished run of the baseline's config: piloting it ({1 + pilot_steps} "
            "steps in all) as two Slurm jobs of the sweep's launcher")
        cost = slurm_pilot_cost(overrides, pilot_steps, Path(baseline.config["out_root"]))
    elif cost is None:
        check_pilot_fits(baseline.config)
        say(f"plan: no finished run of the baseline's config: piloting it ({1 + pilot_steps} "
            "steps in all) on this machine")
        cost = pilot_cost(overrides, pilot_steps, launch.threads)
    cfg = baseline.config
    steps, every = cfg["trainer"]["max_steps"], cfg["eval"]["every_steps"]
    between = (steps - 1) // every if every else 0
    per_run = cost.seconds(steps, between, cfg["eval"]["sampled_k"], length)
    if launch.name == "slurm":  # one job per run: each starts its own process
        per_run += cost.job_start
    todo = len(specs) - recorded - cached
    if cfg["adaptive"]["enabled"]:
        runs = adaptive_screening_runs(baseline, design, sims) if design else \
            adaptive_runs(baseline, len(arms) - 1, strata, sims)
        done = recorded + cached
        runs = {k: max(0.0, v - done) for k, v in runs.items()}
        launches = len(cfg["adaptive"]["rungs"])
    elif cfg["early_stop"]["enabled"]:
        runs = early_stop_runs(baseline, len(arms) - 1, len({s.seed for s in specs}), todo,
                               sims)
        launches = len(cfg["early_stop"]["looks"]) + 1
    else:
        runs, launches = {"to train": float(todo)}, 1
    extra = overhead(cost, launches, len({s.seed for s in specs}), launch.workers)
    wall = {k: wall_seconds(n, per_run, launch.workers, extra) for k, n in runs.items()}
    gpu = {k: n * per_run * launch.gpus_per_run / 3600 for k, n in runs.items()}
    return Forecast(jobs=len(specs), recorded=recorded, cached=cached, arms=len(arms),
                    seeds=len({s.seed for s in specs}), strata=strata, runs=runs,
                    per_run=per_run, cost=cost, launch=launch, wall=wall, gpu_hours=gpu,
                    extra=extra, steps=steps, length=length)


def tokens(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


def render(f: Forecast, length: float | None) -> str:
    c, la = f.cost, f.launch
    # A CPU run's device is its process.
    device, devices = ("GPU", "GPUs") if la.gpus_per_run else ("process", "processes")
    run_tokens = f.steps * c.tokens_per_step(length)
    lines = [f"plan: {f.jobs} jobs ({f.arms} arms x {f.seeds} seeds"
             + (f", {f.strata} strata" if f.strata > 1 else "") + f"); {f.recorded} recorded, "
             f"{f.cached} in the run cache, {f.jobs - f.recorded - f.cached} to train"]
    for k, n in f.runs.items():
        lines.append(f"  runs {k}: {n:.0f}" + (" (full runs' worth of steps)"
                                               if k.startswith("with early") else ""))
    scale = f" at {length:.0f} tokens per completion (measured {c.mean_length:.1f})" \
        if length else f" (completions of {c.mean_length:.1f} tokens)"
    lines.append(f"  one run: {duration(f.per_run)} = {c.fixed:.1f} s fixed (load, "
                 f"evaluations) + per step {c.generation:.3f} s generation + "
                 f"{c.training:.3f} s training{scale}; from {c.source}")
    if c.prompt_tokens or c.completion_tokens:
        step = c.scale(length) * (c.generation + c.training)
        share = f"; generation {c.generation / (c.generation + c.training):.0%} of a step" \
            if step else ""
        gpu_run = f", {f.per_run * la.gpus_per_run / 3600:.2f} GPU-hours" if la.gpus_per_run \
            else ""
        lines.append(f"  throughput: {c.tokens_per_step(length):.0f} tokens a step "
                     f"({c.prompt_tokens:.0f} prompt + "
                     f"{c.completion_tokens * c.scale(length):.0f} completion), "
                     f"{c.tokens_per_second_per_device(length):.0f} tokens/s per {device} "
                     f"(verl's perf/throughput: tokens / (step seconds x {devices}))"
                     f"{share}; one run {tokens(run_tokens)} tokens{gpu_run}")
    if c.pilot_seconds is not None:
        start = f"a Slurm job takes {c.job_start:.1f} s beyond its run (its start, imports), " \
            f"the sweep's own process {c.process_start:.1f} s a launch" if c.job_start \
            else f"a run process starts in {c.process_start:.1f} s"
        lines.append(f"  the pilot itself: {c.pilot_seconds:.0f} s; {start}, the starting "
                     f"policy's evaluation {c.start_eval:.1f} s once per seed")
    if c.peak_mib is not None:
        total = device_memory_mib(c.peak_on)
        where = "the GPU" if c.peak_on == "GPU" else "this machine"
        lines.append(f"  peak memory of one run: {c.peak_mib / 1024:.2f} GiB" + (
            f" of {total / 1024:.1f} GiB on {where}" if total else ""))
    lines.append(f"  launcher {la.name}: {la.workers} run(s) at once, {la.threads} thread(s) "
                 f"and {la.gpus_per_run} GPU(s) each")
    for k, w in f.wall.items():
        gpu = f"{f.gpu_hours[k]:.1f} GPU-hours" if la.gpus_per_run else "no GPU"
        total = f"; {tokens(f.runs[k] * run_tokens)} tokens" if run_tokens else ""
        queue = " (Slurm's queue waits not included)" if la.name == "slurm" else ""
        lines.append(f"  predicted wall time, {k}: {duration(w)}{queue}; {gpu}{total}")
    return "\n".join(lines)

