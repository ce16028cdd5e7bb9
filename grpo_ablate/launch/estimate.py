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

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grpo_ablate.config import RunSpec, computation_key, model_label, specs_for
from grpo_ablate.errors import UserError
from grpo_ablate.launch import run_cache
from grpo_ablate.records import RECORD_NAME, read_record, record_exists, scan_records
from grpo_ablate.runtime import cuda_available, duration, say
from grpo_ablate.tasks import check_task_configs

# A run's metric spread assumed where no records give one: the seed effect and the run's own
# noise, 3 points of accuracy each (the review: one checkpoint differs by 3-5 points).
SEED_SD, NOISE_SD = 0.03, 0.03


@dataclass(frozen=True)
class RunCost:
    """Seconds of one run, apart, and where the figures came from."""

    fixed: float           # model load, setup, the evaluation at the end
    generation: float      # per optimizer step
    training: float        # per optimizer step
    eval_end: float        # the end-of-run evaluation (greedy + sampled), inside `fixed`
    mean_length: float     # completion tokens per completion in the measured runs
    source: str
    process_start: float = 0.0  # a run process's imports and composition, before training
    start_eval: float = 0.0     # the starting policy's evaluation, once per seed (cached)
    peak_mib: float | None = None
    peak_on: str = "CPU"        # GPU: torch's peak allocation on the device; CPU: peak RSS
    pilot_seconds: float | None = None

    def seconds(self, steps: int, evals_between: int, sampled_k: int, length: float | None) -> float:
        scale = (length / self.mean_length) if length and self.mean_length else 1.0
        greedy = self.eval_end / (1 + sampled_k)  # an intermediate evaluation is greedy only
        return self.fixed + steps * scale * (self.generation + self.training) + evals_between * greedy


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
    if name == "slurm":
        return Launch(name, int(pick.get("hydra.launcher.array_parallelism", 256)),
                      int(pick.get("hydra.launcher.cpus_per_task", 1)), gpus)
    return Launch("serial", 1, cpus, gpus)


def recorded_cost(baseline: RunSpec) -> RunCost | None:
    """The cost of one run from finished records of the baseline's config (any seed), in the
    sweep folder and the run cache."""
    key = computation_key(baseline.config)
    found = []
    if baseline.sweep_dir.is_dir():
        found += [r for r in scan_records(baseline.sweep_dir)[0] if r.status == "completed"]
    entry = run_cache.cache_dir(baseline)
    if entry is not None and entry.parent.is_dir():
        for path in entry.parent.glob(f"*/{RECORD_NAME}"):
            try:
                found.append(read_record(path))
            except ValueError:
                continue
    same = [r for r in found if r.config and computation_key(r.config) == key and r.steps > 0]
    if not same:
        return None
    return cost_of(same, f"{len(same)} finished run(s) of the baseline's config")


def cost_from(folders: list[Path], baseline: RunSpec) -> RunCost:
    """`plan --from PATH`: the cost of one run from the finished records of the same model
    under PATH (an earlier sweep, e.g. on the cluster), its baseline's runs where it has any;
    per step, so another number of steps or another trick list costs from them too."""
    label = model_label(baseline.config)
    found = []
    for folder in folders:
        if not folder.is_dir():
            raise UserError(f"plan --from {folder}: no such folder; allowed: a sweep folder "
                            "(or a folder of sweep folders) holding records")
        found += [r for r in scan_records(folder)[0]
                  if r.status == "completed" and r.steps > 0 and r.model == label]
    if not found:
        raise UserError(f"plan --from {' '.join(map(str, folders))}: no finished run of "
                        f"model={label} there; allowed: a sweep folder with records of that "
                        "model")
    base = [r for r in found if r.arm == "baseline"] or found
    return cost_of(base, f"{len(base)} finished run(s) of model={label} under --from")


def cost_of(same: list, source: str) -> RunCost:
    """One run's cost from finished records (the medians over them)."""
    gen = statistics.median(r.cost.get("generation_seconds", 0.0) / r.steps for r in same)
    ev = statistics.median(r.cost.get("eval_seconds", 0.0) for r in same)
    wall = statistics.median(r.wall_seconds for r in same)
    tokens = statistics.median(r.cost.get("completion_tokens", 0) / max(1, r.cost.get(
        "completions", 1)) for r in same)
    steps = same[0].steps
    # Records do not split setup from training: setup is counted with the steps here.
    training = max(0.0, (wall - ev) / steps - gen)
    # eval_seconds holds every evaluation of a run: all in `fixed`, none added per step.
    return RunCost(fixed=ev, generation=gen, training=training, eval_end=0.0, mean_length=tokens,
                   source=source)


