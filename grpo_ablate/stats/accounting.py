"""What the report shows beside each verdict, per stratum: how much each trick acted (and the
`inert` rule), each arm's budget against the baseline's, the averaged (EMA) weights against
the raw ones, the single-run illusion, the recommended recipe and the monitoring-rule hits."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import numpy as np
import pandas as pd

from grpo_ablate.stats.arm_result import ArmResult
from grpo_ablate.stats.correct import adjust
from grpo_ablate.stats.stratum import Stratum, clean, mean_std

VERDICTS = ("improves", "harms", "negligible", "no_effect", "inert", "inconclusive")
BUDGET_KEYS = ("optimizer_steps", "completions", "completion_tokens", "total_lr")
FLAGGED_BUDGET = ("optimizer_steps", "completions", "total_lr")  # tokens are an outcome


def activity(st: Stratum) -> dict[str, dict]:
    """Per arm: how much its trick acted (mean over runs of the record's `activity.acted`),
    what was counted, and whether the arm is the baseline by construction."""
    sub = st.sub
    if "activity" not in sub.columns:
        return {}
    groups = dict(iter(sub.groupby("arm", sort=False)))

    def keys_of(rows: pd.DataFrame) -> set:  # a CSV may carry activity without config keys
        return set(rows["config_key"].dropna()) if "config_key" in rows.columns else set()

    base_keys = keys_of(groups[st.baseline])
    detail_cols = [c for c in sub.columns if c.startswith("activity/")]
    value_cols = [c for c in sub.columns if c.startswith("values/")]
    out: dict[str, dict] = {}
    for arm in st.arms:
        rows = groups[arm]
        keys = keys_of(rows)
        acted = rows["activity"].dropna()
        if keys and keys == base_keys:
            out[arm] = {"acted": 0.0, "measure": "identical to the baseline by construction",
                        "details": {}}
        elif len(acted):
            means = rows[detail_cols].mean()
            measure = rows["activity_measure"].dropna() if "activity_measure" in rows.columns \
                else pd.Series(dtype=object)
            values = rows[value_cols].mean()
            # The values the trick used, in reward units (the mean over seeds: one value
            # unless they were measured per run).
            used = {c.split("/", 1)[1]: clean(v) for c, v in values.items() if not math.isnan(v)}
            out[arm] = {"acted": float(acted.mean()),
                        "measure": measure.iloc[0] if len(measure) else None,
                        "details": {c.split("/", 1)[1]: clean(v) for c, v in means.items()
                                    if not math.isnan(v)},
                        **({"values": used} if used else {})}
    return out


def budget(st: Stratum) -> dict[str, dict]:
    """Per arm: mean optimizer steps, completions, completion tokens and total LR, their
    ratio to the baseline's, and which planned quantities differ (by more than 1%)."""
    cols = [k for k in BUDGET_KEYS if f"budget/{k}" in st.sub.columns]
    if not cols:
        return {}
    means = st.sub.groupby("arm")[[f"budget/{k}" for k in cols]].mean()
    if st.baseline not in means.index:
        return {}
    base = means.loc[st.baseline]
    out = {}
    for arm in [st.baseline, *st.arms]:
        if arm not in means.index:
            continue
        row = {k: clean(float(means.loc[arm, f"budget/{k}"])) for k in cols}
        ratio = {k: clean(float(means.loc[arm, f"budget/{k}"] / base[f"budget/{k}"]))
                 if base[f"budget/{k}"] else None for k in cols}
        differs = [k for k in FLAGGED_BUDGET if ratio.get(k) is not None and abs(ratio[k] - 1) > 0.01]
        out[arm] = {**row, "ratio": ratio, "differs": differs}
    return out


def ema_vs_raw(st: Stratum, metric: str, min_effect: float) -> list[dict]:
    """Arms that evaluate averaged weights: their metric against the same run's raw weights,
    paired by seed (Holm over those arms), and checkpoint regret for both."""
    raw = f"raw/{metric}"
    arms = [arm for arm in [st.baseline, *st.arms] if not np.isnan(st.column(arm, raw)).all()]
    comps = [st.compare(arm, arm, metric, min_effect, robust=False, other_metric=raw)
             for arm in arms]
    p_adjusted = adjust([c.p_value for c in comps], "holm")
    return [{"arm": arm, "n": c.n, "ema_mean": mean_std(st.column(arm, metric))[0],
             "raw_mean": mean_std(st.column(arm, raw))[0], "diff": clean(c.diff),
             "ci_low": clean(c.ci_low), "ci_high": clean(c.ci_high),
             "p_value": clean(c.p_value),
             "regret_ema": mean_std(st.column(arm, "stability/checkpoint_regret"))[0],
             "regret_raw": mean_std(st.column(arm, "stability/checkpoint_regret_raw"))[0],
             "notes": c.notes, "p_adjusted": clean(pa)}
            for arm, c, pa in zip(arms, comps, p_adjusted, strict=True)]


def with_activity(arms: tuple[ArmResult, ...], acts: dict[str, dict],
                  inert_below: float) -> tuple[ArmResult, ...]:
    """Each arm with its trick's activity; a decided effect of a trick that hardly acted gets
    a note (the verdict's inert rule, verdicts.inert_rule, left it standing)."""
    def noted(arm: ArmResult) -> ArmResult:
        act = acts.get(arm.arm)
        note = (f"the trick acted on only {act['acted']:.1%} ({act['measure']}), yet the "
                "outcome moved",) if act is not None and act["acted"] < inert_below \
            and arm.verdict != "inert" else ()
        return replace(arm, primary=True, activity=act, notes=(*arm.notes, *note))

    return tuple(noted(a) for a in arms)


def single_run_illusion(st: Stratum, arms: tuple[ArmResult, ...], metric: str, min_effect: float,
                        direction: str) -> dict:
    """How often one seed's comparison (trick seed s vs baseline seed s) disagrees with
    the multi-seed verdict: pointing the other way or claiming more than it."""
    sign = 1.0 if direction == "higher" else -1.0
    base = st.column(st.baseline, metric)
    per_arm, single_improves, unconfirmed = {}, 0, 0
    for arm in arms:
        d = sign * (st.column(arm.arm, metric) - base)
        d = d[~np.isnan(d)]
        calls = ["improves" if x >= min_effect else "harms" if x <= -min_effect
                 else "negligible" for x in d]
        disagree = sum(_disagrees(c, arm.verdict) for c in calls)
        n_improves = calls.count("improves")
        single_improves += n_improves
        unconfirmed += n_improves if arm.verdict != "improves" else 0
        per_arm[arm.arm] = {"single_runs": len(calls),
                                 "disagree_fraction": disagree / len(calls) if calls else None}
    return {"per_arm": per_arm, "single_run_improves": single_improves,
            "unconfirmed_improves": unconfirmed,
            "unconfirmed_fraction": unconfirmed / single_improves if single_improves else None}


def _disagrees(single_call: str, verdict: str) -> bool:
    """A single seed disagrees when it claims a direction the verdict does not confirm, or
    calls it negligible where the verdict found a direction."""
    if single_call == "negligible":
        return verdict in ("improves", "harms")
    return single_call != verdict


def recipe(arms: tuple[ArmResult, ...]) -> dict:
    by = {v: [a.arm for a in arms if a.verdict == v] for v in VERDICTS}
    return {"keep": by["improves"], "safe_to_drop": by["no_effect"] + by["negligible"],
            "avoid": by["harms"], "untested": by["inert"],
            "undecided": [{"arm": a.arm, "more_seeds_needed": a.more_seeds_needed,
                           "waiting_on": a.waiting_on}
                          for a in arms if a.verdict == "inconclusive"]}


def diagnostics(sub: pd.DataFrame) -> dict:
    """Per arm: how many of its runs hit each monitoring rule (the records' diagnostics)."""
    if "diagnostic_rules" not in sub.columns:
        return {}
    hits = Counter((arm, rule) for arm, rules in zip(sub["arm"], sub["diagnostic_rules"]
                                                      .fillna(""), strict=True)
                   for rule in filter(None, str(rules).split(",")))
    return {arm: {rule: n for (a, rule), n in hits.items() if a == arm}
            for arm in dict.fromkeys(arm for arm, _ in hits)}
