"""One arm against the baseline: the test, CI, equivalence, effect size and power.

Paired when seeds are matched (seed s gives every arm the same prompts), Welch when the
runs are independent, and the partially overlapping samples t-test (Derrick et al. 2017)
when a matched design lost some runs: every run counts. The caller decides from the design,
never from the results. The t statistics are written in closed form (numpy + scipy's t
distribution): the same numbers as `ttest_rel` / `ttest_ind(equal_var=False)`
(tests/test_stats_tests.py checks), without their per-call cost. Each comparison's p-value, CI and
TOST come from one t distribution, so p < alpha never sits beside a CI that includes 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import integrate, optimize, special, stats

# Differences whose spread is this small relative to the values are exact shifts: decimals
# like 0.61 + 0.03 give an sd of 4e-17, not a measurement (a t-test would say p = 1e-105).
RELATIVE_ZERO_SD = 1e-9
# Tests whose sd is per seed (the mean's SE is sd / sqrt(n)): the paired t, and the crossed
# tests, whose sd is their SE times sqrt(seeds) (of matched seeds, or the independent runs'
# balanced equivalent).
PER_SEED_SD = ("paired_t", "crossed_t", "crossed_welch")


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
    n_base: int = 0            # baseline runs used (Welch: may differ from n)
    correlation: float | None = None
    robust_p: float = math.nan  # Wilcoxon / Mann-Whitney: a column that never decides
    permutation_p: float = math.nan
    prob_improvement: float = math.nan
    exact: bool = False        # the difference is the same on every seed (zero variance)
    notes: list[str] = field(default_factory=list)

    def mde_at(self, alpha: float) -> float:
        """The smallest true difference this comparison finds with 80% power at `alpha`."""
        return mde(self.test, self.sd, self.n, alpha, n_base=self.n_base or None)


def _nan_comparison(test: str, n: int, diff: float, note: str, sd: float = math.nan,
                    exact: bool = False) -> Comparison:
    nan = math.nan
    return Comparison(test, n, diff, nan, nan, nan, nan, nan, sd, exact=exact, notes=[note])


def is_zero_spread(sd: float, *values: np.ndarray) -> bool:
    """True when an sd is zero up to floating-point noise, relative to the data's scale."""
    scale = max([1.0] + [float(np.max(np.abs(v))) for v in values if len(v)])
    return sd <= RELATIVE_ZERO_SD * scale


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
    if is_zero_spread(sd, trick, base):
        same = bool(np.all(np.abs(d) <= RELATIVE_ZERO_SD * max(1.0, float(np.abs(base).max()))))
        note = ("identical to the baseline on every matched seed" if same else
                f"the same difference ({diff:+.4g}) on every matched seed: zero variance, "
                "the t-test is undefined")
        return _nan_comparison("paired_t", n, 0.0 if same else diff, note, sd=0.0, exact=True)
    se = sd / math.sqrt(n)
    t_stat = diff / se
    half = _t_ppf(0.5 + conf / 2, n - 1) * se
    ci_low, ci_high = diff - half, diff + half
    out = Comparison(
        test="paired_t", n=n, n_base=n, diff=diff, ci_low=float(ci_low), ci_high=float(ci_high),
        p_value=float(2 * _t_sf(abs(t_stat), n - 1)), effect_size=diff / sd,
        tost_p=tost_p(diff, se, n - 1, min_effect), sd=sd,
    )
    if robust:  # the columns that never decide: skipped for secondary metrics (speed)
        out.correlation = _corr(trick, base)
        out.prob_improvement = float(np.mean(d > 0) + 0.5 * np.mean(d == 0))
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
        return _nan_comparison("welch_t", na, diff, "fewer than 2 runs in an arm: no test")
    va, vb = float(a.var(ddof=1)), float(b.var(ddof=1))
    if is_zero_spread(math.sqrt(va), a, b) and is_zero_spread(math.sqrt(vb), a, b):
        return _nan_comparison("welch_t", na, diff,
                               "zero variance in both arms: the t-test is undefined",
                               sd=0.0, exact=True)
    se = math.sqrt(va / na + vb / nb)
    df = (va / na + vb / nb) ** 2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    half = _t_ppf(0.5 + conf / 2, df) * se
    ci_low, ci_high = diff - half, diff + half
    pooled = math.sqrt(((na - 1) * va + (nb - 1) * vb) / (na + nb - 2))
    hedges = (diff / pooled) * (1 - 3 / (4 * (na + nb) - 9)) if pooled > 0 else math.nan
    out = Comparison(
        test="welch_t", n=na, n_base=nb, diff=diff, ci_low=float(ci_low), ci_high=float(ci_high),
        p_value=float(2 * _t_sf(abs(diff / se), df)), effect_size=hedges,
        tost_p=tost_p(diff, se, df, min_effect), sd=pooled,
    )
    if robust:
        out.prob_improvement = float(np.mean(a[:, None] > b[None, :])
                                     + 0.5 * np.mean(a[:, None] == b[None, :]))
        out.robust_p = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
        out.permutation_p = float(stats.permutation_test(
            (a, b), lambda x, y, axis=-1: np.mean(x, axis=axis) - np.mean(y, axis=axis),
            n_resamples=2000, vectorized=True,
            random_state=np.random.default_rng(seed)).pvalue)
    return out


