"""An early-stop sweep (`grpo-ablate sweep early_stop=true`): its plan, its next look from
the records and pause files on disk, and the loop that trains each look's runs.

Every run of the open arms and the baseline trains to the next look (a fraction of its
steps) and pauses there, its checkpoint kept (records.PAUSE_NAME); the look is then taken
from the runs (stats/early_stop.py) and a settled arm's runs stay where they are. The rest
go on from their checkpoints to the next look, and after the last early look to their end.
Which runs come next is recomputed from disk every time, so a killed sweep resumes like any
other. `early_stop.extend=true` then trains the stopped runs to their full length."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_ablate.config import model_label
from grpo_ablate.errors import UserError
from grpo_ablate.launch import sweep
from grpo_ablate.launch.adaptive import arms_against_the_baseline
from grpo_ablate.results.early_stop import paused_runs, plan_of, with_looks, write_stop_plan
from grpo_ablate.results.plan_file import BASELINE
from grpo_ablate.results.table import load_results
from grpo_ablate.runtime import say
from grpo_ablate.stats.early_stop import StopPlan, replay_stops, stop_columns
from grpo_ablate.stats.stratum import Stratum
from grpo_ablate.stats.verdicts import default_direction

PAUSE_KEY = "early_stop.pause_at"


def look_table(sweep_dir: Path, plan: StopPlan) -> pd.DataFrame:
    """Every run of the sweep with its look columns: the records and the paused runs."""
    if any(Path(sweep_dir).glob("runs/*/record.json")):
        df, _ = load_results([Path(sweep_dir)])
    else:
        df = pd.DataFrame(columns=["arm", "seed", "model", "task", "status", "run_id",
                                   "sweep_dir"])
    return with_looks(df, plan, [Path(sweep_dir)])


def next_look(sweep_dir: Path, plan: StopPlan, strata: list[tuple[str, str]],
              direction: str) -> tuple[int, list[str]] | None:
    """(the first 0-based look some stratum still needs, the arms open there), or None when
    every stratum's looks are taken."""
    df = look_table(sweep_dir, plan)
    df = df[df["arm"].isin([BASELINE, *plan.arms]) & (df["status"] != "failed")]
    columns = [plan.metric, *stop_columns(plan)]
    wanted: dict[int, set[str]] = {}
    for model, task in strata:
        sub = df[(df["model"] == model) & (df["task"] == task)]
        if sub.empty or BASELINE not in set(sub["arm"]):
            wanted.setdefault(0, set()).update(plan.arms)
            continue
        st = Stratum(sub, BASELINE, [c for c in columns if c in sub.columns])
        ladder, pending = replay_stops(st, plan, direction)
        if pending is not None:
            wanted.setdefault(pending, set()).update(ladder.open)
    if not wanted:
        return None
    look = min(wanted)
    return look, [a for a in plan.arms if a in wanted[look]]


def run_stop_looks(specs: list, fixed: list[str], compose: Callable[[list[str]], list],
                   launch: Callable[[list[list[str]]], Any]) -> int:
    """Run an early-stop sweep to its end (and, with early_stop.extend, its stopped runs to
    theirs). Returns 0, or 1 when a look's runs left no record or pause (held by another
    sweep, or killed)."""
    arms = arms_against_the_baseline(specs, "early_stop=true", "the looks")
    seeds = sorted({s.seed for s in specs})
    if seeds != list(range(len(seeds))) or len(seeds) < 2:
        raise UserError(f"early_stop=true: seeds {seeds}; allowed: seeds 0..n-1, n >= 2 (each "
                        "look pairs the arms on them)")
    block, sweep_dir = specs[0].config["early_stop"], specs[0].sweep_dir
    plan = plan_of(block, arms, len(seeds))
    strata = sorted({(model_label(s.config), s.config["task"]["name"]) for s in specs})
    body = write_stop_plan(sweep_dir, plan)
    say(f"early stop: {len(arms)} arms x {len(seeds)} seeds, looks at "
        + ", ".join(f"{f:g}" for f in plan.looks) + f" of the steps ({plan.rule}), alpha "
        f"{plan.alpha} on {plan.metric}; boundary p per look at alpha/arms: "
        + ", ".join(f"{r['p_boundary']:.2g}" for r in body["looks"]))
    direction = default_direction(plan.metric)
    t0, trained, last = time.perf_counter(), 0, None
    while (step := next_look(sweep_dir, plan, strata, direction)) is not None:
        if step == last:
            say(f"grpo-ablate: early-stop look {step[0] + 1}: runs of {', '.join(step[1])} "
                "left no record or pause (held by another sweep, or killed); run the same "
                "command again to resume")
            return 1
        look, open_arms = step
        final = look == len(plan.looks)
        at = "null" if final else f"{plan.looks[look]:g}"
        what = (f"early-stop look {look + 1}/{len(plan.looks) + 1}: {len(open_arms)} open "
                "arms + baseline, " + ("to the end" if final
                                       else f"to {plan.looks[look]:g} of their steps"))
        trained += sweep.launch_unfinished(
            compose([*fixed, f"trick={','.join([BASELINE, *open_arms])}",
                     f"seed={','.join(map(str, seeds))}", f"{PAUSE_KEY}={at}"]), launch,
            lambda todo, reused, what=what: f"{what}: {todo} to train"
            + (f", {reused} reused from the run cache" if reused else ""))
        last = step
    stopped = paused_runs(sweep_dir)
    if stopped and block["extend"]:
        names = sorted({p["arm"] for p in stopped})
        trained += sweep.launch_unfinished(
            compose([*fixed, f"trick={','.join(names)}", f"seed={','.join(map(str, seeds))}",
                     f"{PAUSE_KEY}=null"]), launch,
            lambda todo, reused: f"early stop, extend: {todo} stopped runs to their end")
    elif stopped:
        say(f"early stop: {len(stopped)} runs stopped at a look (their checkpoints kept); "
            "early_stop.extend=true trains them to their end")
    say(f"early-stop sweep finished in {time.perf_counter() - t0:.0f}s ({trained} runs "
        "trained this time)")
    return 0
