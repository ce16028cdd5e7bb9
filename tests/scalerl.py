"""ScaleRL's saturating learning curve, written out from the paper for the tests that plant
curves (Khatri et al., "The Art of Scaling Reinforcement Learning Compute", 2025, eq. 1), so
that no curve test takes its truth from grpo_ablate's own fit."""

from __future__ import annotations

import numpy as np


def scalerl(c: np.ndarray, r0: float, a: float, b: float, c_mid: float) -> np.ndarray:
    """R_C = R0 + (A - R0) / (1 + (C_mid / C)^B); R_0 at C = 0."""
    out = np.full(len(c), r0, dtype=float)
    pos = c > 0
    out[pos] = r0 + (a - r0) / (1 + (c_mid / c[pos]) ** b)
    return out