def pilot_cost(baseline: RunSpec, overrides: list[str], steps: int, threads: int) -> RunCost:
    """Two short runs of the baseline on this machine (1 and 1 + steps optimizer steps), in
    a process of their own at the launcher's thread share."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="grpo-ablate-pilot-") as tmp:
        short = _pilot_run(overrides, 1, Path(tmp) / "a", threads)
        long = _pilot_run(overrides, 1 + steps, Path(tmp) / "b", threads)
    spent = time.perf_counter() - t0
    (ra, peak_a, _), (rb, peak_b, process_b) = short, long
    gen = max(0.0, (rb.cost["generation_seconds"] - ra.cost["generation_seconds"]) / steps)
    train_a = ra.wall_seconds - ra.cost["eval_seconds"] - ra.cost["generation_seconds"]
    train_b = rb.wall_seconds - rb.cost["eval_seconds"] - rb.cost["generation_seconds"]
    training = max(0.0, (train_b - train_a) / steps)
    fixed = max(0.0, rb.wall_seconds - (1 + steps) * (gen + training))
    tokens = rb.cost["completion_tokens"] / max(1, rb.cost["completions"])
    return RunCost(fixed=fixed, generation=gen, training=training, eval_end=rb.cost["eval_seconds"],
                   mean_length=tokens, source=f"a pilot of the baseline on this machine "
                   f"(1 and {1 + steps} steps, {threads} thread(s))",
                   peak_mib=rb.cost.get("peak_gpu_mib") or max(peak_a, peak_b),
                   peak_on="GPU" if rb.cost.get("peak_gpu_mib") else "CPU", pilot_seconds=spent,
                   process_start=max(0.0, process_b - rb.wall_seconds),
                   start_eval=max(0.0, ra.cost["eval_seconds"] - rb.cost["eval_seconds"]))


# The presets' hub checkpoints, for a machine that has not downloaded their config.json.
KNOWN_PARAMETERS = {"Qwen/Qwen2.5-1.5B-Instruct": 1.54e9, "Qwen/Qwen2.5-7B-Instruct": 7.62e9,
                    "Qwen/Qwen2.5-14B-Instruct": 14.77e9}
# Above this, a pilot on a CPU takes hours (and the sweep would run on GPUs anyway).
CPU_PILOT_PARAMETERS = 1e9
WAYS_OUT = ("allowed: --from PATH (the records of earlier runs of this model, e.g. a sweep on "
            "the cluster), or plan on a machine with a CUDA device")


def parameter_count(model: dict) -> float | None:
    """The policy's parameters, from its config.json (a local checkpoint, or the hub cache)
    or the presets' table; None where neither says (the embedded and packaged policies are
    small)."""
    path = model.get("path")
    if path is None:
        return None
    local = Path(str(path)).expanduser() / "config.json"
    if not local.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(str(path), "config.json")
            local = Path(cached) if isinstance(cached, str) else None
        except Exception:  # noqa: BLE001 - not a hub id: nothing cached
            local = None
    if local is not None and local.is_file():
        return parameters_of(json.loads(local.read_text()))
    return KNOWN_PARAMETERS.get(str(path))


def parameters_of(cfg: dict) -> float | None:
    """A decoder's parameter count from its config: embeddings (twice when untied), and per
    layer the attention (grouped key/value heads) and a gated MLP."""
    cfg = cfg.get("text_config", cfg)
    try:
        h, layers, vocab = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    except KeyError:
        return None
    inner = cfg.get("intermediate_size", 4 * h)
    heads = cfg.get("num_attention_heads", 1)
    kv = cfg.get("num_key_value_heads") or heads
    attention = 2 * h * h + 2 * h * (h * kv // heads)
    embeddings = vocab * h * (1 if cfg.get("tie_word_embeddings", False) else 2)
    return float(layers * (attention + 3 * h * inner) + embeddings)


def check_pilot_fits(cfg: dict) -> None:
    """A pilot on this machine that cannot run is refused before it starts: a policy of a
    billion parameters or more without a CUDA device, or fp32 weights of the policy and its
    reference over this machine's memory."""
    params = parameter_count(cfg["model"])
    if params is None or cuda_available():
        return
    name = f"model={cfg['model']['name']} ({params / 1e9:.1f}B parameters)"
    if params >= CPU_PILOT_PARAMETERS:
        raise UserError(f"plan: {name}: piloting it needs a CUDA device, and this machine has "
                        f"none; {WAYS_OUT}")
    need, ram = 2 * 4 * params / 2**20, device_memory_mib("CPU")
    if ram is not None and need > ram:
        raise UserError(f"plan: {name}: the policy and its reference in fp32 take "
                        f"{need / 1024:.0f} GiB, over this machine's {ram / 1024:.0f} GiB; "
                        f"{WAYS_OUT}")