def overlap_compare(a: np.ndarray, b: np.ndarray, paired: np.ndarray, min_effect: float,
                    conf: float = 0.95) -> Comparison:
    """The partially overlapping samples t-test (Derrick, Toher and White 2017, T_new2: the
    unequal-variance form) for a matched design in which some runs lost their partner: every
    run of both arms counts. `a`, `b`: each arm's values; `paired`: the (arm, baseline) pairs
    of the seeds both have, which are also in `a` and `b`. It is the paired t when every run
    is paired and Welch's when none is; the difference is the two arms' means over all runs.
    """
    a, b, pairs = np.asarray(a, float), np.asarray(b, float), np.asarray(paired, float)
    n1, n2, nc = len(a), len(b), len(pairs)
    diff = float(a.mean() - b.mean())
    v1, v2 = float(a.var(ddof=1)), float(b.var(ddof=1))
    r = _corr(pairs[:, 0], pairs[:, 1]) if nc >= 3 else None
    r = 0.0 if r is None else r
    var = v1 / n1 + v2 / n2 - 2 * r * math.sqrt(v1 * v2) * nc / (n1 * n2)
    if not var > 0:
        return _nan_comparison("overlap_t", n1, diff, "no spread in the differences: the "
                               "t-test is undefined", sd=0.0, exact=True)
    se = math.sqrt(var)
    welch_df = (v1 / n1 + v2 / n2) ** 2 / ((v1 / n1) ** 2 / (n1 - 1) + (v2 / n2) ** 2 / (n2 - 1))
    unpaired = (n1 - nc) + (n2 - nc)
    df = (nc - 1) + (welch_df - nc + 1) / (unpaired + 2 * nc) * unpaired
    df = max(1.0, df)
    half = _t_ppf(0.5 + conf / 2, df) * se
    # The sd whose Welch-form standard error sd * sqrt(1/n1 + 1/n2) is this test's: the MDE
    # and the seeds route read it as they read a Welch test's.
    sd = se / math.sqrt(1 / n1 + 1 / n2)
    return Comparison(
        test="overlap_t", n=n1, n_base=n2, diff=diff, ci_low=diff - half, ci_high=diff + half,
        p_value=float(2 * _t_sf(abs(diff / se), df)), effect_size=diff / math.sqrt((v1 + v2) / 2),
        tost_p=tost_p(diff, se, df, min_effect), sd=sd, correlation=r if nc >= 3 else None)


def tost_p(diff: float, se: float, df: float, margin: float) -> float:
    """Two one-sided tests: small when the difference lies inside (-margin, +margin)."""
    if se <= 0 or margin <= 0:
        return math.nan
    p_low = _t_sf((diff + margin) / se, df)    # H0: diff <= -margin
    p_high = _t_sf((margin - diff) / se, df)   # H0: diff >= +margin
    return float(max(p_low, p_high))


