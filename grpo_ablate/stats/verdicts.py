"""The verdict rules (docs/verdicts.md), pure functions of one arm's adjusted test:

- improves/harms: the Holm-adjusted p < alpha and the CI excludes 0 on that side, in the
  metric's direction (higher or lower is better).
- negligible: significant, but the CI lies inside +/- min-effect.
- no_effect: TOST equivalence within +/- min-effect, its p Holm-adjusted over the arms like
  the significance side (an equivalence claim is a claim too). An arm identical to the
  baseline on every matched seed is no_effect (exact), with a note.
- inert: none of the above could be shown, or it was shown to do nothing, and the trick
  acted on fewer than `inert_below` of its units (or is the baseline by construction):
  the experiment did not test it.
- inconclusive: anything else; the report says how many more seeds would settle it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grpo_ablate.stats.sequential import Design

# Metric names whose smaller values are better, unless --direction says otherwise.
LOWER_IS_BETTER = ("loss", "kl", "grad_norm", "regret", "volatility", "perplexity", "error",
                   "length_growth")


def default_direction(metric: str) -> str:
    name = metric.lower().rsplit("/", 1)[-1]
    return "lower" if any(p in name for p in LOWER_IS_BETTER) else "higher"


@dataclass(frozen=True)
class Settings:
    metric: str = "eval/accuracy"
    baseline: str = "baseline"
    alpha: float = 0.05
    correction: str = "holm"
    min_effect: float = 0.01   # in metric units: 1 point of accuracy
    secondary_correction: str = "bh"
    direction: str | None = None  # higher | lower; None: from the metric's name
    inert_below: float = 0.05     # activity under this: the trick was not really tested
    sequential: Design | None = None  # an adaptive sweep's plan: verdicts from its looks
    scope: str = "task"  # task: seeds and held-out prompts as chance; prompts: seeds only

    @property
    def metric_direction(self) -> str:
        return self.direction or default_direction(self.metric)


UNTESTED = ("no_effect", "negligible", "inconclusive")  # what a trick that did not act gets


def verdict(p_adjusted: float, ci_low: float, ci_high: float, tost_p: float, alpha: float,
            min_effect: float, direction: str = "higher", exact_zero: bool = False,
            acted: float | None = None, inert_below: float = 0.05) -> str:
    """improves/harms: significant and the CI excludes 0 on that side; negligible:
    significant but the CI lies inside +/- min_effect; no_effect: TOST shows equivalence, or
    `exact_zero` (identical to the baseline on every matched seed); else inconclusive. p >
    alpha alone never means no effect. Then the inert rule (`inert`)."""
    return inert_rule(_outcome(p_adjusted, ci_low, ci_high, tost_p, alpha, min_effect,
                               direction, exact_zero), acted, inert_below)


def inert_rule(outcome: str, acted: float | None, inert_below: float) -> str:
    """A trick that acted on fewer than `inert_below` of its units was not tested: `inert`
    instead of no_effect, negligible or inconclusive. A decided effect stays (with a note)."""
    if acted is not None and acted < inert_below and outcome in UNTESTED:
        return "inert"
    return outcome


def _outcome(p_adjusted: float, ci_low: float, ci_high: float, tost_p: float, alpha: float,
             min_effect: float, direction: str, exact_zero: bool) -> str:
    if exact_zero:
        return "no_effect"
    if direction == "lower":  # improvement = a lower value: flip the interval
        ci_low, ci_high = -ci_high, -ci_low
    significant = not math.isnan(p_adjusted) and p_adjusted < alpha
    if significant and -min_effect < ci_low and ci_high < min_effect:
        return "negligible"
    if significant and ci_low > 0:
        return "improves"
    if significant and ci_high < 0:
        return "harms"
    if not math.isnan(tost_p) and tost_p < alpha:
        return "no_effect"
    return "inconclusive"
