"""The verdict rules (docs/verdicts.md), pure functions of one arm's adjusted test:

- improves/harms: the Holm-adjusted p < alpha and the CI excludes 0 on that side, in the
  metric's direction (higher or lower is better).
- negligible: significant, but the CI lies inside +/- min-effect.
- no_effect: TOST equivalence within +/- min-effect, its p Holm-adjusted over the arms like
  the significance side (an equivalence claim is a claim too), and what the reader sees
  agrees: the 95% CI shown lies inside +/- min-effect and the MDE is at most min-effect
  (the design could have seen an effect of the margin's size). Where TOST alone holds, the
  arm is inconclusive with a note naming what fails. An arm identical to the baseline on
  every matched seed is no_effect (exact), with a note.
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
    min_effect: float = 0.01   # in metric units (1 point of accuracy), or see min_effect_of
    # None: min_effect is in metric units; "mean": a fraction of the baseline's |mean|
    # (`--min-effect 5%`); "sd": a multiple of the baseline's sd over runs (`0.2sd`). Resolved
    # per stratum and metric (margin_for).
    min_effect_of: str | None = None
    secondary_correction: str = "bh"
    direction: str | None = None  # higher | lower; None: from the metric's name
    inert_below: float = 0.05     # activity under this: the trick was not really tested
    sequential: Design | None = None  # an adaptive sweep's plan: verdicts from its looks
    scope: str = "task"  # task: seeds and held-out prompts as chance; prompts: seeds only
    runs: str = "matched"  # matched: seed s gives every arm the same data; independent: not
    arms: str = "tricks"   # tricks: a recommended recipe; methods: a comparison, no recipe

    @property
    def metric_direction(self) -> str:
        return self.direction or default_direction(self.metric)


UNTESTED = ("no_effect", "negligible", "inconclusive")  # what a trick that did not act gets


def verdict(p_adjusted: float, ci_low: float, ci_high: float, tost_p: float, alpha: float,
            min_effect: float, direction: str = "higher", exact_zero: bool = False,
            acted: float | None = None, inert_below: float = 0.05,
            mde: float | None = None) -> str:
    """improves/harms: significant and the CI excludes 0 on that side; negligible:
    significant but the CI lies inside +/- min_effect; no_effect: TOST shows equivalence,
    the CI lies inside +/- min_effect and `mde` (when known) is at most min_effect, or
    `exact_zero` (identical to the baseline on every matched seed); else inconclusive. p >
    alpha alone never means no effect. Then the inert rule (`inert`)."""
    outcome = _outcome(p_adjusted, ci_low, ci_high, tost_p, alpha, min_effect, direction,
                       exact_zero)
    if outcome == "no_effect" and not exact_zero and equivalence_gap(
            ci_low, ci_high, min_effect, mde):
        outcome = "inconclusive"
    return inert_rule(outcome, acted, inert_below)


def equivalence_gap(ci_low: float, ci_high: float, min_effect: float,
                    mde: float | None) -> str | None:
    """Why an equivalence TOST shows would not read as "no effect" beside the table: the 95%
    CI crosses the margin, or the design could not have seen an effect of the margin's size
    (MDE over it); None when neither."""
    gaps = []
    if not (-min_effect <= ci_low and ci_high <= min_effect):
        gaps.append(f"the 95% CI [{ci_low:.3g}, {ci_high:.3g}] crosses the margin "
                    f"±{min_effect:.3g}")
    if mde is not None and math.isfinite(mde) and mde > min_effect:
        gaps.append(f"the MDE {mde:.3g} is over the margin ±{min_effect:.3g} (the design "
                    "could not have seen an effect of that size)")
    return "; ".join(gaps) or None


def margin_for(s: Settings, base_mean: float | None, base_sd: float | None) -> float:
    """The margin in metric units for one stratum and metric: min_effect itself, or a
    fraction of the baseline's |mean|, or a multiple of its sd (NaN where that is unknown)."""
    if s.min_effect_of is None:
        return s.min_effect
    ref = base_mean if s.min_effect_of == "mean" else base_sd
    if ref is None or not math.isfinite(ref) or ref == 0:
        return math.nan
    return s.min_effect * abs(ref)


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


def row_contradiction(row: dict, alpha: float, margin: float, direction: str = "higher",
                      inert_below: float = 0.05) -> str | None:
    """What a report row shows that its verdict's definition denies (None: it agrees): its n,
    CI, p and MDE are the comparison that decided it (`decided_by`), so the definition must
    hold of them. For a look of an adaptive sweep, its boundary stands in for alpha."""
    v, rule = row["verdict"], (row.get("decided_by") or {}).get("rule", "test")
    lo, hi = row.get("ci_low"), row.get("ci_high")
    if direction == "lower" and lo is not None and hi is not None:
        lo, hi = -hi, -lo
    adaptive = row.get("adaptive") or {}
    level = adaptive.get("p_boundary") if rule == "look" else alpha
    p = row.get("p_value") if rule == "look" else row.get("p_adjusted")
    tost = row.get("tost_p") if rule == "look" else row.get("tost_p_adjusted")
    mde = row.get("mde")
    inside = lo is not None and hi is not None and -margin <= lo and hi <= margin
    significant = p is not None and level is not None and p < level
    if rule == "identical" or adaptive.get("reason") == "identical":
        if not (row.get("diff") == 0.0 and lo == 0.0 and hi == 0.0 and v in ("no_effect", "inert")):
            return f"{v} by the identical rule, but the row shows diff {row.get('diff')}, CI [{lo}, {hi}]"
        return None
    acted = (row.get("activity") or {}).get("acted")
    if v == "inert":
        return None if acted is not None and acted < inert_below else \
            f"inert, but the trick acted on {acted} of its units"
    if v in ("improves", "harms"):
        side = lo is not None and lo > 0 if v == "improves" else hi is not None and hi < 0
        if not (significant and side):
            return f"{v}, but p {p} against {level} and CI [{lo}, {hi}]"
    elif v == "negligible":
        if not (significant and lo is not None and -margin < lo and hi < margin):
            return f"negligible, but p {p} against {level} and CI [{lo}, {hi}] (margin {margin})"
    elif v == "no_effect":
        small = mde is None or not math.isfinite(mde) or mde <= margin
        if not (tost is not None and level is not None and tost < level and inside and small):
            return (f"no effect, but TOST p {tost} against {level}, CI [{lo}, {hi}] (margin "
                    f"{margin}), MDE {mde}")
    elif v == "inconclusive" and rule == "test" and significant and lo is not None and (
            lo > 0 or hi < 0):
        return f"inconclusive, but p {p} < {level} and the CI [{lo}, {hi}] excludes 0"
    return None
