"""One run's cost, apart (`grpo-ablate plan`): fixed seconds (model load, evaluations), seconds
of generation and of training per optimizer step, tokens per step, the devices, and where the
figures came from: finished records of the baseline's config (the sweep folder, the run
cache), records of the same model under `--from PATH`, or a pilot (launch/pilot.py)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from grpo_ablate.config import RunSpec, computation_key, model_label
from grpo_ablate.errors import UserError
from grpo_ablate.launch import run_cache
from grpo_ablate.records import RECORD_NAME, read_record, scan_records


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
    prompt_tokens: float = 0.0      # per optimizer step, every completion's prompt counted
    completion_tokens: float = 0.0  # per optimizer step
    devices: int = 1                # processes (GPUs) of the measured runs
    job_start: float = 0.0          # a Slurm job's seconds beyond its run's (start, imports)

    def scale(self, length: float | None) -> float:
        return (length / self.mean_length) if length and self.mean_length else 1.0

    def seconds(self, steps: int, evals_between: int, sampled_k: int, length: float | None) -> float:
        greedy = self.eval_end / (1 + sampled_k)  # an intermediate evaluation is greedy only
        return self.fixed + steps * self.scale(length) * (self.generation + self.training) \
            + evals_between * greedy

    def tokens_per_step(self, length: float | None) -> float:
        return self.prompt_tokens + self.completion_tokens * self.scale(length)

    def tokens_per_second_per_device(self, length: float | None) -> float:
        """verl's `perf/throughput`: prompt + completion tokens over step seconds x devices."""
        step = self.scale(length) * (self.generation + self.training)
        return self.tokens_per_step(length) / (step * self.devices) if step else 0.0


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
    timed = [r for r in same if r.cost.get("step_seconds")]
    if timed:  # the steps' own seconds: the rest of the run (load, evaluations) is fixed
        step = statistics.median(r.cost["step_seconds"] / r.steps for r in timed)
        training, fixed = max(0.0, step - gen), max(0.0, wall - steps * step)
    else:  # older records do not split setup from training: it is counted with the steps
        training, fixed = max(0.0, (wall - ev) / steps - gen), ev
    # eval_seconds holds every evaluation of a run: all in `fixed`, none added per step.
    return RunCost(fixed=fixed, generation=gen, training=training, eval_end=0.0,
                   mean_length=tokens, source=source, **tokens_of(same))


def tokens_of(records: list) -> dict:
    """Prompt and completion tokens per step and the devices, the medians over records."""
    return {"prompt_tokens": statistics.median(r.cost.get("prompt_tokens", 0) / r.steps
                                               for r in records),
            "completion_tokens": statistics.median(r.cost.get("completion_tokens", 0) / r.steps
                                                   for r in records),
            "devices": int(statistics.median(r.cost.get("devices", 1) for r in records))}
