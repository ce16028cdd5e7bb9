"""Group-sequential decisions for an adaptive seed ladder (docs/verdicts.md, "Adaptive sweeps").

Seeds are added in pre-declared rungs (default 3 -> 6 -> 10 per arm). After each rung every
open arm is looked at once, and settled arms stop:
- efficacy: Lan-DeMets O'Brien-Fleming-type alpha spending (`efficacy_bounds`), so the
  repeated looks together spend no more than alpha ("add a seed until p < 0.05" would spend
  about 3x alpha). Across arms, Holm at each look in the sequentially rejective form of
  Maurer & Bretz (2013): every open arm is tested at level alpha / (arms not yet rejected),
  and each rejection re-tests the others at the larger level.
- equivalence (no_effect): the TOST p under the same spending at level alpha / arms.
- futility (non-binding): conditional power under the current trend to cross the final
  boundary below `futility`. The efficacy boundaries ignore it, so stopping for futility
  can only lower the false-positive rate.

With seeds as few as 3 the statistic is a t, not a z: each look compares the t-test's p
with the boundary's nominal p (Jennison & Turnbull 2000, ch. 11), the usual approximation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import optimize, special, stats

GRID_POINTS = 2001  # Simpson grid for the recursive integration (odd)
SQRT_2PI = math.sqrt(2 * math.pi)


def obf_spent(t: float, alpha: float) -> float:
    """Cumulative two-sided alpha spent at information fraction t (Lan & DeMets 1983,
    O'Brien-Fleming type, alpha/2 per side): 4 - 4 Phi(z_{1-alpha/4} / sqrt(t))."""
    if t <= 0:
        return 0.0
    return float(4 * stats.norm.sf(stats.norm.isf(alpha / 4) / math.sqrt(min(t, 1.0))))


def _simpson_weights(n: int, h: float) -> np.ndarray:
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return w * h / 3.0


@lru_cache(maxsize=512)
def efficacy_bounds(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """Two-sided z boundaries c_k (reject at look k when |Z_k| >= c_k) spending
    `obf_spent` at the given increasing information fractions (last = 1).

    Exact recursive integration on the score scale S_k = Z_k sqrt(t_k), a Brownian motion:
    the sub-density of S on the continuation region is carried from look to look on a
    Simpson grid, and each boundary is solved so that the new crossing probability equals
    the alpha spent since the last look (Armitage, McPherson & Rowe 1969)."""
    t = np.asarray(fractions, float)
    if len(t) == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0 or abs(t[-1] - 1.0) > 1e-12:
        raise ValueError(f"fractions {fractions}: need increasing values in (0, 1], last 1")
    spent = [obf_spent(x, alpha) for x in t]
    bounds = [float(stats.norm.isf(spent[0] / 2))]
    b = bounds[0] * math.sqrt(t[0])                    # boundary on the score scale
    s = np.linspace(-b, b, GRID_POINTS)
    dens = stats.norm.pdf(s, scale=math.sqrt(t[0]))   # sub-density of S_1 inside
    for k in range(1, len(t)):
        sd = math.sqrt(t[k] - t[k - 1])
        w = _simpson_weights(len(s), s[1] - s[0]) * dens
        target = spent[k] - spent[k - 1]

        def crossing(bk: float, s=s, w=w, sd=sd, target=target) -> float:
            outside = special.ndtr((s - bk) / sd) + special.ndtr((-bk - s) / sd)
            return float(w @ outside) - target

        bk = optimize.brentq(crossing, 1e-6, 40.0 * math.sqrt(t[k]), xtol=1e-12)
        bounds.append(bk / math.sqrt(t[k]))
        new_s = np.linspace(-bk, bk, GRID_POINTS)
        kernel = np.exp(-0.5 * ((new_s[:, None] - s[None, :]) / sd) ** 2) / (sd * SQRT_2PI)
        dens, s = kernel @ w, new_s
    return tuple(bounds)


def nominal_p(z: float) -> float:
    """The two-sided p-value a z boundary corresponds to."""
    return float(2 * stats.norm.sf(z))


@dataclass(frozen=True)
class Design:
    """A pre-declared ladder: written to the sweep folder before the first run."""

    rungs: tuple[int, ...] = (3, 6, 10)
    alpha: float = 0.05
    min_effect: float = 0.01
    futility: float = 0.10    # conditional power under the current trend below this: stop
    metric: str = "eval/accuracy"
    arms: tuple[str, ...] = ()  # the family (the baseline excluded); empty: every arm found
    scope: str = "task"         # the looks' test: seeds and prompts (task), or seeds alone

    def __post_init__(self) -> None:
        r = self.rungs
        if len(r) < 1 or any(not isinstance(x, int) or x < 2 for x in r) or list(r) != sorted(set(r)):
            raise ValueError(f"rungs {list(r)}: need increasing integers >= 2, e.g. [3, 6, 10]")

    @property
    def fractions(self) -> tuple[float, ...]:
        return tuple(n / self.rungs[-1] for n in self.rungs)

    def boundary_p(self, look: int, level: float) -> float:
        """Nominal two-sided p boundary at look `look` (0-based) for a family level."""
        return nominal_p(efficacy_bounds(self.fractions, round(level, 12))[look])

    def table(self, arms: int) -> list[dict]:
        """The plan as printed: per look, the boundary at Holm's first step (alpha/arms)."""
        return spending_table(self.fractions, self.rungs, self.alpha / max(1, arms))

    def look_label(self, look: int, seeds: int) -> str:
        """How a row's "decided by" names the look (1-based) that settled it."""
        return f"look {look} ({seeds} seeds)"


def spending_table(fractions: tuple[float, ...], seeds: tuple[int, ...], level: float
                   ) -> list[dict]:
    """Per look: its seeds and fraction, its boundary and the alpha it spends at `level`."""
    z = efficacy_bounds(fractions, round(level, 12))
    rows, before = [], 0.0
    for k, n in enumerate(seeds):
        spent = obf_spent(fractions[k], level)
        rows.append({"look": k + 1, "seeds": n, "fraction": fractions[k],
                     "z_boundary": z[k], "p_boundary": nominal_p(z[k]),
                     "alpha_spent": spent, "alpha_spent_this_look": spent - before})
        before = spent
    return rows


@dataclass
class Settlement:
    """Where and why one arm stopped."""

    look: int | None           # 1-based look that settled it; None: still open
    seeds: int                 # seeds it had at that look
    reason: str                # efficacy | equivalence | identical | futility | final | open
    verdict: str
    p_value: float = math.nan
    p_boundary: float = math.nan
    conditional_power: float = math.nan
    comparison: object = None  # the look's Comparison (significance.py): the row's numbers


@dataclass
class Ladder:
    """The state of an adaptive comparison after the looks taken so far."""

    design: Design
    arms: list[str]
    settled: dict[str, Settlement] = field(default_factory=dict)
    rejected: int = 0
    looks_done: int = 0

    @property
    def open(self) -> list[str]:
        return [a for a in self.arms if a not in self.settled]

    @property
    def finished(self) -> bool:
        return not self.open or self.looks_done == len(self.design.rungs)


def conditional_power(p_value: float, fraction: float, z_final: float) -> float:
    """Probability of crossing the final boundary given the current trend (drift estimated
    from the look): 1 - Phi((c_K - Z_k / sqrt(t)) / sqrt(1 - t))."""
    if math.isnan(p_value) or fraction >= 1:
        return math.nan
    z = float(stats.norm.isf(max(p_value, 1e-300) / 2))
    return float(stats.norm.sf((z_final - z / math.sqrt(fraction)) / math.sqrt(1 - fraction)))


def _direction_verdict(c, min_effect: float, direction: str) -> str:
    lo, hi = (c.ci_low, c.ci_high) if direction == "higher" else (-c.ci_high, -c.ci_low)
    if -min_effect < lo and hi < min_effect:
        return "negligible"
    return "improves" if lo > 0 else "harms" if hi < 0 else \
        ("improves" if (c.diff > 0) == (direction == "higher") else "harms")


def shows_no_effect(c, d: Design, arms: int) -> bool:
    """What a report row of "no effect" must show beside an equivalence at a look (the
    fixed-n rule's too): the 95% CI inside the margin, and an MDE at most it at the
    family's per-arm alpha."""
    inside = -d.min_effect <= c.ci_low and c.ci_high <= d.min_effect
    smallest = c.mde_at(d.alpha / max(1, arms))
    return inside and not (math.isfinite(smallest) and smallest > d.min_effect)


def take_look(ladder: Ladder, comparisons: dict, direction: str = "higher",
              stop_equivalent: bool = True) -> Ladder:
    """One look: `comparisons` maps each open arm to its Comparison on the seeds of this
    rung (grpo_ablate.stats.significance). Settles arms in place and returns the ladder.
    `stop_equivalent` False: only efficacy settles an arm before the last look (an early
    look that sees part of a run's curve says nothing of "no effect" at its end)."""
    d = ladder.design
    k = ladder.looks_done
    last = k == len(d.rungs) - 1
    m = len(ladder.arms)
    n = d.rungs[k]
    for arm in ladder.open if stop_equivalent or last else []:  # identical on every seed:
        c = comparisons.get(arm)                                  # the equivalence is exact
        if c is not None and c.exact and c.diff == 0.0 and c.n >= 2:
            ladder.settled[arm] = Settlement(k + 1, n, "identical", "no_effect", comparison=c)
    while ladder.open:  # Holm, sequentially rejective: each rejection frees its alpha
        level = d.alpha / (m - ladder.rejected)
        bound = d.boundary_p(k, level)
        hits = [a for a in ladder.open if a in comparisons
                and not math.isnan(comparisons[a].p_value) and comparisons[a].p_value < bound]
        if not hits:
            break
        for arm in hits:
            c = comparisons[arm]
            ladder.settled[arm] = Settlement(k + 1, n, "efficacy",
                                             _direction_verdict(c, d.min_effect, direction),
                                             c.p_value, bound, comparison=c)
        ladder.rejected += len(hits)
    if stop_equivalent or last:
        _settle_the_rest(ladder, comparisons, k, last)
    ladder.looks_done += 1
    return ladder


def _settle_the_rest(ladder: Ladder, comparisons: dict, k: int, last: bool) -> None:
    """After the efficacy tests of look k: equivalence at the look's boundary, the final
    look's inconclusive arms, and futility (conditional power under the current trend)."""
    d, m, n = ladder.design, len(ladder.arms), ladder.design.rungs[k]
    eq_bound = d.boundary_p(k, d.alpha / m)
    level = d.alpha / (m - ladder.rejected) if m > ladder.rejected else d.alpha
    z_final = efficacy_bounds(d.fractions, round(level, 12))[-1]
    for arm in ladder.open:
        c = comparisons.get(arm)
        if c is None:
            continue
        if not math.isnan(c.tost_p) and c.tost_p < eq_bound and shows_no_effect(c, d, m):
            ladder.settled[arm] = Settlement(k + 1, n, "equivalence", "no_effect",
                                             c.tost_p, eq_bound, comparison=c)
        elif last:
            ladder.settled[arm] = Settlement(k + 1, n, "final", "inconclusive", c.p_value,
                                             d.boundary_p(k, level), comparison=c)
        else:
            cp = conditional_power(c.p_value, d.fractions[k], z_final)
            if not math.isnan(cp) and cp < d.futility:
                ladder.settled[arm] = Settlement(k + 1, n, "futility", "inconclusive",
                                                 c.p_value, d.boundary_p(k, level), cp,
                                                 comparison=c)
