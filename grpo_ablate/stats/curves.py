"""A run's learning curve as a fitted saturating curve (pure functions over arrays).

ScaleRL's form (Khatri et al., "The Art of Scaling Reinforcement Learning Compute", 2025):
R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), the held-out metric against compute C, with R0 the
start value (the run's evaluation before its first step), A the asymptote (the ceiling),
C_mid the compute at which half the gain is reached and B the exponent (the efficiency). It is
fitted by bounded least squares (scipy), from a few starting points.

Where the curve has not bent within the budget nothing in the data pins A: a fit would still
return a number, extrapolated from the curvature of a line. Such a fit is reported as not
identifiable, never as a number. The rule, chosen by simulation among 54 (scripts/
check_curves.py, docs/figures.md: the most bent curves read among those that give a wrong A
on at most 5% of any planted family's runs): the metric moved beyond twice its noise, the
curve explains the points better than a straight rise from the start (an F-test of the
extra sum of squares at BEND_P), and the standard error of A (from the fit's Jacobian) at
most SE_MAX. The area under the observed curve (the mean metric over the budget, the
compute scaled to 0..1) needs no fit and is always given."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

SE_MAX = 0.05        # the largest standard error of A taken as read off the data
BEND_AT = None       # no bound on the fitted midpoint (the F-test below does better)
BEND_P = 0.01        # the curve against a straight rise: the F-test's level
EXPONENT = (0.3, 8.0)  # B's bounds: from a near-linear rise to a step
MIN_POINTS = 4       # evaluations after the start: a three-parameter fit needs more than 3


@dataclass(frozen=True)
class CurveFit:
    """One run's curve: its parameters where identifiable (NaN where not, and why)."""

    start: float          # R0, the evaluation before the first step
    asymptote: float      # A
    midpoint: float       # C_mid, in the compute unit given
    exponent: float       # B
    asymptote_se: float
    auc: float            # the mean over the budget: the trapezoid area over compute in 0..1
    rmse: float
    identifiable: bool
    reason: str           # "" where identifiable; else what the data lack
    why: str = ""         # its kind: short | flat | straight | beyond | uncertain


def saturating(c: np.ndarray, start: float, asymptote: float, exponent: float,
               midpoint: float) -> np.ndarray:
    c = np.asarray(c, float)
    return start + (asymptote - start) / (1.0 + (midpoint / c) ** exponent)


def area_under(compute: np.ndarray, value: np.ndarray) -> float:
    """The trapezoid area under the observed points, compute scaled to 0..1 (its mean)."""
    c, v = np.asarray(compute, float), np.asarray(value, float)
    if len(c) < 2 or c[-1] <= c[0]:
        return float(v.mean()) if len(v) else math.nan
    return float(np.trapezoid(v, (c - c[0]) / (c[-1] - c[0])))


def _nan_fit(start: float, auc: float, reason: str, se: float = math.nan,
             rmse: float = math.nan, why: str = "short") -> CurveFit:
    nan = math.nan
    return CurveFit(start, nan, nan, nan, se, auc, rmse, False, reason, why)


@dataclass(frozen=True)
class RawFit:
    """The least-squares estimates before the identifiability rule is applied."""

    start: float
    asymptote: float
    midpoint: float
    exponent: float
    asymptote_se: float
    auc: float
    rmse: float
    moved: bool          # the metric left its start by more than twice its noise
    budget: float        # the largest compute observed
    short: str = ""      # too few points to fit: why
    bend_p: float = math.nan  # the curve against a straight rise from the start (F-test)


