"""Runs that stop early (opt-in): the looks of an early-stop sweep re-taken from its runs'
evaluations (pure functions over arrays; docs/verdicts.md, "Runs that stop early").

At each look (a fraction of every run's steps) each open arm is compared with the baseline on
its seeds, paired, with the adaptive ladder's rules (stats/sequential.py): efficacy under
O'Brien-Fleming-type alpha spending over the looks and the end, Holm across arms in its
sequentially rejective form; an arm settled stops its runs, and the baseline's stop when every
arm has. At an early look the value compared is each run's final value as its curve predicts
it (`extrapolated`: the fit of stats/curves.py on the evaluations so far, only where it can
read the ceiling, and only where every seed of both arms can; the extrapolation's
uncertainty is in the seeds' spread of the predictions) or the value at the look (`observed`).
Only efficacy stops a run early: "no effect" and futility at a look are about the curve so
far, not the final value, and the simulation planted neither. At the end, the final values
with the ladder's last look (efficacy, equivalence within the margin, else inconclusive)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from grpo_ablate.stats.curves import fit_raw, judge, saturating
from grpo_ablate.stats.metric_table import crossed_for, with_crossed
from grpo_ablate.stats.sequential import (
    Ladder,
    efficacy_bounds,
    nominal_p,
    spending_table,
    take_look,
)
from grpo_ablate.stats.stratum import Stratum, compare

LOOK_COLUMN = "early_stop/look{k}"        # a run's value at early look k (1-based)
REACHED_COLUMN = "early_stop/reached{k}"  # 1 where the run trained as far as look k
TRAINED_COLUMN = "early_stop/trained"     # the share of its steps a run has trained


def stop_columns(plan: StopPlan) -> list[str]:
    """The results table's columns the looks read, beside the final metric."""
    return [*(c.format(k=k + 1) for k in range(len(plan.looks))
              for c in (LOOK_COLUMN, REACHED_COLUMN)), TRAINED_COLUMN]


@dataclass(frozen=True)
class StopPlan:
    """An early-stop sweep's declared looks: written before its first run, fixed after."""

    looks: tuple[float, ...] = (0.25, 0.5)  # the early looks, fractions of each run's steps
    seeds: int = 5
    alpha: float = 0.05
    min_effect: float = 0.01
    metric: str = "eval/accuracy"
    rule: str = "extrapolated"
    arms: tuple[str, ...] = ()
    scope: str = "task"     # the end's test: seeds x prompts where the records carry them
    futility: float = 0.0   # no futility stop: the ladder's rule asks the curve, not the end

    @property
    def fractions(self) -> tuple[float, ...]:
        return (*self.looks, 1.0)

    @property
    def rungs(self) -> tuple[int, ...]:
        """The seeds at each look (the same at every one), as the ladder's looks count them."""
        return (self.seeds,) * len(self.fractions)

    def boundary_p(self, look: int, level: float) -> float:
        return nominal_p(efficacy_bounds(self.fractions, round(level, 12))[look])

    def table(self, arms: int) -> list[dict]:
        """Per look: its fraction of the steps and the boundary at Holm's first step."""
        return spending_table(self.fractions, self.rungs, self.alpha / max(1, arms))

    def look_label(self, look: int, seeds: int) -> str:
        """A look's place in the run and what it compared, for a row's "decided by"."""
        if look > len(self.looks):
            return f"early-stop look {look} (the end, {seeds} seeds, final values)"
        what = "final values predicted from each run's curve" if self.rule == "extrapolated" \
            else "values at the look"
        return (f"early-stop look {look} ({self.fractions[look - 1]:g} of the steps, {seeds} "
                f"seeds, {what})")


def look_value(steps: np.ndarray, values: np.ndarray, at: int, last: int, rule: str) -> float:
    """A run's value at the look that paused it at step `at`: observed there, or its final
    value (at step `last`) as its curve so far predicts it; NaN where not evaluated there, or
    where the curve cannot read its ceiling."""
    keep = steps <= at
    steps, values = steps[keep], values[keep]
    if not len(steps) or steps[-1] != at:
        return math.nan
    if rule == "observed":
        return float(values[-1])
    raw = fit_raw(steps.astype(float), values.astype(float))
    if raw.short or not judge(raw).identifiable:
        return math.nan
    return float(saturating(np.array([float(last)]), raw.start, raw.asymptote, raw.exponent,
                            raw.midpoint)[0])


