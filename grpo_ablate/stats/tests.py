"""One arm against the baseline: the test, CI, equivalence, effect size and power.

Paired when seeds are matched (seed s gives every arm the same prompts), Welch otherwise;
the caller decides from the design, never from the results."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats


@dataclass
class Comparison:
    test: str
    n: int
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    effect_size: float
    tost_p: float
    sd: float                  # sd of paired differences, or pooled sd for Welch
    correlation: float | None = None
    robust_p: float = math.nan  # Wilcoxon / Mann-Whitney: a column that never decides
    permutation_p: float = math.nan
    prob_improvement: float = math.nan
    notes: list[str] = field(default_factory=list)


def _nan_comparison(test: str, n: int, diff: float, note: str) -> Comparison:
    nan = math.nan
    return Comparison(test, n, diff, nan, nan, nan, nan, nan, nan, notes=[note])


def paired_compare(trick: np.ndarray, base: np.ndarray, min_effect: float,
                   conf: float = 0.95, seed: int = 0, robust: bool = True) -> Comparison:
    """Paired t-test on per-seed differences (trick - baseline), same seed order."""
    trick, base = np.asarray(trick, float), np.asarray(base, float)
    d = trick - base
    n = len(d)
    diff = float(d.mean()) if n else math.nan
    if n < 2:
        return _nan_comparison("paired_t", n, diff, "fewer than 2 matched seeds: no test")
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return _nan_comparison("paired_t", n, diff,
                               "zero variance of the differences: the t-test is undefined")
    res = stats.ttest_rel(trick, base)
    ci = res.confidence_interval(conf)
    ci_low, ci_high = float(ci.low), float(ci.high)
    if n >= 20:  # BCa bootstrap over whole seeds (the differences are per seed)
        boot = stats.bootstrap((d,), np.mean, confidence_level=conf, method="BCa",
                               random_state=np.random.default_rng(seed))
        ci_low, ci_high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    se = sd / math.sqrt(n)
    out = Comparison(
        test="paired_t", n=n, diff=diff, ci_low=ci_low, ci_high=ci_high,
        p_value=float(res.pvalue), effect_size=diff / sd,
        tost_p=tost_p(diff, se, n - 1, min_effect), sd=sd,
        correlation=_corr(trick, base),
        prob_improvement=float(np.mean(d > 0) + 0.5 * np.mean(d == 0)),
    )
    if robust:  # the columns that never decide: skipped for secondary metrics (speed)
        if np.any(d != 0):
            out.robust_p = float(stats.wilcoxon(d).pvalue)
        out.permutation_p = _sign_flip_p(d, seed)
    return out


def welch_compare(trick: np.ndarray, base: np.ndarray, min_effect: float,
                  conf: float = 0.95, seed: int = 0, robust: bool = True) -> Comparison:
    """Welch's t-test (unequal variances) for unmatched seeds."""
    a, b = np.asarray(trick, float), np.asarray(base, float)
    na, nb = len(a), len(b)
    diff = float(a.mean() - b.mean()) if na and nb else math.nan
    if na < 2 or nb < 2:
        return _nan_comparison("welch_t", min(na, nb), diff, "fewer than 2 runs in an arm: no test")
    va, vb = a.var(ddof=1), b.var(ddof=1)
    if va == 0.0 and vb == 0.0:
        return _nan_comparison("welch_t", min(na, nb), diff,
                               "zero variance in both arms: the t-test is undefined")
    res = stats.ttest_ind(a, b, equal_var=False)
    ci = res.confidence_interval(conf)
    ci_low, ci_high = float(ci.low), float(ci.high)
    if min(na, nb) >= 20:
        boot = stats.bootstrap((a, b), lambda x, y: np.mean(x) - np.mean(y), method="BCa",
                               confidence_level=conf, random_state=np.random.default_rng(seed))
        ci_low, ci_high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    se = math.sqrt(va / na + vb / nb)
    df = (va / na + vb / nb) ** 2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    pooled = math.sqrt(((na - 1) * va + (nb - 1) * vb) / (na + nb - 2))
    hedges = (diff / pooled) * (1 - 3 / (4 * (na + nb) - 9)) if pooled > 0 else math.nan
    out = Comparison(
        test="welch_t", n=min(na, nb), diff=diff, ci_low=ci_low, ci_high=ci_high,
        p_value=float(res.pvalue), effect_size=hedges, tost_p=tost_p(diff, se, df, min_effect),
        sd=pooled, prob_improvement=float(np.mean(a[:, None] > b[None, :])
                                          + 0.5 * np.mean(a[:, None] == b[None, :])),
    )
    if robust:
        out.robust_p = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
        out.permutation_p = float(stats.permutation_test(
            (a, b), lambda x, y, axis=-1: np.mean(x, axis=axis) - np.mean(y, axis=axis),
            n_resamples=2000, vectorized=True,
            random_state=np.random.default_rng(seed)).pvalue)
    return out