def fit_raw(compute: np.ndarray, value: np.ndarray, bounds: tuple[float, float] = (0.0, 1.0),
            noise: float | None = None) -> RawFit:
    """Least squares of the saturating curve on one run. `compute` increasing, its first
    point the start (compute 0); `bounds`: the metric's range (A stays inside it);
    `noise`: the metric's sd between two evaluations of one policy (default: the fit's
    residual sd)."""
    c, v = np.asarray(compute, float), np.asarray(value, float)
    keep = np.isfinite(c) & np.isfinite(v)
    c, v = c[keep], v[keep]
    nan = math.nan
    if len(c) == 0:
        return RawFit(nan, nan, nan, nan, nan, nan, nan, False, nan, "no evaluation")
    start, auc = float(v[0]), area_under(c, v)
    cs, vs = c[c > 0], v[c > 0]
    if len(cs) < MIN_POINTS:
        return RawFit(start, nan, nan, nan, nan, auc, nan, False, float(c[-1]),
                      f"{len(cs)} evaluations after the start: a curve needs {MIN_POINTS}",
                      nan)
    lo, hi = bounds
    span = (math.log(cs[0]) - 3.0, math.log(cs[-1]) + 3.0)

    def residual(p: np.ndarray) -> np.ndarray:
        return saturating(cs, start, p[0], p[1], math.exp(p[2])) - vs

    # A grid over (exponent, midpoint), A in closed form at each (the model is linear in A
    # there: variable projection), then one bounded least-squares refinement from the best.
    best_x, best_cost = None, math.inf
    for b in np.geomspace(EXPONENT[0], EXPONENT[1], 9):
        g = 1.0 / (1.0 + (np.exp(np.linspace(*span, 25))[:, None] / cs[None, :]) ** b)
        gain = np.clip((g @ (vs - start)) / np.maximum((g * g).sum(axis=1), 1e-12),
                       lo - start, hi - start)
        cost = (((start + gain[:, None] * g) - vs[None, :]) ** 2).sum(axis=1)
        k = int(np.argmin(cost))
        if cost[k] < best_cost:
            best_cost = float(cost[k])
            best_x = [start + gain[k], b, np.linspace(*span, 25)[k]]
    x0 = [min(max(best_x[0], lo + 1e-9), hi - 1e-9), best_x[1], best_x[2]]
    best = optimize.least_squares(residual, x0, bounds=(
        [lo, EXPONENT[0], span[0]], [hi, EXPONENT[1], span[1]]), method="trf")
    resid = residual(best.x)
    sigma = math.sqrt(float(resid @ resid) / max(1, len(cs) - 3))
    cov = np.linalg.pinv(best.jac.T @ best.jac) * sigma ** 2
    floor = 2 * (noise if noise is not None else sigma)
    moved = abs(best.x[0] - start) > floor or abs(vs[-1] - start) > floor
    # Has it bent? The extra sum of squares of the curve (3 parameters) over the straight
    # rise from the start (1): an F-test; a curve the line explains shows no ceiling.
    slope = float(cs @ (vs - start) / (cs @ cs))
    rss_line = float(((start + slope * cs - vs) ** 2).sum())
    rss = float(resid @ resid)
    dof = len(cs) - 3
    bend_p = float(stats.f.sf((rss_line - rss) / 2 / (rss / dof), 2, dof)) \
        if dof > 0 and rss > 0 else (0.0 if rss_line > rss else 1.0)
    return RawFit(start, float(best.x[0]), float(math.exp(best.x[2])), float(best.x[1]),
                  float(math.sqrt(max(cov[0, 0], 0.0))), auc,
                  float(math.sqrt(rss / len(cs))), bool(moved), float(cs[-1]), "", bend_p)


def judge(raw: RawFit, se_max: float = SE_MAX, bend_at: float | None = BEND_AT,
          bend_p: float | None = BEND_P) -> CurveFit:
    """The rule: A and C_mid are given where the metric moved, the curve explains the points
    better than a straight rise (F-test p below `bend_p`; None: not asked), the fitted
    midpoint lies within `bend_at` of the budget (None: anywhere) and A's standard error
    is at most `se_max`."""
    reason, why = raw.short, "short" if raw.short else ""
    if not reason and not raw.moved:
        reason, why = "the metric did not move from its start beyond its noise", "flat"
    elif not reason and bend_p is not None and not raw.bend_p < bend_p:
        reason, why = (f"a straight rise fits as well as a curve (F-test p {raw.bend_p:.2g}): "
                       "the curve has not bent within the budget"), "straight"
    elif not reason and bend_at is not None and raw.midpoint > bend_at * raw.budget:
        reason, why = (f"the fitted midpoint ({raw.midpoint:.3g}) lies beyond {bend_at:g} of "
                       f"the budget ({raw.budget:.3g}): the curve has not bent enough to show "
                       "its ceiling"), "beyond"
    elif not reason and not raw.asymptote_se <= se_max:
        reason, why = (f"the asymptote's standard error is {raw.asymptote_se:.3g} (more than "
                       f"{se_max})"), "uncertain"
    if reason:
        return _nan_fit(raw.start, raw.auc, reason, raw.asymptote_se, raw.rmse, why)
    return CurveFit(raw.start, raw.asymptote, raw.midpoint, raw.exponent, raw.asymptote_se,
                    raw.auc, raw.rmse, True, "")


def fit_curve(compute: np.ndarray, value: np.ndarray, bounds: tuple[float, float] = (0.0, 1.0),
              noise: float | None = None) -> CurveFit:
    """One run's curve under the rule (`fit_raw`, then `judge`)."""
    return judge(fit_raw(compute, value, bounds, noise))
