"""What a screening report's effect row says beyond the fit: the heredity hint, what would
settle an open effect, and OVAT's inert rule for a factor whose trick did not act in the
runs that set it (its keys' activity, kept per key in each run's record)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from grpo_ablate.stats.screening import Term, replicates_for
from grpo_ablate.stats.screening_looks import ScreeningLooks
from grpo_ablate.stats.verdicts import inert_rule

INERT_BELOW = 0.05  # OVAT's default share (stats/decide.Settings.inert_below)


def factor_activity(used: pd.DataFrame, design: dict) -> dict[str, float]:
    """Each factor's mean activity over the runs that set it on: in each run its keys'
    largest share (a record's `acted_by_key/<key>` columns). A factor no run measured (a
    table from elsewhere, a design.json without keys, config-only keys) is left out."""
    levels = np.asarray(design["design"])
    out: dict[str, float] = {}
    for j, factor in enumerate(design["factors"]):
        cols = [f"acted_by_key/{k}" for k in factor.get("keys") or []
                if f"acted_by_key/{k}" in used.columns]
        if not cols:
            continue
        on = used[levels[used["point"].to_numpy(), j] > 0]
        shares = on[cols].astype(float).max(axis=1, skipna=True).dropna()
        if len(shares):
            out[factor["name"]] = float(shares.mean())
    return out


def inert_factors(rows: list[dict], acted: dict[str, float], inert_below: float) -> None:
    """A main effect's row gets its factor's activity; `inert` where the trick acted on
    fewer than `inert_below` of its units in its runs and the row was not decided (as OVAT:
    a difference of zero from a trick that did nothing is no evidence of no effect)."""
    for r in rows:
        if r["kind"] != "main":
            continue
        share = acted.get(r["factors"][0])
        r["acted"] = share
        if inert_rule(r["verdict"], share, inert_below) == "inert":
            r["verdict"] = "inert"
            r["waiting_on"] = (f"the trick acted on {share:.0%} of its units in the runs "
                               "that set it: a run where it acts (more steps, a harder task)")


def heredity(rows: list[dict], columns: list[Term], names: list[str]) -> None:
    """In a chain of interactions, the terms whose two tricks both have a main effect
    called (`likely`): effect heredity (Wu & Hamada, Experiments, 2009) makes them the
    likelier carriers of the chain's effect. A hint for the reader, not a verdict; the plot
    and the side-by-side table use it."""
    called = {r["factors"][0] for r in rows
              if len(r["factors"]) == 1 and r["verdict"] in ("improves", "harms")}
    for r, term in zip(rows, columns, strict=True):
        likely = [[names[i] for i in t] for t, _ in term.terms
                  if len(t) == 2 and all(names[i] in called for i in t)]
        r["likely"] = [" x ".join(t) for t in likely]
        if not term.is_main and len(likely) == 1:
            r["factors"] = likely[0]


def waiting_on(row: dict, term: Term, replicates: int, margin: float) -> str:
    """What would settle an open effect: a fold-over (aliased), or more replicates."""
    if row["verdict"] == "aliased":
        return "a fold-over (design=foldover, the sweep's own overrides) separates the " \
            "terms of this chain"
    if row["verdict"] != "inconclusive":
        return ""
    target = max(abs(row["effect"]), margin) if math.isfinite(margin) else abs(row["effect"])
    need = replicates_for(row["mde"], replicates, target)
    return f"about {need} replicates (seeds) for 80% power at {target:.3g}" if need else ""


def look_waiting_on(row: dict, looks: ScreeningLooks) -> str:
    """An adaptive screening's effect: what its look said, or the look it waits for."""
    rungs = looks.ladder.design.rungs
    if row["reason"] == "open":
        nxt = looks.pending if looks.pending is not None else len(looks.rows)
        return f"look {nxt + 1}: the design at {rungs[nxt]} replicates" \
            if nxt < len(rungs) else ""
    if row["reason"] == "futility":
        return (f"stopped at look {row['look']} ({row['replicates_at_look']} replicates): "
                "too little power left to reach the final boundary")
    if row["reason"] == "final" and row["verdict"] == "inconclusive":
        return f"the plan's cap ({rungs[-1]} replicates) reached"
    return f"settled at look {row['look']} ({row['replicates_at_look']} replicates)"


def adaptive_summary(looks: ScreeningLooks) -> dict:
    """The design line's adaptive part: the rungs, the looks taken, where it stands."""
    d = looks.ladder.design
    return {"rungs": list(d.rungs), "alpha": d.alpha, "min_effect": d.min_effect,
            "looks_taken": len(looks.rows), "open": looks.ladder.open,
            "next_look": None if looks.pending is None else looks.pending + 1,
            "finished": looks.pending is None}
