"""A results CSV read as a table, one row per CSV row: its identity columns checked (arm,
seed; optional model, task, status), its run ids and declared design kept as text, every
other column a metric as float64 (blank -> NaN), or left as text where a cell is not a number,
so that the statistics can name it (docs/contracts.md, "CSV input for the report")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from grpo_ablate.errors import UserError
from grpo_ablate.records import STATUSES
from grpo_ablate.stats.columns import ID_COLUMNS

TEXT_COLUMNS = ("run_id", "design")  # a CSV's run ids and declared design stay text


def read_csv(path: Path) -> pd.DataFrame:
    """A results CSV with its identity columns checked and its metrics as numbers."""
    if not path.is_file():
        raise UserError(f"{path}: no such file or folder; allowed: a sweep folder or a CSV")
    if path.suffix == ".json":
        raise UserError(f"{path}: a JSON file; allowed: a sweep folder (its runs/*/record.json "
                        "are read) or a CSV")
    try:
        # Identity columns as plain strings; metrics as text first, converted below so a bad
        # cell can be named.
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a readable CSV ({exc.__class__.__name__})") from None
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in ("arm", "seed") if c not in df.columns]
    if missing:
        raise UserError(f"{path}: CSV lacks column(s) {', '.join(missing)}; required: arm, seed, "
                        "one column per metric; optional: model, task, status")
    df = df.astype(object)
    for col in ("arm", "model", "task", "status"):
        if col in df.columns:
            df[col] = df[col].map(lambda v: str(v).strip())
    seeds = pd.to_numeric(df["seed"].str.strip(), errors="coerce")
    bad = df.index[seeds.isna() | (seeds % 1 != 0)]
    if len(bad):
        raise UserError(f"{path}: column seed must hold integers; row {bad[0] + 2} holds "
                        f"{df.loc[bad[0], 'seed']!r}")
    df["seed"] = seeds.astype(int)
    for col in ("arm", "model", "task"):
        if col in df.columns:
            empty = df.index[df[col] == ""]
            if len(empty):
                rows = ", ".join(str(i + 2) for i in empty[:5])
                raise UserError(f"{path}: empty {col} cell in row(s) {rows}; allowed: a name in "
                                f"every row (or no {col} column at all)")
    for col, default in (("model", "-"), ("task", "-"), ("status", "completed")):
        if col not in df.columns:
            df[col] = default
    # Blank status = completed, as when the column is absent; any other spelling of a known
    # status is normalised; an unknown status is refused.
    df["status"] = df["status"].str.lower().replace("", "completed")
    unknown = sorted(set(df["status"]) - set(STATUSES))
    if unknown:
        raise UserError(f"{path}: status {unknown[0]!r} unknown; allowed: "
                        f"{', '.join(STATUSES)} (any case), or blank for completed")
    for col in df.columns:
        if col not in ID_COLUMNS and col not in TEXT_COLUMNS:
            df[col] = _numeric_or_text(df[col])
    return df


def _numeric_or_text(col: pd.Series) -> pd.Series:
    """A metric column as float64 (blank -> NaN), or left as text if a cell is not a number."""
    text = col.map(lambda v: str(v).strip())
    num = pd.to_numeric(text.replace("", np.nan), errors="coerce")
    bad = num.isna() & (text != "") & ~text.str.lower().isin(["nan", "na", "null", "none"])
    return col if bad.any() else num.astype(float)
