"""What the report says about one arm and one stratum, as frozen values: an `ArmResult` is
computed once per arm by pure steps (its comparison and verdict, then an adaptive ladder's
decision, its trick's activity, what it waits on), each step returning a new value; a
`StratumReport` holds a stratum's arms and what sits beside them. Both become report.json's
dicts only at the report boundary (`entry()`, `as_dict()`), in the contract's key order."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

# The fields later steps set, emitted only where they apply (entry()).
LATER = ("adaptive", "primary", "activity", "waiting_on")


@dataclass(frozen=True)
class ArmResult:
    """One arm against the arm it is compared with, on one metric (docs/contracts.md, the
    arm entry). Values are JSON-ready (NaN and inf as None)."""

    arm: str
    n: int
    mean: float | None
    std: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    test: str
    p_value: float | None
    p_adjusted: float | None
    effect_size: float | None
    tost_p: float | None
    tost_p_adjusted: float | None
    seed_correlation: float | None
    mde: float | None
    diff_sd: float | None
    seeds_needed: int | None
    more_seeds_needed: int | None
    robust_p: float | None
    permutation_p: float | None
    prob_improvement: float | None
    runs_diverged: int
    runs_failed: int
    verdict: str
    notes: tuple[str, ...]
    against: str
    variance: dict | None
    # The comparison or rule that decided the verdict, which every number of the row is:
    # {"rule": test | identical | untested | look | inert, "text": what the row says}.
    decided_by: dict | None = None
    # Set by later steps: an adaptive plan's decision (its arms only), and for the primary
    # metric the trick's activity and what an open verdict waits on.
    adaptive: dict | None = None
    primary: bool = False
    activity: dict | None = None
    waiting_on: dict | None = None

    def entry(self) -> dict[str, Any]:
        """The arm's report.json entry: `adaptive` for an adaptive plan's arms, `activity`
        and `waiting_on` for the primary metric's."""
        base = {f.name: list(self.notes) if f.name == "notes" else getattr(self, f.name)
                for f in fields(self) if f.name not in LATER}
        return {**base,
                **({"adaptive": self.adaptive} if self.adaptive is not None else {}),
                **({"activity": self.activity, "waiting_on": self.waiting_on}
                   if self.primary else {})}



@dataclass(frozen=True)
class StratumReport:
    """One (model, task) stratum of report.json (docs/contracts.md)."""

    model: str
    task: str
    baseline: dict
    arms: tuple[ArmResult, ...]
    comparisons: int
    scope: str
    adaptive: dict | None
    secondary: dict[str, tuple[ArmResult, ...]]
    stability: dict[str, tuple[ArmResult, ...]]
    beside: dict  # budget, EMA vs raw, the single-run illusion, recipe, failures, diagnostics
    min_effect: float | None = None  # the margin in metric units here (a relative one resolved)
    margin_note: str | None = None   # why that margin cannot give "no effect" on this scale

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "task": self.task, "baseline": self.baseline,
                "arms": entries(self.arms), "comparisons": self.comparisons,
                "scope": self.scope, "min_effect": self.min_effect,
                "margin_note": self.margin_note,
                **({"adaptive": self.adaptive} if self.adaptive is not None else {}),
                "secondary": {m: entries(a) for m, a in self.secondary.items()},
                "stability": {m: entries(a) for m, a in self.stability.items()},
                **self.beside}


def entries(arms: tuple[ArmResult, ...] | list[ArmResult]) -> list[dict[str, Any]]:
    return [a.entry() for a in arms]