# Student's t as scipy's special functions: the same values as stats.t.sf / ppf, without
# the distribution object's per-call overhead (thousands of calls per report).
def _t_sf(x: float, df: float) -> float:
    return float(special.stdtr(df, -x))


def _t_ppf(q: float, df: float) -> float:
    return float(special.stdtrit(df, q))


def _corr(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 3:
        return None
    da, db = a - a.mean(), b - b.mean()
    denom = math.sqrt(float(da @ da) * float(db @ db))
    return float(da @ db / denom) if denom > 0 else None


@lru_cache(maxsize=16)
def _all_signs(n: int) -> np.ndarray:
    """Every +-1 pattern of n signs (2^n x n)."""
    bits = (np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1
    return 1.0 - 2.0 * bits


def _sign_flip_p(d: np.ndarray, seed: int) -> float:
    """Sign-flip permutation p for the mean difference: exact over all 2^n patterns for
    n <= 12, else 2000 random patterns (the observed one counted, as scipy does)."""
    n = len(d)
    if n <= 12:
        signs = _all_signs(n)
    else:
        rng = np.random.default_rng(seed)
        signs = rng.choice([-1.0, 1.0], size=(2000, n))
    null = np.abs(signs @ d) / n
    observed = abs(d.mean())
    tol = 1e-14 * max(1.0, observed)
    hits = float(np.sum(null >= observed - tol))
    return min(1.0, hits / len(signs) if n <= 12 else (hits + 1) / (len(signs) + 1))


# ---------------------------------------------------------------------------- power
def paired_power(effect: float, sd: float, n: int, alpha: float) -> float:
    """Two-sided power of a paired t-test (or one-sample t) with n pairs."""
    if n < 2 or sd <= 0:
        return math.nan
    return _t_power(effect / sd * math.sqrt(n), n - 1, alpha)


def welch_power(effect: float, sd: float, n: int, alpha: float, n_base: int | None = None) -> float:
    """Two-sided power of Welch's t-test with n runs in the arm and n_base (default n) in
    the baseline, both of spread sd: exact up to quadrature, integrated over the two sample
    variances (Welch's df and standard error are estimated from them). The pooled t's power
    (statsmodels' TTestIndPower) overstates it at a few runs per arm: 0.207 against 0.156
    at 3 + 3 runs and 1.2 sd (scripts/check_independent.py)."""
    nb = n if n_base is None else n_base
    if n < 2 or nb < 2 or sd <= 0:
        return math.nan
    se_hat, crit, weight, sd_diff = _welch_nodes(n, nb, alpha)
    z = effect / sd
    power = (weight * (special.ndtr((z - crit * se_hat) / sd_diff)
                       + special.ndtr((-z - crit * se_hat) / sd_diff))).sum()
    return float(min(1.0, power))


WELCH_NODES = 48  # Gauss-Legendre nodes per sample variance: power to about 1e-4


@lru_cache(maxsize=1024)
def _welch_nodes(n1: int, n2: int, alpha: float) -> tuple[np.ndarray, ...]:
    """For unit sd: Welch's estimated SE and critical t at each node of the two sample
    variances' joint distribution (their chi-square quantiles), the nodes' weights, and the
    true SE of the difference; cached per design, so power at any effect is one sum."""
    u, w = np.polynomial.legendre.leggauss(WELCH_NODES)
    u, w = (u + 1) / 2, w / 2
    v1 = stats.chi2.ppf(u, n1 - 1) / (n1 - 1)
    v2 = stats.chi2.ppf(u, n2 - 1) / (n2 - 1)
    a, b = np.meshgrid(v1 / n1, v2 / n2, indexing="ij")
    df = (a + b) ** 2 / (a ** 2 / (n1 - 1) + b ** 2 / (n2 - 1))
    crit = stats.t.ppf(1 - alpha / 2, df)
    return np.sqrt(a + b), crit, np.outer(w, w), math.sqrt(1 / n1 + 1 / n2)


def _t_power(nc: float, df: float, alpha: float) -> float:
    """P(|T| > crit) for a noncentral t. Both tails as survival functions: scipy's
    `nct.cdf` returns NaN far in the tail (noncentrality ~10 at df 1-5), `nct.sf` does not."""
    crit = stats.t.ppf(1 - alpha / 2, df)
    power = stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc)
    return float(min(1.0, power))


def power(test: str, effect: float, sd: float, n: int, alpha: float,
          n_base: int | None = None) -> float:
    if test in PER_SEED_SD:  # crossed: sd is the per-seed (per-run) equivalent
        return paired_power(effect, sd, n, alpha)
    return welch_power(effect, sd, n, alpha, n_base)


@lru_cache(maxsize=4096)
def _unit_mde(test: str, n: int, n_base: int, alpha: float, target: float) -> float:
    """MDE for sd = 1 (the MDE scales linearly with sd), cached per design."""
    def gap(e: float) -> float:
        return power(test, e, 1.0, n, alpha, n_base) - target

    hi = 1.0
    while gap(hi) < 0:
        hi *= 2
        if hi > 1e6:
            return math.inf
    return float(optimize.brentq(gap, 0.0, hi, xtol=1e-12))


def mde(test: str, sd: float, n: int, alpha: float, power_target: float = 0.8,
        n_base: int | None = None) -> float:
    """The smallest true difference detected with `power_target` at this design and alpha."""
    nb = n if n_base is None else n_base
    if n < 2 or nb < 2 or not sd > 0:
        return math.nan
    return sd * _unit_mde(test, n, nb, alpha, power_target)


@lru_cache(maxsize=4096)
def tost_power(diff: float, sd: float, n: int, alpha: float, margin: float,
               test: str = "paired_t") -> float:
    """Power of the equivalence test (TOST, each one-sided test at `alpha`) to show
    |true difference| < margin when the true difference is `diff`, with n seeds per arm.

    Exact for the paired t (and, with equal n, the pooled two-sample t Welch approximates):
    the mean difference is normal around `diff` with standard error a = sd/sqrt(n) (paired)
    or sd*sqrt(2/n); the sample sd is chi-square distributed. TOST rejects when
    -margin + c*se < mean < margin - c*se, c the one-sided t quantile; integrated over the
    sample sd."""
    if n < 2 or not sd > 0 or margin <= 0 or abs(diff) >= margin:
        return 0.0 if n >= 2 and sd > 0 else math.nan
    paired = test in PER_SEED_SD
    df = n - 1 if paired else 2 * n - 2
    a = sd / math.sqrt(n) if paired else sd * math.sqrt(2.0 / n)
    c = float(stats.t.ppf(1 - alpha, df))
    hi = df * (margin / (a * c)) ** 2  # beyond this chi-square value the interval is empty
    log_norm = (df / 2) * math.log(2) + math.lgamma(df / 2)  # the chi-square density's

    def given_v(v: float) -> float:
        if v <= 0:
            return 0.0
        half = c * math.sqrt(v / df)
        inside = special.ndtr((margin - diff) / a - half) - special.ndtr((-margin - diff) / a + half)
        density = math.exp((df / 2 - 1) * math.log(v) - v / 2 - log_norm)
        return max(0.0, float(inside)) * density

    value, _ = integrate.quad(given_v, 0.0, hi, limit=200)
    return float(min(1.0, value))


def first_n(power_at, start: int, power_target: float = 0.8, max_n: int = 10_000) -> int | None:
    """The smallest n >= start with power_at(n) >= power_target (power rising in n), or None
    below max_n: doubling, then bisection."""
    start = max(2, start)
    if power_at(start) >= power_target:
        return start
    lo, hi = start, start * 2
    while power_at(hi) < power_target:
        lo, hi = hi, hi * 2
        if lo >= max_n:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(mid) >= power_target else (mid, hi)
    return hi if hi <= max_n else None
