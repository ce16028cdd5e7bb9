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
has Satterthwaite's degrees of freedom.

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
        """The share of the task-scope variance that prompt sampling contributes."""
        total = self.variance("task")
        return self.prompt / self.prompts / total if total > 0 else math.nan


def components(d: np.ndarray) -> Components:
    """Two-way ANOVA without replication on an S x P table (S, P >= 2)."""
    d = np.asarray(d, float)
    s, p = d.shape
    grand = d.mean()
    rows, cols = d.mean(axis=1), d.mean(axis=0)
    ms_seed = p * float(((rows - grand) ** 2).sum()) / (s - 1)
    ms_prompt = s * float(((cols - grand) ** 2).sum()) / (p - 1)
    resid = d - rows[:, None] - cols[None, :] + grand
    ms_resid = float((resid ** 2).sum()) / ((s - 1) * (p - 1))
    # Differences of mean squares at rounding level are zero, not a component.
    tiny = 1e-12 * max(ms_seed, ms_prompt, ms_resid, 1e-300)

    def part(ms: float, count: int) -> float:
        return (ms - ms_resid) / count if ms - ms_resid > tiny else 0.0

    return Components(seed=part(ms_seed, p), prompt=part(ms_prompt, s), residual=ms_resid,
                      seeds=s, prompts=p, ms_seed=ms_seed, ms_prompt=ms_prompt,
                      ms_residual=ms_resid)


def standard_error(c: Components, scope: str) -> tuple[float, float]:
    """The mean difference's standard error and its degrees of freedom under the scope.
    "prompts": MS_seed / (S P), df S - 1 (the paired t on per-seed means). "task": plus the
    prompt component (MS_prompt - MS_resid) / (S P) when positive, Satterthwaite's df."""
    s, p = c.seeds, c.prompts
    var = c.ms_seed / (s * p)
    if scope == "prompts" or c.prompt == 0.0:
        return math.sqrt(var), float(s - 1)
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


def crossed_test(d: np.ndarray, min_effect: float, scope: str = "task",
                 conf: float = 0.95) -> CrossedTest:
    """The t-test, CI and TOST (each one-sided test at the same SE and df) of the mean of
    an S x P table of paired differences, under the scope."""
    parts = components(d)
    diff = float(np.mean(d))
    se, df = standard_error(parts, scope)
    if not se > 0:
        nan = math.nan
        return CrossedTest(diff, se, df, nan, nan, nan, nan, parts)
    half = float(stats.t.ppf(0.5 + conf / 2, df)) * se
    p = float(2 * stats.t.sf(abs(diff) / se, df))
    tost = max(float(stats.t.sf((diff + min_effect) / se, df)),
               float(stats.t.sf((min_effect - diff) / se, df)))
    return CrossedTest(diff, se, df, diff - half, diff + half, p, tost, parts)


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
