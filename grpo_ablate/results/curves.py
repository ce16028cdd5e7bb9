"""Each run's learning curve as rows: one per evaluation, `model, task, arm, seed, step,
compute, value`, read from the history beside each record. Compute is the run's cumulative
training tokens at the evaluation where every row of the history gives them (TRL's
`num_tokens`), else its steps: the unit is named in the table's `compute_unit`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from grpo_ablate.records import read_history

KEY = ["model", "task", "arm", "seed"]


def run_curve(history: list[dict], metric: str) -> tuple[list[dict], str]:
    """(the evaluations of one run as {step, tokens, value}, the compute unit it can give)."""
    tokens_at = {}
    for row in history:
        if row.get("num_tokens") is not None:
            tokens_at[int(row["step"])] = float(row["num_tokens"])
    points = []
    for row in history:
        if row.get(metric) is None:
            continue
        step = int(row["step"])
        points.append({"step": step, "tokens": 0.0 if step == 0 else tokens_at.get(step),
                       "value": float(row[metric])})
    unit = "tokens" if points and all(p["tokens"] is not None for p in points) else "steps"
    return points, unit


def curve_table(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The curves of the runs a results table lists (its `sweep_dir` and `run_id`), one row
    per evaluation; compute in tokens where every run gives them, else in steps."""
    rows, units = [], set()
    for run in runs.itertuples(index=False):
        sweep_dir, run_id = getattr(run, "sweep_dir", None), getattr(run, "run_id", None)
        if not isinstance(sweep_dir, str) or not isinstance(run_id, str):
            continue
        points, unit = run_curve(read_history(Path(sweep_dir) / "runs" / run_id), metric)
        units.add(unit)
        ids = {k: getattr(run, k) for k in KEY}
        rows += [{**ids, **p} for p in points]
    table = pd.DataFrame(rows, columns=[*KEY, "step", "tokens", "value"])
    unit = "tokens" if units == {"tokens"} else "steps"
    table["compute"] = table["tokens"] if unit == "tokens" else table["step"].astype(float)
    table.attrs["compute_unit"] = unit
    table.attrs["metric"] = metric
    return table
