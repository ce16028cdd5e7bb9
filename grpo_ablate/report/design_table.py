"""Any two-level experiment, from a table (`grpo-ablate report --design FILE.csv --metric
COLUMN`), as Minitab or JMP read one: a column per factor at two levels (-1/+1, -/+, off/on,
low/high, 0/1, or any two values: the smaller or the first seen is the low level), an
optional `block` (or `seed`) column for replicates and fractions, the response column. The
same analysis and report as a screening sweep's (report/screening.py): the design's points,
its alias chains and resolution measured from the columns, the error by the same rule. A
table whose columns do not form a two-level design it can analyse is refused in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from grpo_ablate.config.fractional import alias_chains, measured_resolution
from grpo_ablate.errors import UserError

LOW = {"-1", "-", "off", "low", "0", "false", "no", "minus"}
HIGH = {"1", "+1", "+", "on", "high", "true", "yes", "plus"}
BLOCKS = ("block", "seed", "replicate", "fraction")


def coded(column: pd.Series, name: str) -> np.ndarray:
    """A factor's two levels as -1/+1."""
    values = list(dict.fromkeys(column.astype(str).str.strip()))
    if len(values) != 2:
        raise UserError(f"--design: column {name} has {len(values)} distinct value(s) "
                        f"({', '.join(values[:4])}); allowed: a factor at two levels "
                        "(-1/+1, -/+, off/on), or name the factors with --factors A,B,...")
    low = next((v for v in values if v.lower() in LOW), None)
    if low is None:
        try:
            low = min(values, key=float)
        except ValueError:
            low = values[0]
    return np.where(column.astype(str).str.strip() == low, -1, 1)


def read_design_table(path: Path, metric: str, factors: list[str] | None = None
                      ) -> tuple[pd.DataFrame, dict]:
    """(the runs as the screening analysis reads them, the design as design.json holds it)."""
    if not path.is_file():
        raise UserError(f"--design {path}: no such file; allowed: a CSV of two-level runs")
    table = pd.read_csv(path)
    if metric not in table.columns:
        raise UserError(f"--design {path}: no column {metric}; allowed: --metric one of "
                        + ", ".join(table.columns))
    block = next((c for c in table.columns if c.lower() in BLOCKS), None)
    names = factors or [c for c in table.columns if c not in (metric, block)]
    missing = [f for f in names if f not in table.columns]
    if missing or len(names) < 2:
        raise UserError(f"--design {path}: factors {missing or names}: allowed: at least two "
                        "factor columns of the table")
    y = pd.to_numeric(table[metric], errors="coerce")
    if y.isna().any():
        raise UserError(f"--design {path}: {metric} is not a number on {int(y.isna().sum())} "
                        "row(s); allowed: a numeric response on every row")
    levels = np.column_stack([coded(table[f], f) for f in names])
    points = [tuple(r) for r in dict.fromkeys(tuple(int(v) for v in row) for row in levels)]
    design = np.asarray(points, dtype=int)
    mains = np.column_stack([np.ones(len(design)), design])
    if np.linalg.matrix_rank(mains) < mains.shape[1]:
        raise UserError(f"--design {path}: its {len(design)} distinct points do not estimate "
                        f"every main effect of {', '.join(names)} (two columns move together); "
                        "allowed: a two-level factorial or regular fraction of them")
    index = {p: i for i, p in enumerate(points)}
    point_names = ["(1)" if not any(v > 0 for v in p) else
                   "".join(n for n, v in zip(names, p, strict=True) if v > 0) for p in points]
    blocks = table[block].astype(str).tolist() if block else ["0"] * len(table)
    runs = pd.DataFrame({
        "arm": [point_names[index[tuple(int(v) for v in row)]] for row in levels],
        "seed": blocks, "status": "completed", "model": "-", "task": path.stem,
        metric: y.to_numpy(float)})
    runs["arm"] = runs["arm"].where(runs["arm"] != "(1)", "baseline")
    point_names = ["baseline" if n == "(1)" else n for n in point_names]
    chains = alias_chains(design)
    record = {
        "kind": "screening", "factors": [{"name": n, "family": n, "needs": None} for n in names],
        "design": design.tolist(), "resolution": measured_resolution(design),
        "drawn_by": f"the table {path.name}", "points": point_names,
        "fractions": [0] * len(design),
        "chains": [[{"term": [names[i] for i in t], "sign": s} for t, s in ch] for ch in chains],
    }
    return runs, record


def write_design_table_report(path: Path, settings, factors: list[str] | None = None) -> Path:
    """The screening report of a two-level table: report.md, report.json, figures/ beside it
    (`<stem>-report/`, or --out)."""
    from grpo_ablate.report.screening import write_design_report

    runs, design = read_design_table(path, settings.metric, factors)
    out = Path(settings.out) if settings.out else path.parent / f"{path.stem}-report"
    return write_design_report(runs, [], design, settings, out, path.stem, [path])