def tost_p(diff: float, se: float, df: float, margin: float) -> float:
    """Two one-sided tests: small when the difference lies inside (-margin, +margin)."""
    if se <= 0 or margin <= 0:
        return math.nan
    p_low = stats.t.sf((diff + margin) / se, df)    # H0: diff <= -margin
    p_high = stats.t.cdf((diff - margin) / se, df)  # H0: diff >= +margin
    return float(max(p_low, p_high))


def _corr(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 3 or a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def _sign_flip_p(d: np.ndarray, seed: int) -> float:
    """Exact (n <= 12) or Monte-Carlo sign-flip permutation p for the mean difference."""
    res = stats.permutation_test((d,), np.mean, permutation_type="samples", vectorized=True,
                                 n_resamples=2000 if len(d) > 12 else np.inf,
                                 random_state=np.random.default_rng(seed))
    return float(res.pvalue)


# ---------------------------------------------------------------------------- power
def paired_power(effect: float, sd: float, n: int, alpha: float) -> float:
    """Two-sided power of a paired t-test (or one-sample t) with n pairs."""
    if n < 2 or sd <= 0:
        return math.nan
    return _t_power(effect / sd * math.sqrt(n), n - 1, alpha)


def welch_power(effect: float, sd: float, n: int, alpha: float) -> float:
    """Approximate two-sided power of a two-sample t-test with n runs per arm."""
    if n < 2 or sd <= 0:
        return math.nan
    return _t_power(effect / sd * math.sqrt(n / 2), 2 * n - 2, alpha)


def _t_power(nc: float, df: float, alpha: float) -> float:
    crit = stats.t.ppf(1 - alpha / 2, df)
    power = stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc)
    if not math.isfinite(power):  # scipy's nct loses precision far in the tail
        power = 1.0 if abs(nc) > crit else 0.0
    return float(power)


def _power_fn(test: str):
    return paired_power if test == "paired_t" else welch_power


def mde(test: str, sd: float, n: int, alpha: float, power: float = 0.8) -> float:
    """The smallest true difference detected with `power` at this n and alpha."""
    fn = _power_fn(test)
    if n < 2 or not sd > 0:
        return math.nan
    hi = sd
    while fn(hi, sd, n, alpha) < power:
        hi *= 2
        if hi > 1e6 * sd:
            return math.inf
    return float(optimize.brentq(lambda e: fn(e, sd, n, alpha) - power, 0.0, hi, xtol=1e-10))


def seeds_needed(test: str, sd: float, effect: float, alpha: float, power: float = 0.8,
                 max_n: int = 10_000) -> int | None:
    """Seeds per arm needed to detect `effect` with `power`; None when undefined."""
    if not sd > 0 or not effect > 0:
        return None
    fn = _power_fn(test)
    # Start just under the normal approximation, then step up to the exact t answer.
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    scale = 1.0 if test == "paired_t" else 2.0
    n = max(2, int((z * sd / effect) ** 2 * scale) - 1)
    if n > max_n:
        return None
    while n > 2 and fn(effect, sd, n - 1, alpha) >= power:
        n -= 1
    while fn(effect, sd, n, alpha) < power:
        n += 1
        if n > max_n:
            return None
    return n
