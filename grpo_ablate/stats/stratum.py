"""One (model, task) slice of the results as seed x arm tables, and one arm's comparison
with another on them, on every run: for matched runs paired (the partially overlapping test
where some runs lack a partner), for independent runs Welch's; chosen from the design,
never from the results."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from grpo_ablate.records import jsonable
from grpo_ablate.stats.significance import (
    Comparison,
    overlap_compare,
    paired_compare,
    welch_compare,
)

RUNS = ("matched", "independent")


def compare(seeds: np.ndarray, a: np.ndarray, has_a: np.ndarray, b: np.ndarray,
            has_b: np.ndarray, min_effect: float, robust: bool = True,
            runs: str = "matched") -> Comparison:
    """One arm against the baseline, both aligned on `seeds` (NaN where a value is absent;
    `has_*` marks the seeds that have a run). Every run with a value counts, and the n, mean
    and diff the report shows describe the same runs the test used.

    `runs="matched"` (seed s gives both arms the same data order and prompts): the paired t
    when every run has its partner; the partially overlapping samples t-test when some do
    not (the pairs and the unpaired runs together); Welch's when fewer than 2 seeds are
    shared. `runs="independent"` (runs of other trainers numbered 1..n, or any runs that
    share nothing but a number): Welch's t-test on all runs, whatever the seed numbers say.
    Missing or non-finite values are excluded, with a note.
    """
    notes = []
    va, vb = ~np.isnan(a), ~np.isnan(b)
    nan_a, nan_b = seeds[has_a & ~va].tolist(), seeds[has_b & ~vb].tolist()
    if nan_a or nan_b:
        notes.append(f"metric missing or non-finite for seeds {nan_a} (arm), {nan_b} "
                     "(baseline): excluded")
    common = va & vb
    only_a, only_b = seeds[va & ~vb].tolist(), seeds[vb & ~va].tolist()
    if runs == "independent":
        out = welch_compare(a[va], b[vb], min_effect, robust=robust)
    elif common.sum() >= 2 and not only_a and not only_b:
        out = paired_compare(a[common], b[common], min_effect, robust=robust)
    elif common.sum() >= 2 and va.sum() >= 2 and vb.sum() >= 2:
        notes.append(f"{int(common.sum())} matched seeds and {len(only_a)} arm / {len(only_b)} "
                     f"baseline runs without a partner (arm seeds {only_a}, baseline seeds "
                     f"{only_b}): the partially overlapping samples t-test on all "
                     f"{int(va.sum())} + {int(vb.sum())} runs")
        out = overlap_compare(a[va], b[vb], np.column_stack([a[common], b[common]]), min_effect)
        if robust:  # the robustness columns (never deciding) of the two samples, all runs
            w = welch_compare(a[va], b[vb], min_effect, robust=True)
            out = replace(out, robust_p=w.robust_p, permutation_p=w.permutation_p,
                          prob_improvement=w.prob_improvement)
    else:
        notes.append(f"seeds not matched (arm only: {only_a}, baseline only: {only_b}): "
                     "Welch's t-test on all runs")
        out = welch_compare(a[va], b[vb], min_effect, robust=robust)
    out.notes = notes + out.notes
    return out


def clean(x):
    """A JSON-ready value: NaN and inf become None, numpy scalars Python ones."""
    return jsonable(x.item() if isinstance(x, np.floating | np.integer) else x)


def mean_std(x: np.ndarray) -> tuple[float | None, float | None]:
    x = x[~np.isnan(x)]
    return (float(x.mean()) if len(x) else None, float(x.std(ddof=1)) if len(x) > 1 else None)


class Stratum:
    """One (model, task) slice as seed x arm tables, one per metric, built once: every
    comparison then works on numpy columns, never on row filters."""

    def __init__(self, sub: pd.DataFrame, baseline: str, metrics: list[str],
                 runs: str = "matched") -> None:
        self.sub = sub
        self.runs = runs  # matched | independent: how the runs were made (RUNS)
        self.baseline = baseline
        self.arms = [a for a in dict.fromkeys(sub["arm"]) if a != baseline]
        usable = sub[sub["status"].to_numpy() != "failed"]
        order = [baseline, *self.arms]
        self.column_of = {arm: j for j, arm in enumerate(order)}
        present = usable[["seed", "arm"]].assign(_run=1.0).pivot(index="seed", columns="arm",
                                                                 values="_run")
        self.seeds = present.index.to_numpy()
        self.has = present.reindex(columns=order).notna().to_numpy()
        wide = usable.pivot(index="seed", columns="arm", values=metrics) if metrics else None
        self.tables = {m: wide[m].reindex(index=present.index, columns=order).to_numpy(dtype=float)
                       for m in metrics}
        status = sub.groupby("arm")["status"].value_counts().unstack(fill_value=0)
        self.counts = {arm: (int(row.get("diverged", 0)), int(row.get("failed", 0)))
                       for arm, row in status.iterrows()}
        # The arm each is compared with: its trick file's `against` (one it can act on, e.g.
        # an off-policy arm for the clip variants), else the baseline.
        named = sub.dropna(subset=["against"]) if "against" in sub.columns else None
        pairs = [] if named is None else [
            (a, str(b)) for a, b in zip(named["arm"], named["against"], strict=True)
            if str(b).strip() and b != a]
        self.against = {a: b for a, b in pairs if b in self.column_of}
        self.missing_against = {a: b for a, b in pairs if b not in self.column_of}

    def against_of(self, arm: str) -> str:
        return self.against.get(arm, self.baseline)

    def column(self, arm: str, metric: str) -> np.ndarray:
        if metric not in self.tables:
            return np.full(len(self.seeds), np.nan)
        return self.tables[metric][:, self.column_of[arm]]

    def compare(self, arm: str, other: str, metric: str, min_effect: float, robust: bool,
                other_metric: str | None = None) -> Comparison:
        j, k = self.column_of[arm], self.column_of[other]
        return compare(self.seeds, self.column(arm, metric), self.has[:, j],
                       self.column(other, other_metric or metric), self.has[:, k], min_effect,
                       robust, self.runs)


