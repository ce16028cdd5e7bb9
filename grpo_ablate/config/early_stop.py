"""Runs that stop early (opt-in, `early_stop=true`): the steps where a run pauses for a look
and the rules that make a pause resumable to the uninterrupted record.

A look is a fraction of each run's own `trainer.max_steps` (a reuse arm trains more steps):
the run pauses at the first step at or after that fraction where it is held out evaluated
(`eval.every_steps`), its trainer's loss is logged (`logging_steps`) and TRL's buffered
completions are used up (a generation boundary), so its checkpoint there resumes bit for bit
(training/checkpoint.py) and the look sees an evaluation made at that very step."""

from __future__ import annotations

import math
from pathlib import Path

from grpo_ablate.errors import UserError
from grpo_ablate.records import read_pause

RULES = ("extrapolated", "observed")


def step_unit(data: dict) -> int:
    """The smallest step count between steps where a run may pause: an evaluation, a log
    and a generation boundary all fall there."""
    tr = data["trainer"]
    accumulation = tr["gradient_accumulation_steps"]
    cycle = (tr.get("steps_per_generation") or accumulation) * tr["num_iterations"]
    boundary = cycle // math.gcd(cycle, accumulation)
    return math.lcm(data["eval"]["every_steps"], max(1, tr.get("logging_steps") or 1), boundary)


def pause_step(data: dict, fraction: float) -> int | None:
    """The step a run pauses at for the look at `fraction` of its steps; None where no such
    step comes before its last."""
    unit, last = step_unit(data), data["trainer"]["max_steps"]
    step = unit * math.ceil(fraction * last / unit - 1e-9)
    return step if 0 < step < last else None


def job_pause_step(data: dict) -> int | None:
    """The step this job trains its run to, an early-stop look's (None: to its end)."""
    at = (data.get("early_stop") or {}).get("pause_at")
    return None if at is None else pause_step(data, at)


def paused_there(run_dir: Path, data: dict) -> int | None:
    """The step the run's pause file says it paused at, where that is this job's look or a
    later one (None: the job still has steps to train, or trains to the end)."""
    at, paused = job_pause_step(data), read_pause(run_dir)
    return paused["step"] if at is not None and paused and paused["step"] >= at else None


def check_early_stop(data: dict) -> None:
    """The early-stop block against the rest of the config, one line each."""
    es = data.get("early_stop") or {}
    if es.get("extend") and not es.get("enabled"):
        raise UserError("early_stop.extend=true trains the runs an early-stop sweep stopped; "
                        "allowed: with early_stop=true, on the sweep's own command")
    if not es.get("enabled") and es.get("pause_at") is None:
        return
    if (data.get("adaptive") or {}).get("enabled"):
        raise UserError("early_stop=true with adaptive=true: runs that stop early are looked "
                        "at over fixed seeds; allowed: one of the two")
    if data["eval"]["every_steps"] <= 0:
        raise UserError("early_stop=true needs held-out evaluations during training; allowed: "
                        "eval.every_steps > 0 (e.g. a tenth of trainer.max_steps)")
    looks = list(es["looks"])
    steps = [pause_step(data, f) for f in looks]
    for fraction, step in zip(looks, steps, strict=True):
        if step is None:
            raise UserError(
                f"early_stop.looks={looks}: the look at {fraction:g} of trainer.max_steps="
                f"{data['trainer']['max_steps']} has no step before the last where the run is "
                f"evaluated, logged and at a generation boundary (every {step_unit(data)} "
                "steps); allowed: earlier looks, more steps, or a smaller eval.every_steps")
    if len(set(steps)) < len(steps):
        raise UserError(f"early_stop.looks={looks}: two looks pause at the same step "
                        f"({steps}); allowed: looks at least {step_unit(data)} steps apart")
    at = es.get("pause_at")
    if at is not None and at not in looks:
        raise UserError(f"early_stop.pause_at={at}: not one of early_stop.looks={looks}; "
                        "allowed: a look's fraction, or null (set by the sweep)")
