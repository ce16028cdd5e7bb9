"""Multiple-comparison control. NaN p-values (untestable arms) pass through as NaN and do
not count as hypotheses."""

from __future__ import annotations

import numpy as np


def _sorted_valid(pvalues: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p, an all-NaN output, indices of the non-NaN p-values in ascending order)."""
    p = np.asarray(pvalues, dtype=float)
    idx = np.flatnonzero(~np.isnan(p))
    return p, np.full_like(p, np.nan), idx[np.argsort(p[idx], kind="stable")]


def holm_adjust(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control)."""
    p, out, order = _sorted_valid(pvalues)
    m, running = len(order), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()


def bh_adjust(pvalues: list[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (false-discovery-rate control)."""
    p, out, order = _sorted_valid(pvalues)
    m, running = len(order), 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, p[i] * m / (rank + 1))
        out[i] = min(1.0, running)
    return out.tolist()


def adjust(pvalues: list[float], method: str) -> list[float]:
    return {"holm": holm_adjust, "bh": bh_adjust}[method](pvalues)
