"""An early-stop sweep's plan file, `<sweep>/early_stop_plan.json` (declared before the first
run, fixed after: looks chosen after seeing curves would void the error rates), and its runs'
values at each look, read from the records' histories and the pause files of runs that
stopped at a look (records.PAUSE_NAME)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_ablate.config.early_stop import pause_step
from grpo_ablate.errors import UserError
from grpo_ablate.records import PAUSE_NAME, read_history, read_pause
from grpo_ablate.results.plan_file import declare_once
from grpo_ablate.stats.early_stop import (
    LOOK_COLUMN,
    REACHED_COLUMN,
    TRAINED_COLUMN,
    StopPlan,
    look_value,
)

PLAN_NAME = "early_stop_plan.json"


def plan_of(block: dict, arms: list[str], seeds: int) -> StopPlan:
    """The plan a config's early_stop block and a sweep's arms and seeds declare."""
    return StopPlan(looks=tuple(block["looks"]), seeds=seeds, alpha=float(block["alpha"]),
                    min_effect=float(block["min_effect"]), metric=block["metric"],
                    rule=block["rule"], arms=tuple(arms))


def write_stop_plan(sweep_dir: Path, plan: StopPlan) -> dict:
    """Declare the plan, or check that this command asks for the one already declared."""
    path = Path(sweep_dir) / PLAN_NAME
    body = {"design": asdict(plan), "looks": plan.table(len(plan.arms)),
            "rules": "efficacy only at an early look: the paired t on each run's predicted "
                     "(extrapolated) or observed (observed) value p < the look's boundary "
                     "(O'Brien-Fleming-type spending over the looks and the end, Holm across "
                     "arms, sequentially rejective); at the end the adaptive ladder's last look"}
    return declare_once(path, body, lambda: read_stop_plan(sweep_dir), plan, lambda have: (
        f"early_stop: {path} declares looks {list(have.looks)}, rule {have.rule}, "
        f"alpha {have.alpha}, {have.seeds} seeds, {len(have.arms)} arms on "
        f"{have.metric}; this command asks for looks {list(plan.looks)}, rule "
        f"{plan.rule}, alpha {plan.alpha}, {plan.seeds} seeds, {len(plan.arms)} arms "
        f"on {plan.metric}; allowed: the declared plan (looks are fixed before the "
        "first run), or a new sweep_name"))


def read_stop_plan(sweep_dir: Path) -> StopPlan | None:
    path = Path(sweep_dir) / PLAN_NAME
    if not path.is_file():
        return None
    try:
        d = json.loads(path.read_text())["design"]
        return StopPlan(looks=tuple(d["looks"]), seeds=int(d["seeds"]), alpha=d["alpha"],
                        min_effect=d["min_effect"], metric=d["metric"], rule=d["rule"],
                        arms=tuple(d["arms"]), scope=d.get("scope", "task"))
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not a readable early-stop plan ({exc}); allowed: the file "
                        "`grpo-ablate sweep early_stop=true` wrote") from None


def paused_runs(sweep_dir: Path) -> list[dict]:
    """The pause files of runs stopped at a look (no record yet), each with its folder."""
    out = []
    for path in sorted(Path(sweep_dir).glob(f"runs/*/{PAUSE_NAME}")):
        if (path.parent / "record.json").is_file():
            continue
        data = read_pause(path.parent)
        if data is not None:
            out.append({**data, "run_dir": str(path.parent)})
    return out


def _looks_of(config: dict, history: list[dict], plan: StopPlan, steps_trained: int,
              finished: bool = False) -> dict[str, float]:
    """One run's look columns: whether it reached each look (a finished run, one that
    diverged early included, has reached them all), its value there (NaN where it was not
    evaluated there), and the share of its steps it trained."""
    points = [(int(r["step"]), float(r[plan.metric])) for r in history
              if r.get(plan.metric) is not None]
    steps = np.array([p[0] for p in points], int)
    values = np.array([p[1] for p in points], float)
    last = config["trainer"]["max_steps"]
    reached = max(steps, default=0)
    # A finished run trained as far as it ever would (a diverged one stopped on its own).
    out = {TRAINED_COLUMN: 1.0 if finished else steps_trained / last}
    for k, fraction in enumerate(plan.looks, start=1):
        at = pause_step(config, fraction)
        there = finished or (at is not None and reached >= at)
        out[REACHED_COLUMN.format(k=k)] = 1.0 if there else 0.0
        out[LOOK_COLUMN.format(k=k)] = look_value(steps, values, at, last, plan.rule) \
            if there and at is not None else math.nan
    return out


def with_looks(df: pd.DataFrame, plan: StopPlan, sweep_dirs: list[Path]) -> pd.DataFrame:
    """The results table (of these sweep folders' records) with every run's look columns,
    and a row (status `paused`, no final metrics) for each run that stopped at a look."""
    rows, looks = [], {}
    for sweep_dir in map(str, sweep_dirs):
        for p in paused_runs(Path(sweep_dir)):
            config = p.get("config") or {}
            rows.append({"arm": p["arm"], "seed": p["seed"], "model": p["model"],
                         "task": p["task"], "status": "paused", "run_id": p["run_id"],
                         "sweep_dir": sweep_dir,
                         "activity": (p.get("activity") or {}).get("acted", math.nan),
                         **_looks_of(config, p["history"], plan, p["step"])})
    for run_id, sweep_dir in zip(df["run_id"], df["sweep_dir"], strict=True):
        run_dir = Path(str(sweep_dir)) / "runs" / str(run_id)
        record = json.loads((run_dir / "record.json").read_text())
        looks[run_id] = _looks_of(record["config"], read_history(run_dir), plan,
                                  record["steps"], finished=record["status"] != "failed")
    if looks:
        extra = pd.DataFrame([looks[r] for r in df["run_id"]], index=df.index)
        df = pd.concat([df, extra], axis=1)
    if rows:
        df = pd.concat([df, pd.DataFrame(rows)], ignore_index=True)
    return df
