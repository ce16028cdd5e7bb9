"""Per stratum (model x task) and metric: every arm against the baseline, corrected for
multiple comparisons, with a verdict. Plus how much each trick acted, its budget, EMA
against raw weights, the single-run illusion and the recipe.

Decision rules (README, "How verdicts are made"):
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
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from grpo_ablate.errors import UserError
from grpo_ablate.stats.correct import adjust
from grpo_ablate.stats.sequential import Design, Ladder, take_look
from grpo_ablate.stats.table import metric_columns
from grpo_ablate.stats.tests import (
    Comparison,
    mde,
    paired_compare,
    seeds_needed,
    welch_compare,
)

VERDICTS = ("improves", "harms", "negligible", "no_effect", "inert", "inconclusive")
STABILITY_METRICS = ("kl_final", "kl_max", "entropy_ratio_final", "length_growth",
                     "grad_norm_max", "reward_volatility", "checkpoint_regret")
# Metric names whose smaller values are better, unless --direction says otherwise.
LOWER_IS_BETTER = ("loss", "kl", "grad_norm", "regret", "volatility", "perplexity", "error",
                   "length_growth")
BUDGET_KEYS = ("optimizer_steps", "completions", "completion_tokens", "total_lr")
FLAGGED_BUDGET = ("optimizer_steps", "completions", "total_lr")  # tokens are an outcome
MIN_OVERLAP = 3  # partly matched seeds: pair on the overlap when it has at least this many


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

    @property
    def metric_direction(self) -> str:
        return self.direction or default_direction(self.metric)


def verdict(p_adjusted: float, ci_low: float, ci_high: float, tost_p: float, alpha: float,
            min_effect: float, direction: str = "higher") -> str:
    """improves/harms: significant and the CI excludes 0 on that side; negligible:
    significant but the CI lies inside +/- min_effect; no_effect: TOST shows equivalence;
    else inconclusive. p > alpha alone never means no effect."""
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


def compare(seeds: np.ndarray, a: np.ndarray, has_a: np.ndarray, b: np.ndarray,
            has_b: np.ndarray, min_effect: float, robust: bool = True) -> Comparison:
    """One arm against the baseline, both aligned on `seeds` (NaN where a value is absent;
    `has_*` marks the seeds that have a run).

    Paired on the seeds both have when every arm seed has a baseline partner, or when at
    least MIN_OVERLAP seeds are shared (the rest are named in a note, not used); Welch on
    all runs otherwise, with a note. Missing or non-finite values are excluded, with a note.
    """
    notes = []
    va, vb = ~np.isnan(a), ~np.isnan(b)
    nan_a, nan_b = seeds[has_a & ~va].tolist(), seeds[has_b & ~vb].tolist()
    if nan_a or nan_b:
        notes.append(f"metric missing or non-finite for seeds {nan_a} (arm), {nan_b} "
                     "(baseline): excluded")
    common = va & vb
    only_a, only_b = seeds[va & ~vb].tolist(), seeds[vb & ~va].tolist()
    if common.sum() >= 2 and (not only_a or common.sum() >= MIN_OVERLAP):
        if only_a or only_b:
            notes.append(f"paired on the {int(common.sum())} shared seeds; left out: arm seeds "
                         f"{only_a}, baseline seeds {only_b}")
        out = paired_compare(a[common], b[common], min_effect, robust=robust)
    else:
        notes.append(f"seeds not matched (arm only: {only_a}, baseline only: {only_b}): "
                     "Welch's t-test on all runs")
        out = welch_compare(a[va], b[vb], min_effect, robust=robust)
    out.notes = notes + out.notes
    return out


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, np.floating | np.integer):
        return _clean(x.item())
    return x


def _mean_std(x: np.ndarray) -> tuple[float | None, float | None]:
    x = x[~np.isnan(x)]
    return (float(x.mean()) if len(x) else None, float(x.std(ddof=1)) if len(x) > 1 else None)


class Stratum:
    """One (model, task) slice as seed x arm tables, one per metric, built once: every
    comparison then works on numpy columns, never on row filters."""

    def __init__(self, sub: pd.DataFrame, baseline: str, metrics: list[str]) -> None:
        self.sub = sub
        self.baseline = baseline
        self.arms = [a for a in dict.fromkeys(sub["arm"]) if a != baseline]
        usable = sub[sub["status"].to_numpy() != "failed"]
        order = [baseline, *self.arms]
        self.column_of = {arm: j for j, arm in enumerate(order)}
        present = usable.assign(_run=1.0).pivot(index="seed", columns="arm", values="_run")
        self.seeds = present.index.to_numpy()
        self.has = present.reindex(columns=order).notna().to_numpy()
        wide = usable.pivot(index="seed", columns="arm", values=metrics) if metrics else None
        self.tables = {m: wide[m].reindex(index=present.index, columns=order).to_numpy(dtype=float)
                       for m in metrics}
        status = sub.groupby("arm")["status"].value_counts().unstack(fill_value=0)
        self.counts = {arm: (int(row.get("diverged", 0)), int(row.get("failed", 0)))
                       for arm, row in status.iterrows()}

    def column(self, arm: str, metric: str) -> np.ndarray:
        if metric not in self.tables:
            return np.full(len(self.seeds), np.nan)
        return self.tables[metric][:, self.column_of[arm]]

    def compare(self, arm: str, other: str, metric: str, min_effect: float, robust: bool,
                other_metric: str | None = None) -> Comparison:
        j, k = self.column_of[arm], self.column_of[other]
        return compare(self.seeds, self.column(arm, metric), self.has[:, j],
                       self.column(other, other_metric or metric), self.has[:, k], min_effect,
                       robust)


def analyse_metric(st: Stratum, s: Settings, metric: str, correction: str, direction: str,
                   full: bool = True) -> dict:
    """One stratum, one metric: baseline summary and one entry per arm. `full` adds the
    robustness columns and power (the primary metric); secondary metrics skip them."""
    comps = [st.compare(arm, st.baseline, metric, s.min_effect, full) for arm in st.arms]
    k = max(1, sum(not math.isnan(c.p_value) for c in comps))
    p_adj = adjust([c.p_value for c in comps], correction)
    tost_adj = adjust([c.tost_p for c in comps], correction)
    entries = []
    for arm, c, pa, ta in zip(st.arms, comps, p_adj, tost_adj, strict=True):
        v = verdict(pa, c.ci_low, c.ci_high, ta, s.alpha, s.min_effect, direction)
        if c.exact and c.diff == 0.0 and c.n >= 2:
            v = "no_effect"  # identical on every matched seed: the equivalence is exact
        needed = seeds_needed(c.test, c.sd, s.min_effect, s.alpha / k) if full else None
        vals = st.column(arm, metric)
        mean, std = _mean_std(vals)
        diverged, failed = st.counts.get(arm, (0, 0))
        entry = {
            "arm": arm, "n": int((~np.isnan(vals)).sum()), "mean": mean, "std": std,
            "diff": c.diff, "ci_low": c.ci_low, "ci_high": c.ci_high, "test": c.test,
            "p_value": c.p_value, "p_adjusted": pa, "effect_size": c.effect_size,
            "tost_p": c.tost_p, "tost_p_adjusted": ta, "seed_correlation": c.correlation,
            "mde": mde(c.test, c.sd, c.n, s.alpha / k, n_base=c.n_base) if full else None,
            "diff_sd": c.sd if full else None,  # the test's sd: of paired differences, or pooled
            "seeds_needed": needed,
            "more_seeds_needed": (max(0, needed - c.n) if needed is not None else None)
            if v == "inconclusive" else 0,
            "robust_p": c.robust_p, "permutation_p": c.permutation_p,
            "prob_improvement": c.prob_improvement if direction == "higher"
            else 1 - c.prob_improvement,
            "runs_diverged": diverged, "runs_failed": failed, "verdict": v, "notes": c.notes,
        }
        entries.append({key: _clean(val) for key, val in entry.items()})
    bvals = st.column(st.baseline, metric)
    mean, std = _mean_std(bvals)
    baseline = {"n": int((~np.isnan(bvals)).sum()), "mean": mean, "std": std,
                "runs_failed": st.counts.get(st.baseline, (0, 0))[1]}
    return {"baseline": baseline, "arms": entries, "k": k}


# ---------------------------------------------------------------------------- adaptive ladder
def replay_ladder(st: Stratum, design: Design, direction: str) -> tuple[Ladder, int | None]:
    """Re-take an adaptive sweep's looks from its runs (the records are the only state).
    Returns the ladder and the 0-based look whose runs are not all recorded yet (None when
    the ladder is finished). A look needs a record (any status) for the baseline and every
    arm still open, on every seed below its rung."""
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
        take_look(ladder, comps, direction)
    return ladder, None


def apply_ladder(arms: list[dict], ladder: Ladder, pending: int | None, runs: int) -> dict:
    """An adaptive sweep's verdicts are its looks' decisions: the arm entries get them,
    and the stratum gets the plan and the runs saved against fixed n at the last rung."""
    d = ladder.design
    for entry in arms:
        got = ladder.settled.get(entry["arm"])
        if entry["arm"] not in ladder.arms:
            entry["notes"].append("not in the adaptive plan: a fixed-n verdict")
            continue
        if got is None:
            entry["verdict"] = "inconclusive"
            entry["adaptive"] = {"look": None, "seeds": None, "reason": "open",
                                 "next_seeds": d.rungs[pending] if pending is not None else None}
            continue
        entry["verdict"] = got.verdict
        if got.verdict != "inconclusive":
            entry["more_seeds_needed"] = 0
        entry["adaptive"] = {k: _clean(v) for k, v in asdict(got).items()}
    fixed = (len(ladder.arms) + 1) * d.rungs[-1]
    return {"design": asdict(d), "plan": d.table(len(ladder.arms)), "looks_done": ladder.looks_done,
            "pending_look": pending + 1 if pending is not None else None,
            "runs_used": runs, "runs_fixed_n": fixed, "runs_saved": 1 - runs / fixed}


# ---------------------------------------------------------------------------- activity, budget
def activity(st: Stratum) -> dict[str, dict]:
    """Per arm: how much its trick acted (mean over runs of the record's `activity.acted`),
    what was counted, and whether the arm is the baseline by construction."""
    sub = st.sub
    if "activity" not in sub.columns:
        return {}
    groups = dict(iter(sub.groupby("arm", sort=False)))
    base_keys = set(groups[st.baseline]["config_key"].dropna())
    detail_cols = [c for c in sub.columns if c.startswith("activity/")]
    value_cols = [c for c in sub.columns if c.startswith("values/")]
    out: dict[str, dict] = {}
    for arm in st.arms:
        rows = groups[arm]
        keys = set(rows["config_key"].dropna())
        acted = rows["activity"].dropna()
        if keys and keys == base_keys:
            out[arm] = {"acted": 0.0, "measure": "identical to the baseline by construction",
                        "details": {}}
        elif len(acted):
            means = rows[detail_cols].mean()
            measure = rows["activity_measure"].dropna()
            values = rows[value_cols].mean()
            out[arm] = {"acted": float(acted.mean()),
                        "measure": measure.iloc[0] if len(measure) else None,
                        "details": {c.split("/", 1)[1]: _clean(v) for c, v in means.items()
                                    if not math.isnan(v)}}
            # The values the trick used, in reward units (the mean over seeds: one value
            # unless they were measured per run).
            used = {c.split("/", 1)[1]: _clean(v) for c, v in values.items() if not math.isnan(v)}
            if used:
                out[arm]["values"] = used
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
        row = {k: _clean(float(means.loc[arm, f"budget/{k}"])) for k in cols}
        ratio = {k: _clean(float(means.loc[arm, f"budget/{k}"] / base[f"budget/{k}"]))
                 if base[f"budget/{k}"] else None for k in cols}
        differs = [k for k in FLAGGED_BUDGET if ratio.get(k) is not None and abs(ratio[k] - 1) > 0.01]
        out[arm] = {**row, "ratio": ratio, "differs": differs}
    return out


def ema_vs_raw(st: Stratum, s: Settings) -> list[dict]:
    """Arms that evaluate averaged weights: their metric against the same run's raw weights,
    paired by seed (Holm over those arms), and checkpoint regret for both."""
    raw = f"raw/{s.metric}"
    out, comps = [], []
    for arm in [st.baseline, *st.arms]:
        if np.isnan(st.column(arm, raw)).all():
            continue
        c = st.compare(arm, arm, s.metric, s.min_effect, robust=False, other_metric=raw)
        comps.append(c)
        out.append({"arm": arm, "n": c.n, "ema_mean": _mean_std(st.column(arm, s.metric))[0],
                    "raw_mean": _mean_std(st.column(arm, raw))[0], "diff": _clean(c.diff),
                    "ci_low": _clean(c.ci_low), "ci_high": _clean(c.ci_high),
                    "p_value": _clean(c.p_value),
                    "regret_ema": _mean_std(st.column(arm, "stability/checkpoint_regret"))[0],
                    "regret_raw": _mean_std(st.column(arm, "stability/checkpoint_regret_raw"))[0],
                    "notes": c.notes})
    for entry, pa in zip(out, adjust([c.p_value for c in comps], "holm"), strict=True):
        entry["p_adjusted"] = _clean(pa)
    return out


def apply_activity(arms: list[dict], acts: dict[str, dict], s: Settings) -> None:
    """An arm whose trick hardly acted is `inert`, not `no_effect`: it was not tested."""
    for entry in arms:
        act = acts.get(entry["arm"])
        entry["activity"] = act
        if act is None:
            continue
        if act["acted"] < s.inert_below:
            if entry["verdict"] in ("no_effect", "negligible", "inconclusive"):
                entry["verdict"] = "inert"
                entry["more_seeds_needed"] = 0
            else:
                entry["notes"].append(f"the trick acted on only {act['acted']:.1%} "
                                      f"({act['measure']}), yet the outcome moved")


# ---------------------------------------------------------------------------- illusion, recipe
def single_run_illusion(st: Stratum, arms: list[dict], s: Settings, direction: str) -> dict:
    """How often one seed's comparison (trick seed s vs baseline seed s) disagrees with
    the multi-seed verdict: pointing the other way or claiming more than it."""
    sign = 1.0 if direction == "higher" else -1.0
    base = st.column(st.baseline, s.metric)
    per_arm, single_improves, unconfirmed = {}, 0, 0
    for entry in arms:
        d = sign * (st.column(entry["arm"], s.metric) - base)
        d = d[~np.isnan(d)]
        calls = ["improves" if x >= s.min_effect else "harms" if x <= -s.min_effect
                 else "negligible" for x in d]
        disagree = sum(_disagrees(c, entry["verdict"]) for c in calls)
        n_improves = calls.count("improves")
        single_improves += n_improves
        unconfirmed += n_improves if entry["verdict"] != "improves" else 0
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
            "avoid": by["harms"], "untested": by["inert"],
            "undecided": [{"arm": a["arm"], "more_seeds_needed": a["more_seeds_needed"]}
                          for a in arms if a["verdict"] == "inconclusive"]}


# ---------------------------------------------------------------------------- the whole report
def check_metric(df: pd.DataFrame, metric: str, flag: str = "--metric") -> None:
    available = metric_columns(df)
    if metric not in df.columns:
        raise UserError(f"{flag} {metric}: no run has it; available: "
                        + (", ".join(available) or "no numeric metric column"))
    if metric not in available:
        bad = next((v for v in df[metric] if not _is_number(v)), "?")
        raise UserError(f"{flag} {metric}: the column is not numeric (holds {bad!r}); allowed: "
                        "numeric columns: " + (", ".join(available) or "none"))


def _is_number(value) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def analyse(df: pd.DataFrame, s: Settings, secondary: list[str] | None = None) -> dict:
    """The whole report.json: one entry per (model, task) stratum."""
    if s.baseline not in set(df["arm"]):
        raise UserError(f"--baseline {s.baseline}: no such arm in the results; arms: "
                        + ", ".join(sorted(set(df["arm"]))))
    check_metric(df, s.metric)
    direction = s.metric_direction
    numeric = set(metric_columns(df))
    out = {"metric": s.metric, "direction": direction, "alpha": s.alpha,
           "correction": s.correction, "baseline": s.baseline, "min_effect": s.min_effect,
           "inert_below": s.inert_below, "strata": [], "strata_without_baseline": []}
    for (model, task), sub in df.groupby(["model", "task"], sort=True):
        if s.baseline not in set(sub["arm"]):
            out["strata_without_baseline"].append(
                {"model": model, "task": task, "arms": sorted(set(sub["arm"])), "runs": len(sub)})
            continue
        _check_one_recipe(sub, s.baseline, model, task)
        wanted = [s.metric, f"raw/{s.metric}", *(secondary or []),
                  *(f"stability/{m}" for m in STABILITY_METRICS), "stability/checkpoint_regret_raw"]
        st = Stratum(sub, s.baseline, [m for m in dict.fromkeys(wanted) if m in numeric])
        primary = analyse_metric(st, s, s.metric, s.correction, direction)
        if primary["baseline"]["n"] < 2:
            raise UserError(
                f"--baseline {s.baseline}: {primary['baseline']['n']} usable run(s) for "
                f"{model}/{task}; allowed: at least 2 seeds, which every test needs")
        adaptive = None
        if s.sequential is not None and s.sequential.metric == s.metric:
            ladder, pending = replay_ladder(st, s.sequential, direction)
            adaptive = apply_ladder(primary["arms"], ladder, pending, runs=len(sub))
        apply_activity(primary["arms"], activity(st), s)
        stratum = {"model": model, "task": task, "baseline": primary["baseline"],
                   "arms": primary["arms"], "comparisons": primary["k"]}
        if adaptive:
            stratum["adaptive"] = adaptive
        stratum["secondary"] = {
            m: analyse_metric(st, s, m, s.secondary_correction, default_direction(m),
                              full=False)["arms"]
            for m in (secondary or []) if m in numeric and m != s.metric
            and sub[m].notna().any()}
        stratum["stability"] = {
            m: analyse_metric(st, s, f"stability/{m}", s.secondary_correction,
                              default_direction(m), full=False)["arms"]
            for m in STABILITY_METRICS if f"stability/{m}" in numeric
            and sub[f"stability/{m}"].notna().any()}
        stratum["budget"] = budget(st)
        stratum["ema_vs_raw"] = ema_vs_raw(st, s)
        stratum["single_run_illusion"] = single_run_illusion(st, primary["arms"], s, direction)
        stratum["recipe"] = recipe(primary["arms"])
        stratum["failures"] = [
            {k: _clean(r.get(k)) for k in ("arm", "seed", "status", "error", "run_id")}
            for r in sub[sub["status"] != "completed"].to_dict("records")]
        stratum["diagnostics"] = _diagnostics(sub)
        out["strata"].append(stratum)
    out["sign_flips"] = sign_flips(out["strata"])
    return out


def _check_one_recipe(sub: pd.DataFrame, baseline: str, model: str, task: str) -> None:
    """Sweeps combined in one report must share their baseline: runs of two recipes would
    be compared as if one variable had changed."""
    if "config_key" not in sub.columns:
        return
    keys = sub.loc[sub["arm"] == baseline, "config_key"].dropna().unique()
    if len(keys) > 1:
        dirs = sorted(set(sub.loc[sub["arm"] == baseline, "sweep_dir"].dropna()))
        raise UserError(f"{model}/{task}: the {baseline} runs come from {len(keys)} different "
                        f"recipes ({', '.join(dirs) or 'one folder'}); allowed: one recipe per "
                        "report (report those sweeps separately)")


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
