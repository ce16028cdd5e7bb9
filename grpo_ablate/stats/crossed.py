"""Seeds and held-out prompts, both as sources of chance (docs/verdicts.md, "Task scope").

An arm and the arm it is compared with are paired twice over: on seeds (the same seeds)
and on prompts (the same held-out set). On the S x P table of paired differences
d[s, p] = arm - baseline, a two-way random-effects model without replication,

    d[s, p] = mu + a[s] + b[p] + e[s, p],   a ~ (0, var_seed), b ~ (0, var_prompt),

separates the between-seed component (how much a training run's luck moves the
difference), the prompt component (how much the trick's effect varies from problem to
problem) and their interaction (the residual). The question "does the trick change accuracy
on these P prompts?" treats the prompts as fixed; its variance of the mean difference is
MS_seed / (S P), exactly the paired t-test on per-seed means. The question "does it change
accuracy on the task's kind of problem?" treats them as a sample, and adds the prompt
component var_prompt / P, estimated by (MS_prompt - MS_resid) / S (method of moments; REML
gives the same for a balanced table when it is positive; truncated at 0). The t-test then
has Satterthwaite's degrees of freedom; and the task scope's verdict asks both tests
(`crossed_test`): its p-value is the larger of the two, its interval their hull.

Pure functions on arrays; the statistics stage calls them for each arm when the records
carry per-prompt outcomes (or a CSV has a `prompt` column).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

SCOPES = ("task", "prompts")


@dataclass(frozen=True)
class Components:
    """Variance components of a paired difference, and the table they came from."""

    seed: float       # var of a run's seed effect on the difference
    prompt: float     # var of the trick's effect across prompts (the task's heterogeneity)
    residual: float   # seed x prompt interaction, and measurement noise
    seeds: int
    prompts: int
    ms_seed: float
    ms_prompt: float
    ms_residual: float

    def variance(self, scope: str = "task", seeds: int | None = None,
                 prompts: int | None = None) -> float:
        """The variance of the mean difference over `seeds` x `prompts` (default: this
        table's), under the scope: with the prompt component ("task") or without it."""
        s, p = seeds or self.seeds, prompts or self.prompts
        fixed = (self.seed + self.residual / p) / s
        return fixed + (self.prompt / p if scope == "task" else 0.0)

    def prompt_share(self) -> float:
        """The share of the task-scope standard error's square that prompt sampling
        contributes: the prompt component over P, the rest being MS_seed / (S P), the prompts
        scope's part (the same split the SE is computed from, also where the seed component
        was truncated at 0)."""
        total = standard_error(self, "task")[0] ** 2
        return self.prompt / self.prompts / total if total > 0 else math.nan

    @property
    def seed_truncated(self) -> bool:
        """The seed component came out below zero (MS_seed < MS_residual) and is shown as
        0: the components then imply a larger variance than the mean squares give."""
        return self.ms_seed < self.ms_residual



def components(d: np.ndarray) -> Components:
    """Two-way ANOVA without replication on an S x P table (S, P >= 2)."""
    return components_of(np.asarray(d, float)[None])[0]


def components_of(tables: np.ndarray) -> list[Components]:
    """`components` of each K x S x P table at once."""
    d = np.asarray(tables, float)
    _, s, p = d.shape
    grand = d.mean(axis=(1, 2))
    rows, cols = d.mean(axis=2), d.mean(axis=1)
    ms_seed = p * ((rows - grand[:, None]) ** 2).sum(axis=1) / (s - 1)
    ms_prompt = s * ((cols - grand[:, None]) ** 2).sum(axis=1) / (p - 1)
    resid = d - rows[:, :, None] - cols[:, None, :] + grand[:, None, None]
    ms_resid = (resid ** 2).sum(axis=(1, 2)) / ((s - 1) * (p - 1))
    out = []
    for ms_s, ms_p, ms_r in zip(ms_seed.tolist(), ms_prompt.tolist(), ms_resid.tolist(),
                                strict=True):
        # Differences of mean squares at rounding level are zero, not a component.
        tiny = 1e-12 * max(ms_s, ms_p, ms_r, 1e-300)

        def part(ms: float, count: int, ms_r=ms_r, tiny=tiny) -> float:
            return (ms - ms_r) / count if ms - ms_r > tiny else 0.0

        out.append(Components(seed=part(ms_s, p), prompt=part(ms_p, s), residual=ms_r,
                              seeds=s, prompts=p, ms_seed=ms_s, ms_prompt=ms_p,
                              ms_residual=ms_r))
    return out


def standard_error(c: Components, scope: str) -> tuple[float, float]:
    """The mean difference's standard error and its degrees of freedom under the scope.
    "prompts": MS_seed / (S P), df S - 1 (the paired t on per-seed means). "task": plus the
    prompt component (MS_prompt - MS_resid) / (S P) when positive, Satterthwaite's df."""
    s, p = c.seeds, c.prompts
    var = c.ms_seed / (s * p)
    if scope == "prompts" or c.prompt == 0.0:
        return math.sqrt(var), float(s - 1)
    if c.seed_truncated:
        # The seed component at its boundary (0), as REML puts it: on a balanced table the
        # mean's variance is then MS_prompt / (S P), with the prompts' P - 1 df (and the
        # components shown add up to it). The moments' difference would be smaller: 1.1-1.7x
        # below REML's SE there.
        return math.sqrt(c.ms_prompt / (s * p)), float(p - 1)
    total = c.ms_seed + c.ms_prompt - c.ms_residual
    denom = (c.ms_seed ** 2 / (s - 1) + c.ms_prompt ** 2 / (p - 1)
             + c.ms_residual ** 2 / ((s - 1) * (p - 1)))
    df = total ** 2 / denom if denom > 0 else float(s - 1)
    return math.sqrt(total / (s * p)), max(1.0, df)


@dataclass(frozen=True)
class CrossedTest:
    diff: float
    se: float
    df: float
    ci_low: float
    ci_high: float
    p_value: float
    tost_p: float
    parts: Components
    dropped_prompts: int = 0  # held-out prompts some run of the pair lacks: left out


def _t_tests(diff: np.ndarray, se: np.ndarray, df: np.ndarray, min_effect: float,
             conf: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(CI low, CI high, two-sided p, TOST p) of mean differences at these SEs and dfs
    (NaN where an SE is not positive)."""
    ok = se > 0
    se = np.where(ok, se, 1.0)
    half = stats.t.ppf(0.5 + conf / 2, df) * se
    p = 2 * stats.t.sf(np.abs(diff) / se, df)
    tost = np.maximum(stats.t.sf((diff + min_effect) / se, df),
                      stats.t.sf((min_effect - diff) / se, df))
    nan = np.full_like(diff, math.nan)
    return (np.where(ok, diff - half, nan), np.where(ok, diff + half, nan), np.where(ok, p, nan),
            np.where(ok, tost, nan))


def crossed_test(d: np.ndarray, min_effect: float, scope: str = "task",
                 conf: float = 0.95) -> CrossedTest:
    """The t-test, CI and TOST (each one-sided test at the same SE and df) of the mean of
    an S x P table of paired differences, under the scope.

    Under the task scope the verdict asks two tests of the same mean: Satterthwaite's (the
    prompt component included) and the paired t on per-seed means (S - 1 df). Its p-value
    and TOST p are the larger of the two, its interval their hull. Alone, each misses alpha
    in one regime: Satterthwaite's plug-in df is largest exactly when MS_seed came out low by
    chance, when |t| is largest (family-wise 0.083 at 24 arms where seed noise is comparable
    to prompt noise); the paired t leaves out the prompt component (0.21 where it dominates).
    A rejection by both is at most as frequent as the rarer of the two, so the combined test
    keeps alpha wherever either does (scripts/check_calibration.py); it is also never
    narrower, nor its p smaller, than the prompts scope's."""
    return crossed_tests(np.asarray(d, float)[None], min_effect, scope, conf)[0]


def crossed_tests(tables: np.ndarray, min_effect: float, scope: str = "task",
                  conf: float = 0.95) -> list[CrossedTest]:
    """`crossed_test` of each K x S x P table at once (a study's arms, in simulations)."""
    d = np.asarray(tables, float)
    parts = components_of(d)
    diff = d.mean(axis=(1, 2))
    se, df = (np.array(x, float) for x in zip(*(standard_error(c, scope) for c in parts),
                                                strict=True))
    low, high, p, tost = _t_tests(diff, se, df, min_effect, conf)
    if scope == "task":  # and the paired t on per-seed means: the larger p, the hull
        seed_se, seed_df = (np.array(x, float) for x in zip(
            *(standard_error(c, "prompts") for c in parts), strict=True))
        low2, high2, p2, tost2 = _t_tests(diff, seed_se, seed_df, min_effect, conf)
        both = (seed_se > 0) & (se > 0)
        low, high = np.where(both, np.minimum(low, low2), low), np.where(both, np.maximum(high, high2), high)
        p, tost = np.where(both, np.maximum(p, p2), p), np.where(both, np.maximum(tost, tost2), tost)
    return [CrossedTest(float(diff[k]), float(se[k]), float(df[k]), float(low[k]), float(high[k]),
                        float(p[k]), float(tost[k]), parts[k]) for k in range(len(parts))]


def _least(var_at, lo: int, goal: float, max_n: int) -> int | None:
    """The smallest n >= lo with var_at(n) <= goal (var_at falls with n), or None."""
    if lo > max_n or var_at(max_n) > goal:
        return None
    hi = max(lo, 1)
    while var_at(hi) > goal:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if var_at(mid) > goal else (lo, mid)
    return lo


def precision_for(parts: Components, target_se: float, max_n: int = 100_000
                  ) -> tuple[int | None, int | None]:
    """What would bring the task-scope standard error down to `target_se`: the seeds at
    this many prompts (None when the prompt component alone is above it: no number of
    seeds can), and the prompts at this many seeds (None likewise for the seed component).
    Each is at least one more than now: an open arm needs more of something."""
    goal = target_se ** 2
    seeds = _least(lambda n: parts.variance("task", seeds=n), parts.seeds + 1, goal, max_n)
    return seeds, prompts_for(parts, target_se, parts.seeds, max_n)


def prompts_for(parts: Components, target_se: float, seeds: int, max_n: int = 100_000
                ) -> int | None:
    """The held-out prompts that bring the task-scope standard error down to `target_se`
    at `seeds` seeds (None when the seed component alone is above it); at least one more."""
    return _least(lambda n: parts.variance("task", seeds=seeds, prompts=n), parts.prompts + 1,
                  target_se ** 2, max_n)


def both_for(parts: Components, target_se: float, cost=None, span: int = 16,
             max_prompts: int | None = None) -> tuple[int, int] | None:
    """Seeds and prompts together, for when neither alone reaches `target_se`: over seeds from
    the fewest that can (with enough prompts) to `span` times that (on a geometric grid), the
    pair with the least `cost(seeds, prompts)` (default: seeds x prompts, the evaluations it
    takes), with at most `max_prompts` prompts when the task holds no more."""
    goal = target_se ** 2
    if not goal > 0:
        return None
    # Enough prompts make the variance (seed + residual / P) / S + prompt / P close to
    # seed / S: the fewest seeds that can is the first whose seed part is under the goal.
    low = _least(lambda n: parts.seed / n, parts.seeds + 1, goal, 10 ** 7)
    if low is None:
        return None
    cost = cost or (lambda s, p: s * p)
    seeds = sorted({low, low + 1, low + 2, *(round(low * span ** (k / 24)) for k in range(25))})
    pairs = [(s, prompts_for(parts, target_se, s, max_n=max_prompts or 10 ** 7)) for s in seeds]
    found = [(s, p) for s, p in pairs if p is not None]
    return min(found, key=lambda sp: cost(*sp)) if found else None


def target_se(diff: float, level: float, power: float = 0.8) -> float:
    """The standard error at which a two-sided z-test at `level` has `power` against a true
    difference `diff` (the normal approximation: for sizing, not for testing)."""
    z = stats.norm.ppf(1 - level / 2) + stats.norm.ppf(power)
    return abs(diff) / z if z > 0 else math.nan