def _pilot_run(overrides: list[str], steps: int, out: Path, threads: int):
    pilot = [o for o in overrides if o.split("=", 1)[0].lstrip("+") not in (
        "trick", "seed", "sweep", "launcher", "out_root", "run_cache")
        and not o.startswith("hydra.")]
    cmd = [sys.executable, "-m", "grpo_ablate.cli", "run", *pilot, "trick=baseline", "seed=0",
           f"trainer.max_steps={steps}", "eval.every_steps=0", f"out_root={out}", "run_cache=null"]
    env = {**os.environ, "WANDB_MODE": "disabled", "GRPO_ABLATE_THREADS": str(threads)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        why = (err.strip().splitlines() or ["no error message"])[-1]
        why = why.removeprefix("grpo-ablate: ").removeprefix("error: ")
        raise UserError(f"plan: the pilot run of the baseline failed ({why}); allowed: fix what "
                        "it names, or --from PATH to cost from the records of earlier runs of "
                        "this model")
    (path,) = out.glob(f"*/runs/*/{RECORD_NAME}")
    return read_record(path), usage.ru_maxrss / 1024, took


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


def forecast(overrides: list[str], pilot_steps: int = 3, length: float | None = None,
             sims: int = 200, from_folders: list[Path] | None = None) -> Forecast:
    specs = specs_for(overrides, multirun=True)
    check_task_configs([s.config["task"] for s in specs])
    recorded = sum(record_exists(s.run_dir) for s in specs)
    cached = sum(1 for s in specs if not record_exists(s.run_dir) and run_cache.lookup(s))
    arms = sorted({s.arm for s in specs})
    strata = len({(s.config["model"]["name"], s.config["task"]["name"]) for s in specs})
    baseline = next((s for s in specs if s.arm == "baseline"), specs[0])
    launch = launcher_of(overrides)
    cost = cost_from(from_folders, baseline) if from_folders else recorded_cost(baseline)
    if cost is None:
        check_pilot_fits(baseline.config)
        say(f"plan: no finished run of the baseline's config: piloting it ({1 + pilot_steps} "
            "steps in all) on this machine")
        cost = pilot_cost(baseline, overrides, pilot_steps, launch.threads)
    cfg = baseline.config
    steps, every = cfg["trainer"]["max_steps"], cfg["eval"]["every_steps"]
    between = (steps - 1) // every if every else 0
    per_run = cost.seconds(steps, between, cfg["eval"]["sampled_k"], length)
    todo = len(specs) - recorded - cached
    if cfg["adaptive"]["enabled"]:
        runs = adaptive_runs(baseline, len(arms) - 1, strata, sims)
        done = recorded + cached
        runs = {k: max(0.0, v - done) for k, v in runs.items()}
        launches = len(cfg["adaptive"]["rungs"])
    else:
        runs, launches = {"to train": float(todo)}, 1
    extra = overhead(cost, launches, len({s.seed for s in specs}), launch.workers)
    wall = {k: wall_seconds(n, per_run, launch.workers, extra) for k, n in runs.items()}
    gpu = {k: n * per_run * launch.gpus_per_run / 3600 for k, n in runs.items()}
    return Forecast(jobs=len(specs), recorded=recorded, cached=cached, arms=len(arms),
                    seeds=len({s.seed for s in specs}), strata=strata, runs=runs,
                    per_run=per_run, cost=cost, launch=launch, wall=wall, gpu_hours=gpu,
                    extra=extra)


def device_memory_mib(on: str) -> float | None:
    """The memory the peak is measured against: the first GPU's, or this machine's RAM."""
    if on == "GPU":
        import torch  # heavy: only where the pilot ran on a GPU

        return torch.cuda.get_device_properties(0).total_memory / 2**20
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError):
        return None


def render(f: Forecast, length: float | None) -> str:
    c, la = f.cost, f.launch
    lines = [f"plan: {f.jobs} jobs ({f.arms} arms x {f.seeds} seeds"
             + (f", {f.strata} strata" if f.strata > 1 else "") + f"); {f.recorded} recorded, "
             f"{f.cached} in the run cache, {f.jobs - f.recorded - f.cached} to train"]
    for k, n in f.runs.items():
        lines.append(f"  runs {k}: {n:.0f}")
    scale = f" at {length:.0f} tokens per completion (measured {c.mean_length:.1f})" \
        if length else f" (completions of {c.mean_length:.1f} tokens)"
    lines.append(f"  one run: {duration(f.per_run)} = {c.fixed:.1f} s fixed (load, "
                 f"evaluations) + per step {c.generation:.3f} s generation + "
                 f"{c.training:.3f} s training{scale}; from {c.source}")
    if c.pilot_seconds is not None:
        lines.append(f"  the pilot itself: {c.pilot_seconds:.0f} s; a run process starts in "
                     f"{c.process_start:.1f} s, the starting policy's evaluation "
                     f"{c.start_eval:.1f} s once per seed")
    if c.peak_mib is not None:
        total = device_memory_mib(c.peak_on)
        where = "the GPU" if c.peak_on == "GPU" else "this machine"
        lines.append(f"  peak memory of one run: {c.peak_mib / 1024:.2f} GiB" + (
            f" of {total / 1024:.1f} GiB on {where}" if total else ""))
    lines.append(f"  launcher {la.name}: {la.workers} run(s) at once, {la.threads} thread(s) "
                 f"and {la.gpus_per_run} GPU(s) each")
    for k, w in f.wall.items():
        gpu = f"{f.gpu_hours[k]:.1f} GPU-hours" if la.gpus_per_run else "no GPU"
        lines.append(f"  predicted wall time, {k}: {duration(w)}; {gpu}")
    return "\n".join(lines)

