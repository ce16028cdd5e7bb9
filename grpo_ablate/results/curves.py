"""Each run's learning curve as rows: one per evaluation, `model, task, arm, seed, step,
compute, value`, read from the history beside each record, from another trainer's long CSV
(a `step` column, optionally `tokens`: one row per run and evaluation), or from
lm-evaluation-harness sample logs of checkpoints (named by a manifest's `step` column or by
their folders, results/lm_eval.py: a run's value at a step is its checkpoint's mean over the
documents). Compute is the run's
cumulative training tokens at the evaluation where every row gives them (TRL's `num_tokens`,
the CSV's `tokens`), else its steps: the unit is named in the table's `compute_unit`.

A run table read from a CSV or the harness says where its curves are in `curve_source` (a
JSON object: `{"csv": path}` or `{"lm_eval": [folders], "manifest": path}`), read again for
the curve section, as a record's curve is read from its sweep folder."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from grpo_ablate.errors import UserError
from grpo_ablate.records import read_history
from grpo_ablate.results.csv_file import read_csv

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


def curve_csv(df: pd.DataFrame, path: str) -> pd.DataFrame:
    """A long CSV with a `step` column (a row per run and evaluation) as the run table: each
    run's metrics are its last evaluated values, its status its last row's, and its
    `curve_source` the file, read again for the curve section (`curve_table`)."""
    rows = curve_rows(df, path)
    final = rows.groupby(KEY, sort=False, as_index=False).last()  # last non-missing values
    final = final.drop(columns=[c for c in ("step", "tokens") if c in final.columns])
    final["curve_source"] = json.dumps({"csv": str(path)})
    return final


def last_checkpoint(long: pd.DataFrame, paths: list[Path], manifest: Path | None
                    ) -> tuple[pd.DataFrame, str]:
    """The harness's rows of checkpoints (a `step` column): each run's rows at its largest
    step, which are its final evaluation, and the `curve_source` of the curves."""
    last = long.groupby(KEY)["step"].transform("max")
    final = long[long["step"] == last].drop(columns="step").reset_index(drop=True)
    source = json.dumps({"lm_eval": [str(Path(p).resolve()) for p in paths],
                         "manifest": str(Path(manifest).resolve()) if manifest else None})
    return final, source


def lm_eval_curve_rows(spec: dict) -> pd.DataFrame:
    """Each checkpoint's mean over its documents, one row per run and step."""
    from grpo_ablate.results.lm_eval import lm_eval_rows

    manifest = Path(spec["manifest"]) if spec.get("manifest") else None
    long, _ = lm_eval_rows([Path(p) for p in spec["lm_eval"]], manifest)
    metrics = [c for c in long.columns if c not in (*KEY, "status", "step", "prompt")
               and pd.api.types.is_numeric_dtype(long[c])]
    return long.groupby([*KEY, "step"], as_index=False)[metrics].mean()


def curve_rows(df: pd.DataFrame, path: str) -> pd.DataFrame:
    """A long CSV's rows checked: integer steps, numeric tokens, one row per run and step
    (an exact copy kept once, conflicting copies refused in one line)."""
    if "prompt" in df.columns:
        raise UserError(f"{path}: both a step and a prompt column; allowed: one row per run and "
                        "step (curves), or per run and prompt (the final evaluation), one file each")
    steps = pd.to_numeric(df["step"], errors="coerce")
    bad = df.index[steps.isna() | (steps % 1 != 0) | (steps < 0)]
    if len(bad):
        raise UserError(f"{path}: column step must hold integers >= 0; row {bad[0] + 2} holds "
                        f"{df.loc[bad[0], 'step']!r}")
    df = df.assign(step=steps.astype(int))
    if "tokens" in df.columns and not pd.api.types.is_float_dtype(df["tokens"]):
        raise UserError(f"{path}: column tokens must hold numbers (blank where unknown)")
    key = [*KEY, "step"]
    dup = df[df.duplicated(key, keep=False)]
    values = [c for c in df.columns if c not in key]
    conflicts = [k for k, g in dup.groupby(key, sort=True)
                 if len(g[values].astype(str).drop_duplicates()) > 1]
    if conflicts:
        m, t, a, s_, st = conflicts[0]
        raise UserError(f"{path}: two rows of arm={a} seed={s_} step={st} with different "
                        "values; allowed: one row per (model, task, arm, seed, step)")
    return df.drop_duplicates(key).sort_values(key).reset_index(drop=True)


def curve_table(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The curves of the runs a results table lists (its `sweep_dir` and `run_id`, or a long
    CSV's `curve_source`), one row per evaluation; compute in tokens where every run gives
    them, else in steps."""
    if "curve_source" in runs and runs["curve_source"].notna().any():
        spec = json.loads(runs["curve_source"].dropna().iloc[0])
        given = curve_rows(read_csv(Path(spec["csv"])), spec["csv"]) if "csv" in spec \
            else lm_eval_curve_rows(spec)
        return _table_from_rows(given, runs, metric)
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


def _table_from_rows(given: pd.DataFrame, runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Curve rows (a long CSV's, the harness's checkpoints') for the runs `runs` lists, the
    metric's evaluations only."""
    listed = runs[KEY].astype({"seed": int}).drop_duplicates()
    rows = given.merge(listed, on=KEY, how="inner")
    rows = rows[rows[metric].notna()] if metric in rows else rows.iloc[0:0]
    has_tokens = "tokens" in rows and bool(rows["tokens"].notna().all()) and len(rows) > 0
    table = pd.DataFrame({**{k: rows[k] for k in KEY}, "step": rows["step"].astype(int),
                          "tokens": rows["tokens"].astype(float) if has_tokens else None,
                          "value": rows[metric].astype(float) if len(rows) else []},
                         columns=[*KEY, "step", "tokens", "value"]).reset_index(drop=True)
    unit = "tokens" if has_tokens else "steps"
    table["compute"] = table["tokens"] if has_tokens else table["step"].astype(float)
    table.attrs.update(compute_unit=unit, metric=metric)
    return table
