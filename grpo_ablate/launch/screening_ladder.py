"""An adaptive screening (`grpo-ablate sweep sweep=screening adaptive=true`): replicates of
the whole design at the plan's rungs, each rung one launch of every point x the seeds it
lacks, until every effect is settled or the cap is reached (stats/screening_looks.py). The
plan (rungs, alpha, margin, the effects) is declared in the sweep folder before the first
run and fixed; which rung comes next is recomputed from the records each time, so a killed
sweep resumes like any other."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_ablate.config.screening import read_design
from grpo_ablate.errors import UserError
from grpo_ablate.launch import sweep
from grpo_ablate.launch.adaptive import Rung
from grpo_ablate.results.plan_file import PLAN_NAME, write_plan
from grpo_ablate.runtime import say
from grpo_ablate.stats.sequential import Design


def screening_plan(block: dict, design: dict) -> Design:
    """The ladder's design over the screening's effects (main effects and chains)."""
    from grpo_ablate.report.screening import columns_of, term_text

    names = [f["name"] for f in design["factors"]]
    effects = tuple(term_text(t, names) for t in columns_of(design))
    return Design(rungs=tuple(block["rungs"]), alpha=float(block["alpha"]),
                  min_effect=float(block["min_effect"]), futility=float(block["futility"]),
                  metric=block["metric"], arms=effects, scope="prompts")


def next_screening_rung(sweep_dir: Path, design: dict, plan: Design) -> Rung | None:
    """The first look whose runs are not all recorded (every point x every seed below its
    rung), or None when every effect is settled or the cap is reached."""
    from grpo_ablate.report.screening import screening_report
    from grpo_ablate.results.table import load_results

    points = tuple(dict.fromkeys(design["points"]))
    first = Rung(0, points, tuple(range(plan.rungs[0])))
    if not any(Path(sweep_dir).glob("runs/*/record.json")):
        return first
    df, _ = load_results([Path(sweep_dir)])
    if plan.metric not in df.columns or df[df["arm"].isin(points)].empty:
        return first
    try:
        rep = screening_report(df, design, plan.metric, plan.alpha, plan.min_effect, None,
                               None, plan)
    except UserError:  # too few runs for the model yet: the first look's
        return first
    look = rep["adaptive"]["next_look"]
    if look is None:
        return None
    n = plan.rungs[look - 1]
    have = {(a, int(s)) for a, s, st in zip(df["arm"], df["seed"], df["status"], strict=True)
            if st != "failed"}
    return Rung(look - 1, points, tuple(s for s in range(n)
                                        if any((p, s) not in have for p in points)))


def run_screening_ladder(specs: list, fixed: list[str], compose: Callable[[list[str]], list],
                         launch: Callable[[list[list[str]]], Any]) -> int:
    """Run an adaptive screening to its end; 0, or 1 when a rung's runs left no record."""
    sweep_dir = specs[0].sweep_dir
    design = read_design(sweep_dir)
    if design is None:
        raise UserError(f"adaptive=true: {sweep_dir} holds no design.json; allowed: "
                        "grpo-ablate sweep sweep=screening adaptive=true")
    if len(set(design.get("fractions") or [0])) > 1:
        raise UserError("adaptive=true: this screening is folded over (two fractions); "
                        "allowed: a fixed number of seeds for a folded-over design")
    plan = screening_plan(specs[0].config["adaptive"], design)
    write_plan(sweep_dir, plan)
    say(f"adaptive screening: {len(plan.arms)} effects, replicates "
        f"{' -> '.join(map(str, plan.rungs))} of {len(set(design['points']))} points, alpha "
        f"{plan.alpha} on {plan.metric} (plan: {sweep_dir / PLAN_NAME})")
    t0, trained, last = time.perf_counter(), 0, None
    while (rung := next_screening_rung(sweep_dir, design, plan)) is not None:
        if rung == last:
            say(f"grpo-ablate: adaptive screening look {rung.look + 1}: runs on seeds "
                f"{list(rung.seeds)} left no record (held by another sweep, failed, or "
                "killed); run the same command again to resume")
            return 1
        trained += sweep.launch_unfinished(
            compose([*fixed, *rung.overrides()]), launch,
            lambda todo, reused, rung=rung: f"adaptive screening look {rung.look + 1}/"
            f"{len(plan.rungs)}: {len(rung.arms)} points x seeds < {plan.rungs[rung.look]}, "
            f"{todo} to train" + (f", {reused} reused from the run cache" if reused else ""))
        last = rung
    say(f"adaptive screening finished in {time.perf_counter() - t0:.0f}s ({trained} runs "
        "trained this time)")
    return 0
