"""An adaptive sweep's verdicts: its looks re-taken from the records (the records are the
only state), and each arm of the plan given its look's decision, then the inert rule."""

from __future__ import annotations

from dataclasses import asdict, replace

import pandas as pd

from grpo_ablate.stats.arm_result import ArmResult
from grpo_ablate.stats.metric_table import crossed_for, with_crossed
from grpo_ablate.stats.sequential import Design, Ladder, take_look
from grpo_ablate.stats.significance import mde
from grpo_ablate.stats.stratum import Stratum, clean, compare
from grpo_ablate.stats.verdicts import inert_rule


def replay_ladder(st: Stratum, design: Design, direction: str,
                  prompts: pd.DataFrame | None = None) -> tuple[Ladder, int | None]:
    """Re-take an adaptive sweep's looks from its runs (the records are the only state).
    Returns the ladder and the 0-based look whose runs are not all recorded yet (None when
    the ladder is finished). A look needs a record (any status) for the baseline and every
    arm still open, on every seed below its rung. Under the plan's task scope each look's
    test is the crossed one on the rung's seeds x prompts, where `prompts` has them."""
    ladder = Ladder(design, list(design.arms or st.arms))
    present = {(a, int(x)) for a, x in zip(st.sub["arm"], st.sub["seed"], strict=True)}
    base = st.column(st.baseline, design.metric)
    has_base = st.has[:, st.column_of[st.baseline]]
    for k, n in enumerate(design.rungs):
        if ladder.finished:
            return ladder, None
        if any((a, x) not in present for a in [st.baseline, *ladder.open] for x in range(n)):
            return ladder, k
        rung = st.seeds < n
        comps = {a: compare(st.seeds[rung], st.column(a, design.metric)[rung],
                            st.has[rung, st.column_of[a]], base[rung], has_base[rung],
                            design.min_effect, robust=False) for a in ladder.open}
        if design.scope == "task" and prompts is not None:
            seen = prompts[prompts["seed"] < n]
            comps = {a: with_crossed(c, crossed_for(seen, a, st.baseline, design.metric,
                                                    design.min_effect, "task"))
                     for a, c in comps.items()}
        take_look(ladder, comps, direction)
    return ladder, None


REASONS = {"efficacy": "p {p} < the look's boundary {b}",
           "equivalence": "TOST p {p} < the look's boundary {b}",
           "identical": "identical to its comparison arm on every seed (no test needed)",
           "futility": "futility: p {p}, conditional power {cp} under the trend",
           "final": "the last look: p {p} not under its boundary {b}"}


def at_look(arm: ArmResult, got, d, arms: int) -> ArmResult:
    """The arm's row as the look that settled it saw it: that look's seeds, difference, CI, p
    and MDE (not every run the sweep made for the other arms), and the rule in words."""
    c = got.comparison
    text = f"{d.look_label(got.look, got.seeds)}: " + REASONS[got.reason].format(
        p=f"{got.p_value:.3g}", b=f"{got.p_boundary:.3g}", cp=f"{got.conditional_power:.2f}")
    decided = {"rule": "look", "text": text}
    if c is None:
        return replace(arm, decided_by=decided)
    identical = got.reason == "identical"
    smallest = 0.0 if identical else mde(c.test, c.sd, c.n, d.alpha / max(1, arms),
                                         n_base=c.n_base or None)
    return replace(arm, n=c.n, diff=clean(c.diff), test=c.test,
                   ci_low=0.0 if identical else clean(c.ci_low),
                   ci_high=0.0 if identical else clean(c.ci_high),
                   p_value=clean(c.p_value), p_adjusted=None, effect_size=clean(c.effect_size),
                   tost_p=clean(c.tost_p), tost_p_adjusted=None, mde=clean(smallest),
                   diff_sd=clean(c.sd), decided_by=decided)


def with_ladder(arms: tuple[ArmResult, ...], ladder: Ladder, pending: int | None, runs: int,
                acts: dict[str, dict] | None = None, inert_below: float = 0.05
                ) -> tuple[tuple[ArmResult, ...], dict]:
    """An adaptive sweep's verdicts are its looks' decisions (then the inert rule): the arms
    with them, and the stratum's plan and the runs saved against fixed n at the last rung."""
    acted = {a: act["acted"] for a, act in (acts or {}).items() if act}
    d = ladder.design

    def decided(arm: ArmResult) -> ArmResult:
        got = ladder.settled.get(arm.arm)
        if arm.arm not in ladder.arms:
            return replace(arm, notes=(*arm.notes, "not in the adaptive plan: a fixed-n verdict"))
        if got is None:
            return replace(arm, verdict=inert_rule("inconclusive", acted.get(arm.arm), inert_below),
                           adaptive={"look": None, "seeds": None, "reason": "open",
                                     "next_seeds": d.rungs[pending] if pending is not None
                                     else None},
                           decided_by={"rule": "look", "text": "open: no look has settled it "
                                       "yet (the numbers: every run so far)"})
        row = at_look(arm, got, d, len(ladder.arms))
        return replace(row, verdict=inert_rule(got.verdict, acted.get(arm.arm), inert_below),
                       adaptive={k: clean(v) for k, v in asdict(got).items()
                                 if k != "comparison"})

    fixed = (len(ladder.arms) + 1) * d.rungs[-1]
    return tuple(decided(a) for a in arms), {
        "design": asdict(d), "plan": d.table(len(ladder.arms)), "looks_done": ladder.looks_done,
        "pending_look": pending + 1 if pending is not None else None,
        "runs_used": runs, "runs_fixed_n": fixed, "runs_saved": 1 - runs / fixed}
