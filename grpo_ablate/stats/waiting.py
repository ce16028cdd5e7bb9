"""What an open verdict is waiting on, and how many more seeds would settle it: one function
that the verdict table, report.json (`arms[].waiting_on`) and the recommended recipe all
read, so they say the same thing.

An arm is open when its verdict is `inconclusive`. What it waits on follows from its 95% CI
and point estimate:
- `effect`: the CI excludes 0, but the test did not cross its threshold (Holm's, or the
  adaptive look's boundary): more seeds would confirm the observed effect;
- `equivalence`: the CI straddles 0 and the estimate lies inside +/- min-effect: more seeds
  could show that the trick does nothing that matters (TOST);
- `either`: the CI straddles 0 and the estimate lies outside +/- min-effect: an effect if
  the estimate holds (the number given), equivalence if it shrinks.
The seeds are the smallest total with 80% power at the observed difference and spread,
under the design in force: at Holm's strictest level alpha/k for a fixed-n sweep; for an
adaptive sweep, the next rungs of its plan at their boundaries (beyond its last rung, at
the last boundary, which needs a new plan). Decided arms wait on nothing; an inert arm waits
on a trick that acts, not on seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd
from scipy.stats import norm as NORMAL

from grpo_ablate.runtime import duration
from grpo_ablate.stats.arm_result import ArmResult
from grpo_ablate.stats.crossed import Components, both_for, precision_for, prompts_for, target_se
from grpo_ablate.stats.sequential import Design
from grpo_ablate.stats.significance import first_n, power, tost_power
from grpo_ablate.stats.stratum import Stratum

POWER = 0.8
DECIDED = ("improves", "harms", "negligible", "no_effect")
INERT = "the trick did not act: change the task or the trick's values, not the seed count"
WHAT = {"effect": "confirmation of the observed effect",
        "equivalence": "equivalence (no effect that matters)",
        "either": "an effect if the estimate holds, equivalence if it shrinks"}


def _unsized(on: str, text: str) -> dict:
    """An open arm that no number of seeds would settle as it stands."""
    return {"on": on, "seeds": None, "more_seeds": None, "level": None, "text": text}


def waiting_on(entry: dict, min_effect: float, alpha: float, comparisons: int,
               design: Design | None = None, costs: RunCosts | None = None) -> dict | None:
    """`{"on", "seeds", "more_seeds", "level", "text"}` for an open arm (None when decided);
    under the task scope also the prompts route (`prompts`, `more_prompts`) and, with
    `costs`, what each route costs (`seeds_seconds`, `prompts_seconds`, `cheaper`).
    `entry`: the arm's report entry (verdict, test, n, diff, diff_sd, ci_low, ci_high);
    `design`: the adaptive plan whose looks decided the arm, or None for fixed n."""
    verdict = entry["verdict"]
    if verdict in DECIDED:
        return None
    if verdict == "inert":
        return _unsized("a trick that acts", INERT)
    n, sd, diff = entry["n"], entry.get("diff_sd"), entry.get("diff")
    if n < 2 or diff is None or not sd or not math.isfinite(sd):
        return _unsized("a spread", "no spread to test yet (fewer than 2 matched seeds, or the "
                        "same difference on every seed): run more seeds")
    lo, hi = entry.get("ci_low"), entry.get("ci_high")
    if lo is not None and hi is not None and (lo > 0 or hi < 0):
        on = "effect"
    else:
        on = "equivalence" if abs(diff) < min_effect else "either"
    if entry["test"] in ("crossed_t", "crossed_welch") and entry.get("variance"):
        level = alpha / max(1, comparisons)
        looks = [(n, level, f"at Holm's level alpha/{max(1, comparisons)} = {level:.2g}")] \
            if design is None else _looks(n, design)
        return _crossed_waiting(entry, on, min_effect, looks, costs)
    power_at = _power_curve(on, entry["test"], diff, sd, min_effect)
    if design is None:
        level = alpha / max(1, comparisons)
        seeds = first_n(lambda k: power_at(k, level), n + 1, POWER)
        where = f"at Holm's level alpha/{max(1, comparisons)} = {level:.2g}"
    else:
        seeds, level, where = _on_the_ladder(power_at, n, design)
    if seeds is None:
        return {"on": on, "seeds": None, "more_seeds": None, "level": level,
                "text": f"waiting on {WHAT[on]}: out of reach (over 10,000 seeds) at the "
                        f"observed difference {diff:+.3g} and spread {sd:.3g}"}
    return {"on": on, "seeds": seeds, "more_seeds": seeds - n, "level": level,
            "text": f"waiting on {WHAT[on]}: +{seeds - n} seeds ({seeds} in all) for 80% power "
                    f"at the observed difference {diff:+.3g} and spread {sd:.3g}, {where}"}


@dataclass(frozen=True)
class RunCosts:
    """What the two routes cost, from the arm's and its baseline's records: one run's wall
    seconds (training and its evaluations), and one held-out prompt's evaluation seconds in
    a run. A seed is two runs (the arm's and the baseline's); more prompts is every run of
    the pair again, at the larger held-out set (task.dataset.eval_size is part of a run's
    identity, so no record carries over)."""

    run_seconds: float | None  # None: the results carry no timings (a CSV): routes unpriced
    prompt_seconds: float | None
    prompt_pool: int | None = None  # the held-out prompts the task's data holds; None: unknown

    def seeds(self, more: int) -> float | None:
        return None if self.run_seconds is None else 2 * more * self.run_seconds

    def prompts(self, more: int, seeds: int) -> float | None:
        if self.prompt_seconds is None or self.run_seconds is None:
            return None
        return 2 * seeds * (self.run_seconds + more * self.prompt_seconds)


def _crossed_waiting(entry: dict, on: str, min_effect: float, looks: list[tuple[int, float, str]],
                     costs: RunCosts | None) -> dict:
    """Under the task scope more seeds shrink only the seed part of the uncertainty: the
    prompt part falls with more held-out prompts alone. Both routes, sized by the normal
    approximation at the observed difference and variance components, at the looks in
    force: `looks` is [(seeds at the look, its level, where)], one entry for a fixed-n sweep
    (its seeds now), the later rungs for an adaptive plan (then the plan's last boundary)."""
    v, diff = entry["variance"], entry["diff"]
    parts = Components(seed=v["seed"], prompt=v["prompt"], residual=v["residual"],
                       seeds=v["seeds"], prompts=v["prompts"], ms_seed=math.nan,
                       ms_prompt=math.nan, ms_residual=math.nan)

    def goal(level: float) -> float:
        if on == "equivalence":  # each one-sided test at `level`, the margin's distance to go
            return (min_effect - abs(diff)) / (NORMAL.ppf(1 - level) + NORMAL.ppf(POWER))
        return target_se(diff, level, POWER)

    # Seeds: the first look whose seeds suffice at these prompts, else past the last one.
    seeds, level, where = next(((r, lv, w) for r, lv, w in looks if r > parts.seeds
                                and parts.variance("task", seeds=r) <= goal(lv) ** 2),
                               (precision_for(parts, goal(looks[-1][1]))[0], *looks[-1][1:]))
    at = looks[0][0]  # prompts: at the next look (a fixed-n sweep's seeds now)
    pool = costs.prompt_pool if costs else None
    prompts = prompts_for(parts, goal(looks[0][1]), at)
    routes = _routes(parts, seeds, prompts if pool is None or (prompts or 0) <= pool else None,
                     at, costs)
    neither = routes["seeds"] is None and routes["prompts"] is None
    out = {**routes,
           "over_pool": prompts if prompts is not None and routes["prompts"] is None else None,
           **({"both": _both(parts, goal(level), costs)} if neither else {})}
    return {"on": on, **out, "level": level,
            "text": f"waiting on {WHAT[on]}: {_route_text(out, parts, at, pool)}, for 80% power at "
                    f"the observed difference {diff:+.3g} (seed, prompt, residual variance "
                    f"{v['seed']:.2g}, {v['prompt']:.2g}, {v['residual']:.2g}), {where}"}


def _routes(parts: Components, seeds: int | None, prompts: int | None, at: int,
            costs: RunCosts | None) -> dict:
    """The two routes' sizes and prices, and which is cheaper where both are priced."""
    more_s = None if seeds is None else seeds - parts.seeds
    more_p = None if prompts is None else prompts - parts.prompts
    priced = (costs.seeds(more_s) if costs and more_s is not None else None,
              costs.prompts(more_p, at) if costs and more_p is not None else None)
    cheaper = None if None in priced else ("seeds" if priced[0] <= priced[1] else "prompts")
    return {"seeds": seeds, "more_seeds": more_s, "prompts": prompts, "more_prompts": more_p,
            "seeds_seconds": priced[0], "prompts_seconds": priced[1], "cheaper": cheaper,
            "both": None}


def _route_text(w: dict, parts: Components, at: int, pool: int | None) -> str:
    def cost(seconds: float | None, extra: str = "") -> str:
        return f"; {duration(seconds)}{extra}" if seconds is not None else ""

    if w["both"]:
        b = w["both"]
        return (f"neither alone: +{b['more_seeds']} seeds and +{b['more_prompts']} held-out "
                f"prompts together ({b['seeds']} x {b['prompts']}{cost(b['seconds'])})")
    seeds = f"+{w['more_seeds']} seeds ({w['seeds']} in all{cost(w['seeds_seconds'])})" \
        if w["seeds"] is not None else "no number of seeds (the prompt component alone is too wide)"
    prompts = (f"+{w['more_prompts']} held-out prompts ({w['prompts']} in all"
               + (f" at {at} seeds" if at != parts.seeds else "")
               + f"{cost(w['prompts_seconds'], ', every run again')})") \
        if w["prompts"] is not None else \
        f"not more prompts: {w['over_pool']} would be needed, the task holds {pool}" \
        if w.get("over_pool") else "no number of prompts (the seed component alone is too wide)"
    return f"{seeds}, or {prompts}"


def _both(parts: Components, goal: float, costs: RunCosts | None) -> dict | None:
    """The cheapest seeds x prompts together, priced as a new sweep of the pair at that size."""
    price = (lambda s, p: costs.prompts(p - parts.prompts, s)) \
        if costs and costs.prompt_seconds is not None else None
    found = both_for(parts, goal, price, max_prompts=costs.prompt_pool if costs else None)
    if found is None:
        return None
    s, p = found
    return {"seeds": s, "prompts": p, "more_seeds": s - parts.seeds,
            "more_prompts": p - parts.prompts, "seconds": price(s, p) if price else None}


def _looks(n: int, design: Design) -> list[tuple[int, float, str]]:
    """An adaptive plan's later looks (seeds, boundary p, where), then its last boundary."""
    level_family = design.alpha / max(1, len(design.arms))
    out = [(rung, design.boundary_p(look, level_family),
            f"at look {look + 1}'s boundary p {design.boundary_p(look, level_family):.2g} "
            f"(rung of {rung} seeds)") for look, rung in enumerate(design.rungs) if rung > n]
    last = len(design.rungs) - 1
    level = design.boundary_p(last, level_family)
    out.append((max(n, design.rungs[last]), level,
                f"at the last boundary p {level:.2g}, beyond the plan's last rung "
                f"({design.rungs[last]} seeds): a new plan"))
    return out


def _power_curve(on: str, test: str, diff: float, sd: float, min_effect: float):
    """power(n seeds, level) of the test that would settle the arm: TOST for equivalence,
    else the t-test at the observed difference."""
    if on == "equivalence":
        return lambda k, level: tost_power(diff, sd, k, level, min_effect, test)
    return lambda k, level: power(test, abs(diff), sd, k, level)


def _on_the_ladder(power_at, n: int, design: Design) -> tuple[int | None, float, str]:
    """The first later rung whose look has 80% power at its boundary; past the last rung,
    the seeds the last boundary would need."""
    level_family = design.alpha / max(1, len(design.arms))
    for look, rung in enumerate(design.rungs):
        if rung <= n:
            continue
        level = design.boundary_p(look, level_family)
        if power_at(rung, level) >= POWER:
            return rung, level, f"at look {look + 1}'s boundary p {level:.2g} (rung of {rung} seeds)"
    last = len(design.rungs) - 1
    level = design.boundary_p(last, level_family)
    seeds = first_n(lambda k: power_at(k, level), max(n, design.rungs[last]) + 1, POWER)
    return seeds, level, (f"at the last boundary p {level:.2g}, beyond the plan's last rung "
                          f"({design.rungs[last]} seeds): a new plan")


def with_waiting(arms: tuple[ArmResult, ...], min_effect: float, alpha: float,
                 comparisons: int, design: Design | None,
                 st: Stratum | None = None) -> tuple[ArmResult, ...]:
    """Each arm with its `waiting_on` (None when decided) and the seeds it names: the one
    answer the table, report.json and the recipe give; priced from `st`'s records. `design`:
    the adaptive plan, for the arms it decides."""
    def settled(arm: ArmResult) -> ArmResult:
        # Priced only where there is a prompts route to weigh: an open arm under the task scope.
        priced = st is not None and arm.variance and arm.verdict not in DECIDED
        costs = run_costs(st, arm.arm, arm.variance) if priced else None
        w = waiting_on(arm.entry(), min_effect, alpha, comparisons,
                       design if arm.adaptive else None, costs)
        return replace(arm, waiting_on=w, seeds_needed=w["seeds"] if w else None,
                       more_seeds_needed=w["more_seeds"] if w else None)

    return tuple(settled(a) for a in arms)


def run_costs(st: Stratum, arm: str, variance: dict | None) -> RunCosts | None:
    """An arm's and its baseline's mean run wall seconds, one held-out prompt's share of a
    run's evaluation seconds (where the runs have per-prompt outcomes), and the fewest
    held-out prompts their task's data holds (where the records say)."""
    sub = st.sub[st.sub["arm"].isin([arm, st.against_of(arm)])
                 & (st.sub["status"].to_numpy() != "failed")]
    timed = "wall_seconds" in sub and sub["wall_seconds"].notna().any()
    pool = sub["prompt_pool"].min() if "prompt_pool" in sub else math.nan
    if not timed and pd.isna(pool):
        return None
    per_prompt = None
    if timed and variance and "budget/eval_seconds" in sub and \
            sub["budget/eval_seconds"].notna().any():
        per_prompt = float(sub["budget/eval_seconds"].mean()) / variance["prompts"]
    return RunCosts(float(sub["wall_seconds"].mean()) if timed else None, per_prompt,
                    int(pool) if pd.notna(pool) else None)
