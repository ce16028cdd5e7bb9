"""Per stratum (model x task) and metric: every arm against the baseline, corrected for
multiple comparisons, with a verdict. Plus the single-run illusion and the recipe."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from grpo_ablate.errors import UserError
from grpo_ablate.stats.correct import adjust
from grpo_ablate.stats.tests import Comparison, mde, paired_compare, seeds_needed, welch_compare

VERDICTS = ("improves", "harms", "negligible", "no_effect", "inconclusive")
STABILITY_METRICS = ("kl_final", "kl_max", "entropy_ratio_final", "length_growth",
                     "grad_norm_max", "reward_volatility", "checkpoint_regret")


@dataclass(frozen=True)
class Settings:
    metric: str = "eval/accuracy"
    baseline: str = "baseline"
    alpha: float = 0.05
    correction: str = "holm"
    min_effect: float = 0.01   # in metric units: 1 point of accuracy
    secondary_correction: str = "bh"


def verdict(p_adjusted: float, ci_low: float, ci_high: float, tost_p: float, alpha: float,
            min_effect: float) -> str:
    """improves/harms: significant and the CI excludes 0 on that side; negligible:
    significant but the CI lies inside +/- min_effect; no_effect: TOST shows equivalence;
    else inconclusive. p > alpha alone never means no effect."""
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


def compare(arm_rows: pd.DataFrame, base_rows: pd.DataFrame, metric: str,
            min_effect: float, robust: bool = True) -> Comparison:
    """Paired when both arms have the same seeds once each (the matched design), else
    Welch with a note naming the unmatched seeds: nothing is dropped silently."""
    a = arm_rows.set_index("seed")[metric]
    b = base_rows.set_index("seed")[metric]
    notes = []
    nan_a, nan_b = a[a.isna()].index.tolist(), b[b.isna()].index.tolist()
    if nan_a or nan_b:
        notes.append(f"metric missing (NaN) for seeds {sorted(nan_a)} (arm), "
                     f"{sorted(nan_b)} (baseline): excluded")
    a, b = a.dropna(), b.dropna()
    matched = a.index.is_unique and b.index.is_unique and set(a.index) == set(b.index)
    if matched:
        seeds = sorted(a.index)
        out = paired_compare(a.loc[seeds].to_numpy(), b.loc[seeds].to_numpy(), min_effect,
                             robust=robust)
    else:
        only_a, only_b = sorted(set(a.index) - set(b.index)), sorted(set(b.index) - set(a.index))
        notes.append(f"seeds not matched (arm only: {only_a}, baseline only: {only_b}): "
                     "Welch's t-test on all runs")
        out = welch_compare(a.to_numpy(), b.to_numpy(), min_effect, robust=robust)
    out.notes = notes + out.notes
    return out


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, np.floating | np.integer):
        return _clean(x.item())
    return x


def analyse_metric(sub: pd.DataFrame, s: Settings, metric: str, correction: str,
                   full: bool = True) -> dict:
    """One stratum, one metric: baseline summary and one entry per arm. `full` adds the
    robustness columns and power (the primary metric); secondary metrics skip them."""
    if metric not in sub.columns:
        raise UserError(f"--metric {metric}: no run has it; available: "
                        + ", ".join(c for c in sub.columns if "/" in c and
                                    not c.startswith("stability/")))
    usable = sub[sub["status"] != "failed"]
    base = usable[usable["arm"] == s.baseline]
    arms = [a for a in dict.fromkeys(sub["arm"]) if a != s.baseline]
    entries, comps = [], []
    for arm in arms:
        rows = usable[usable["arm"] == arm]
        comps.append(compare(rows, base, metric, s.min_effect, robust=full))
    k = max(1, sum(not math.isnan(c.p_value) for c in comps))
    p_adj = adjust([c.p_value for c in comps], correction)
    for arm, c, pa in zip(arms, comps, p_adj, strict=True):
        all_rows = sub[sub["arm"] == arm]
        v = verdict(pa, c.ci_low, c.ci_high, c.tost_p, s.alpha, s.min_effect)
        needed = seeds_needed(c.test, c.sd, s.min_effect, s.alpha / k) if full else None
        vals = usable[usable["arm"] == arm][metric].dropna()
        entry = {
            "arm": arm, "n": int(len(vals)), "mean": vals.mean() if len(vals) else None,
            "std": vals.std(ddof=1) if len(vals) > 1 else None, "diff": c.diff,
            "ci_low": c.ci_low, "ci_high": c.ci_high, "test": c.test, "p_value": c.p_value,
            "p_adjusted": pa, "effect_size": c.effect_size, "tost_p": c.tost_p,
            "seed_correlation": c.correlation,
            "mde": mde(c.test, c.sd, c.n, s.alpha / k) if full else None, "seeds_needed": needed,
            "more_seeds_needed": (max(0, needed - c.n) if needed is not None else None)
            if v == "inconclusive" else 0,
            "robust_p": c.robust_p, "permutation_p": c.permutation_p,
            "prob_improvement": c.prob_improvement,
            "runs_diverged": int((all_rows["status"] == "diverged").sum()),
            "runs_failed": int((all_rows["status"] == "failed").sum()),
            "verdict": v, "notes": c.notes,
        }
        entries.append({key: _clean(val) for key, val in entry.items()})
    bvals = base[metric].dropna()
    baseline = {"n": int(len(bvals)), "mean": _clean(bvals.mean()) if len(bvals) else None,
                "std": _clean(bvals.std(ddof=1)) if len(bvals) > 1 else None,
                "runs_failed": int((sub[(sub["arm"] == s.baseline)]["status"] == "failed").sum())}
    return {"baseline": baseline, "arms": entries, "k": k}


def single_run_illusion(sub: pd.DataFrame, arms: list[dict], s: Settings) -> dict:
    """How often one seed's comparison (trick seed s vs baseline seed s) disagrees with
    the multi-seed verdict: pointing the other way or claiming more than it."""
    usable = sub[sub["status"] != "failed"]
    base = usable[usable["arm"] == s.baseline].set_index("seed")[s.metric]
    per_arm, single_improves, unconfirmed = {}, 0, 0
    for entry in arms:
        rows = usable[usable["arm"] == entry["arm"]].set_index("seed")[s.metric]
        seeds = sorted(set(rows.index) & set(base.index))
        calls = []
        for seed in seeds:
            d = rows.loc[seed] - base.loc[seed]
            if not np.isscalar(d) or math.isnan(d):
                continue
            calls.append("improves" if d >= s.min_effect else "harms" if d <= -s.min_effect
                         else "negligible")
        disagree = sum(_disagrees(c, entry["verdict"]) for c in calls)
        single_improves += sum(c == "improves" for c in calls)
        unconfirmed += sum(c == "improves" for c in calls) if entry["verdict"] != "improves" else 0
        per_arm[entry["arm"]] = {"single_runs": len(calls),
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


def recipe(arms: list[dict]) -> dict:
    by = {v: [a["arm"] for a in arms if a["verdict"] == v] for v in VERDICTS}
    return {"keep": by["improves"], "safe_to_drop": by["no_effect"] + by["negligible"],
            "avoid": by["harms"],
            "undecided": [{"arm": a["arm"], "more_seeds_needed": a["more_seeds_needed"]}
                          for a in arms if a["verdict"] == "inconclusive"]}


def analyse(df: pd.DataFrame, s: Settings, secondary: list[str] | None = None) -> dict:
    """The whole report.json: one entry per (model, task) stratum."""
    if s.baseline not in set(df["arm"]):
        raise UserError(f"--baseline {s.baseline}: no such arm in the results; arms: "
                        + ", ".join(sorted(set(df["arm"]))))
    if s.metric not in df.columns:
        analyse_metric(df, s, s.metric, s.correction)  # raises the clear error
    out = {"metric": s.metric, "alpha": s.alpha, "correction": s.correction,
           "baseline": s.baseline, "min_effect": s.min_effect, "strata": []}
    for (model, task), sub in df.groupby(["model", "task"], sort=True):
        if s.baseline not in set(sub["arm"]):
            continue
        primary = analyse_metric(sub, s, s.metric, s.correction)
        if primary["baseline"]["n"] < 2:
            raise UserError(
                f"--baseline {s.baseline}: {primary['baseline']['n']} usable run(s) for "
                f"{model}/{task}; allowed: at least 2 seeds, which every test needs")
        stratum = {"model": model, "task": task, "baseline": primary["baseline"],
                   "arms": primary["arms"], "comparisons": primary["k"]}
        stratum["secondary"] = {
            m: analyse_metric(sub, s, m, s.secondary_correction, full=False)["arms"]
            for m in (secondary or []) if m in sub.columns and m != s.metric}
        stratum["stability"] = {
            m: analyse_metric(sub, s, f"stability/{m}", s.secondary_correction, full=False)["arms"]
            for m in STABILITY_METRICS if f"stability/{m}" in sub.columns
            and sub[f"stability/{m}"].notna().any()}
        stratum["single_run_illusion"] = single_run_illusion(sub, primary["arms"], s)
        stratum["recipe"] = recipe(primary["arms"])
        stratum["failures"] = [
            {k: _clean(r.get(k)) for k in ("arm", "seed", "status", "error", "run_id")}
            for r in sub[sub["status"] != "completed"].to_dict("records")]
        stratum["diagnostics"] = _diagnostics(sub)
        out["strata"].append(stratum)
    out["sign_flips"] = sign_flips(out["strata"])
    return out


def _diagnostics(sub: pd.DataFrame) -> dict:
    if "diagnostic_rules" not in sub.columns:
        return {}
    out: dict[str, dict[str, int]] = {}
    for arm, rules in zip(sub["arm"], sub["diagnostic_rules"].fillna(""), strict=True):
        for rule in filter(None, str(rules).split(",")):
            out.setdefault(arm, {}).setdefault(rule, 0)
            out[arm][rule] += 1
    return out


def sign_flips(strata: list[dict]) -> list[str]:
    """Tricks whose significant effects have opposite signs in different strata."""
    signs: dict[str, set[str]] = {}
    for st in strata:
        for a in st["arms"]:
            if a["verdict"] in ("improves", "harms"):
                signs.setdefault(a["arm"], set()).add(a["verdict"])
    return sorted(arm for arm, s in signs.items() if len(s) > 1)


def settings_dict(s: Settings) -> dict:
    return asdict(s)
