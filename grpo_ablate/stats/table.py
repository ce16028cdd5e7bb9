"""Results as one table, one row per run: `arm, seed, model, task, status` plus one column
per metric. Read from a sweep folder of records or from a CSV (shared/DESIGN.md)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from grpo_ablate.errors import UserError

ID_COLUMNS = ("arm", "seed", "model", "task", "status")


def records_table(records) -> pd.DataFrame:
    rows = []
    for r in records:
        row = {"arm": r.arm, "seed": r.seed, "model": r.model, "task": r.task,
               "status": r.status, "run_id": r.run_id, "error": r.error,
               "n_diagnostics": len(r.diagnostics),
               "diagnostic_rules": ",".join(sorted({d["rule"] for d in r.diagnostics})),
               "completions": r.cost.get("completions"), "wall_seconds": r.wall_seconds}
        row.update({k: (float("nan") if v is None else v) for k, v in r.metrics.items()})
        row.update({f"stability/{k}": (float("nan") if v is None else v)
                    for k, v in r.stability.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def load_results(path: str | Path) -> tuple[pd.DataFrame, list[str]]:
    """The table and any warnings (corrupt records are reported by path and excluded)."""
    from grpo_ablate.store import scan_records

    path = Path(path)
    if path.is_dir():
        records, problems = scan_records(path)
        if not records:
            raise UserError(f"{path}: no valid run records under runs/*/record.json"
                            + (f" ({len(problems)} corrupt)" if problems else ""))
        return records_table(records), problems
    if not path.is_file():
        raise UserError(f"{path}: no such file or folder; allowed: a sweep folder or a CSV")
    if path.suffix == ".json":
        raise UserError(f"{path}: a JSON file; allowed: a sweep folder (its runs/*/record.json "
                        "are read) or a CSV")
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a readable CSV ({exc.__class__.__name__})") from None
    missing = [c for c in ("arm", "seed") if c not in df.columns]
    if missing:
        raise UserError(f"{path}: CSV lacks column(s) {', '.join(missing)}; required: arm, seed, "
                        "one column per metric; optional: model, task, status")
    if not pd.api.types.is_numeric_dtype(df["seed"]):
        raise UserError(f"{path}: column seed must hold integers")
    for col, default in (("model", "-"), ("task", "-"), ("status", "completed")):
        if col not in df.columns:
            df[col] = default
    df["arm"] = df["arm"].astype(str)
    return df, []