def replay_stops(st: Stratum, plan: StopPlan, direction: str,
                 prompts: pd.DataFrame | None = None,
                 p_values: dict[str, list] | None = None) -> tuple[Ladder, int | None]:
    """Re-take the looks from the runs (their evaluations are the only state). Returns the
    ladder and the 0-based look whose runs have not all reached it (None: finished). A look
    needs the baseline and every open arm on every seed below `plan.seeds`. An early look
    compares each run's one value (seeds alone as chance: no per-prompt outcomes exist
    before a run's end); the end, under the plan's task scope, the crossed test on seeds x
    prompts where `prompts` has them, as a fixed-n sweep's verdict does. `p_values`, when
    given, gets each arm's p at every look it was open at (None: not testable there)."""
    ladder = Ladder(plan, list(plan.arms or st.arms))
    rung = st.seeds < plan.seeds
    last = len(plan.fractions) - 1
    for k in range(len(plan.fractions)):
        if ladder.finished:
            return ladder, None
        wanted = [st.baseline, *ladder.open]
        if any(a not in st.column_of for a in wanted):
            return ladder, k  # an arm with no run yet
        if k < last:
            metric = LOOK_COLUMN.format(k=k + 1)
            there = {a: st.column(a, REACHED_COLUMN.format(k=k + 1))[rung] == 1 for a in wanted}
        else:
            metric = plan.metric
            there = {a: st.has[rung, st.column_of[a]] & ~np.isnan(st.column(a, metric)[rung])
                     if a in st.column_of else np.zeros(rung.sum(), bool) for a in wanted}
        if rung.sum() < plan.seeds or not all(there[a].all() for a in wanted):
            return ladder, k
        base = st.column(st.baseline, metric)[rung]
        comps = {}
        for arm in ladder.open:
            vals = st.column(arm, metric)[rung]
            if k < last and not (np.isfinite(vals).all() and np.isfinite(base).all()):
                continue  # a curve that cannot be read yet: no test at this look
            ones = np.ones(len(vals), bool)
            comps[arm] = compare(st.seeds[rung], vals, ones, base, ones, plan.min_effect,
                                 robust=False)
            if k == last and plan.scope == "task" and prompts is not None:
                seen = prompts[prompts["seed"] < plan.seeds]
                comps[arm] = with_crossed(comps[arm], crossed_for(
                    seen, arm, st.baseline, plan.metric, plan.min_effect, "task"))
        if p_values is not None:
            for arm in ladder.open:
                p_values.setdefault(arm, []).append(comps[arm].p_value if arm in comps
                                                    else None)
        take_look(ladder, comps, direction, stop_equivalent=k == last)
    return ladder, None


def look_steps_summary(fractions: list[float], stopped: dict[str, float], arms: int,
                       seeds: int) -> dict:
    """The run-steps an early-stop sweep trained against its full length: `stopped` maps
    each arm to the fraction of its steps its runs reached (1.0: to the end)."""
    base = max(stopped.values(), default=1.0)
    used = (sum(stopped.values()) + base) * seeds
    full = (arms + 1) * seeds
    return {"looks": fractions, "run_steps_used": used / full, "steps_saved": 1 - used / full}


def steps_used(ladder: Ladder, plan: StopPlan, st: Stratum) -> dict:
    """The share of the sweep's run-steps trained against running every run to its end, as
    the runs on disk show it (each run's steps over its own: a reuse arm's are more), and
    where each settled arm's runs stopped."""
    arms = [a for a in [st.baseline, *ladder.arms] if a in st.column_of]
    rung = st.seeds < plan.seeds
    trained = np.concatenate([np.nan_to_num(st.column(a, TRAINED_COLUMN)[rung], nan=0.0)
                              for a in arms]) if arms else np.zeros(0)
    used = float(trained.mean()) if len(trained) else 1.0
    base = st.column(st.baseline, TRAINED_COLUMN)[rung] if st.baseline in st.column_of \
        else np.ones(1)
    return {"stopped_at": {a: plan.fractions[s.look - 1] for a, s in ladder.settled.items()
                           if s.look},
            "baseline_at": float(np.nanmax(base)) if np.isfinite(base).any() else 1.0,
            "run_steps_used": used, "steps_saved": 1 - used}


def stopped_notes(arm, plan: StopPlan) -> tuple[str, ...]:
    """An arm settled at an early look: its runs have no final value, so the fixed-n notes
    on missing values say nothing; the look's numbers are the row's."""
    look = (arm.adaptive or {}).get("look")
    if not look or look > len(plan.looks):
        return arm.notes
    return (f"stopped at early-stop look {look} ({plan.fractions[look - 1]:g} of the steps): "
            "its runs have no final value; the row's n, difference, CI and p are the look's",)
