"""report.json's statistics: one `StratumReport` per (model, task) stratum, each arm's
result computed once by pure steps: its comparison and fixed-n verdict (metric_table.py),
an adaptive plan's decision where one is declared (ladder_replay.py), its trick's activity
(accounting.py), what an open verdict waits on (waiting.py); then what sits beside the
verdicts (accounting.py) and the secondary and stability metrics. The verdict rules are in
verdicts.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from grpo_ablate.stats.accounting import (
    activity,
    budget,
    diagnostics,
    ema_vs_raw,
    recipe,
    single_run_illusion,
    with_activity,
)
from grpo_ablate.stats.arm_result import ArmResult, StratumReport
from grpo_ablate.stats.columns import metric_columns
from grpo_ablate.stats.early_stop import (
    StopPlan,
    replay_stops,
    steps_used,
    stop_columns,
    stopped_notes,
)
from grpo_ablate.stats.errors import ResultsError, SettingError
from grpo_ablate.stats.ladder_replay import replay_ladder, with_ladder
from grpo_ablate.stats.metric_table import analyse_metric, resolved
from grpo_ablate.stats.stratum import Stratum, clean
from grpo_ablate.stats.verdicts import Settings, default_direction
from grpo_ablate.stats.waiting import with_waiting

__all__ = ["STABILITY_METRICS", "Settings", "analyse", "check_metric", "sign_flips"]

EQUIVALENCE_RUNS_IN_REACH = 1000  # runs per arm beyond which a margin is called out of reach
STABILITY_METRICS = ("kl_final", "kl_max", "entropy_ratio_final", "length_growth",
                     "grad_norm_max", "reward_volatility", "checkpoint_regret")


# ---------------------------------------------------------------------------- the whole report
def check_metric(df: pd.DataFrame, metric: str) -> None:
    available = metric_columns(df)
    if metric not in df.columns:
        raise SettingError("metric", metric, "no run has it; available: "
                           + (", ".join(available) or "no numeric metric column"))
    if metric not in available:
        bad = next((v for v in df[metric] if not _is_number(v)), "?")
        raise SettingError("metric", metric, f"the column is not numeric (holds {bad!r}); "
                           "allowed: numeric columns: " + (", ".join(available) or "none"))


def _is_number(value) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def analyse(df: pd.DataFrame, s: Settings, secondary: list[str] | None = None,
            prompts: pd.DataFrame | None = None) -> dict:
    """The whole report.json: one entry per (model, task) stratum. `prompts`: per-prompt
    outcomes (arm, seed, model, task, prompt, metrics), for the task scope."""
    if s.baseline not in set(df["arm"]):
        raise SettingError("baseline", s.baseline, "no such arm in the results; arms: "
                           + ", ".join(sorted(set(df["arm"]))))
    check_metric(df, s.metric)
    numeric = set(metric_columns(df))
    strata: list[StratumReport] = []
    without_baseline = []
    for (model, task), sub in df.groupby(["model", "task"], sort=True):
        if s.baseline not in set(sub["arm"]):
            without_baseline.append(
                {"model": model, "task": task, "arms": sorted(set(sub["arm"])), "runs": len(sub)})
            continue
        _check_one_recipe(sub, s.baseline, model, task)
        mine = None if prompts is None else \
            prompts[(prompts["model"] == model) & (prompts["task"] == task)]
        strata.append(analyse_stratum(sub, s, model, task, numeric, secondary or [],
                                      mine if mine is not None and len(mine) else None))
    return {"metric": s.metric, "direction": s.metric_direction, "alpha": s.alpha,
            "correction": s.correction, "baseline": s.baseline, "min_effect": s.min_effect,
            "min_effect_rule": "metric units" if s.min_effect_of is None else
            f"{s.min_effect:g} x the baseline's {'|mean|' if s.min_effect_of == 'mean' else 'sd'}",
            "inert_below": s.inert_below, "scope": s.scope, "runs": s.runs, "arms": s.arms,
            "strata": [st.as_dict() for st in strata],
            "strata_without_baseline": without_baseline, "sign_flips": sign_flips(strata)}


def side_metrics(st: Stratum, s: Settings, metrics,
                 prefix: str = "") -> dict[str, tuple[ArmResult, ...]]:
    """The secondary or stability metrics' arm results (no ladder, their own correction)."""
    return {m: analyse_metric(st, s, prefix + m, s.secondary_correction, default_direction(m),
                              full=False).arms
            for m in metrics if prefix + m in st.tables and st.sub[prefix + m].notna().any()}


def analyse_stratum(sub: pd.DataFrame, s: Settings, model: str, task: str, numeric: set[str],
                    secondary: list[str], prompts: pd.DataFrame | None = None
                    ) -> StratumReport:
    """One (model, task) stratum: the primary metric's verdicts (an adaptive sweep's from
    its looks), the secondary and stability metrics, and what sits beside the verdicts."""
    direction = s.metric_direction
    stops = s.sequential if isinstance(s.sequential, StopPlan) else None
    wanted = [s.metric, f"raw/{s.metric}", *secondary,
              *(f"stability/{m}" for m in STABILITY_METRICS), "stability/checkpoint_regret_raw",
              *(stop_columns(stops) if stops else [])]
    st = Stratum(sub, s.baseline, [m for m in dict.fromkeys(wanted) if m in numeric], s.runs)
    base_n = int((~np.isnan(st.column(s.baseline, s.metric))).sum())
    if base_n < 2:
        raise SettingError(
            "baseline", s.baseline, f"{base_n} usable run(s) for {model}/{task}; allowed: "
            "at least 2 seeds, which every test needs")
    relative, asked = s.min_effect_of, s
    s = resolved(s, st, s.metric)
    if not s.min_effect > 0:
        raise SettingError("min_effect", relative_text(relative, asked), f"the baseline's "
                           f"{'mean' if relative == 'mean' else 'sd'} of {s.metric} in "
                           f"{model}/{task} is 0 or unknown; allowed: a margin in metric units")
    acts = activity(st)
    adaptive_plan = s.sequential is not None and s.sequential.metric == s.metric
    # An adaptive sweep's looks use the scope its plan declared, whatever the report asks.
    scoped = replace(s, scope=s.sequential.scope) if adaptive_plan else s
    primary = analyse_metric(st, scoped, s.metric, s.correction, direction, acts=acts,
                             prompts=prompts)
    arms, adaptive = primary.arms, None
    if adaptive_plan:
        p_at_looks: dict[str, list] = {}
        if stops:
            ladder, pending = replay_stops(st, stops, direction, prompts, p_at_looks)
        else:
            ladder, pending = replay_ladder(st, s.sequential, direction, prompts)
        arms, adaptive = with_ladder(arms, ladder, pending, runs=len(sub), acts=acts,
                                     inert_below=s.inert_below)
        if stops:  # steps, not runs, are what stopping early saves
            adaptive = {**adaptive, "early_stop": {
                **steps_used(ladder, stops, st),
                "p_at_looks": {a: [clean(p) for p in ps] for a, ps in p_at_looks.items()}}}
            arms = tuple(replace(a, notes=stopped_notes(a, stops)) for a in arms)
    arms = with_activity(arms, acts, s.inert_below)
    arms = with_waiting(arms, s.min_effect, s.alpha, primary.k,
                        s.sequential if adaptive else None, st)
    return StratumReport(
        model=model, task=task, baseline=primary.baseline, arms=arms, comparisons=primary.k,
        scope=scope_in_force(scoped.scope, arms, prompts is not None, s.runs), adaptive=adaptive,
        secondary=side_metrics(st, asked, [m for m in secondary if m != s.metric]),
        stability=side_metrics(st, asked, STABILITY_METRICS, prefix="stability/"),
        beside=beside_verdicts(st, s, arms), min_effect=s.min_effect,
        margin_note=margin_note(s, primary.baseline, relative))


def scope_in_force(scope: str, arms: tuple[ArmResult, ...], have_prompts: bool,
                   runs: str = "matched") -> str:
    """What the stratum's verdicts generalise to: `task` (seeds and prompts as chance),
    `prompts` (these held-out prompts, as asked, or as an adaptive plan declared), or
    `prompts (no per-prompt outcomes)`, or `prompts (no seeds shared)` where matched runs
    carry them but no arm shares 2 seeds with its baseline (the crossed test pairs seeds),
    or `prompts (no spread to split)` where no arm's difference has a spread (each the same
    on every seed and prompt, or too few of them)."""
    if scope == "prompts":
        return "prompts"
    if have_prompts and any(a.variance for a in arms):
        return "task"
    if have_prompts and runs == "matched" and arms and all(a.test == "welch_t" for a in arms):
        return "prompts (no seeds shared)"
    return "prompts (no spread to split)" if have_prompts else "prompts (no per-prompt outcomes)"


def relative_text(relative: str | None, s: Settings) -> str:
    return f"{s.min_effect:g}" if relative is None else \
        f"{s.min_effect:g} of the baseline's {relative}"


def margin_note(s: Settings, baseline: dict, relative: str | None) -> str | None:
    """A line where an absolute margin is meaningless on the metric's scale: so small
    against the baseline's spread over runs that no practical number of runs could show
    equivalence within it (TOST at 95% with a zero true difference: runs per arm about
    2 (1.645 sd / margin)^2)."""
    sd = baseline.get("std")
    if relative is not None or not sd or not sd > 0:
        return None
    runs = 2 * (1.645 * sd / s.min_effect) ** 2
    if runs <= EQUIVALENCE_RUNS_IN_REACH:
        return None
    return (f"min-effect {s.min_effect:g} is {s.min_effect / sd:.2g} of the baseline's sd "
            f"({sd:.4g}) on {s.metric}: equivalence would need about {runs:,.0f} runs per arm, "
            "so no verdict can be 'no effect'; give the margin on the metric's scale "
            "(--min-effect in its units, or 5% of the baseline's mean, or 0.2sd)")


def beside_verdicts(st: Stratum, s: Settings, arms: tuple[ArmResult, ...]) -> dict:
    """What a stratum's report shows beside its verdicts (stats/accounting.py). Independent
    runs have no seed s to set against seed s (no single-run illusion); arms that are
    methods, not tricks, get no recipe."""
    sub = st.sub
    return {
        "budget": budget(st),
        "ema_vs_raw": ema_vs_raw(st, s.metric, s.min_effect),
        "single_run_illusion": single_run_illusion(st, arms, s.metric, s.min_effect,
                                                   s.metric_direction)
        if s.runs == "matched" else None,
        "recipe": recipe(arms) if s.arms == "tricks" else None,
        "failures": [{k: clean(r.get(k)) for k in ("arm", "seed", "status", "error", "run_id")}
                     for r in sub[~sub["status"].isin(["completed", "paused"])
                                  ].to_dict("records")],
        "diagnostics": diagnostics(sub),
    }


def _check_one_recipe(sub: pd.DataFrame, baseline: str, model: str, task: str) -> None:
    """Sweeps combined in one report must share their baseline: runs of two recipes would
    be compared as if one variable had changed."""
    if "config_key" not in sub.columns:
        return
    keys = sub.loc[sub["arm"] == baseline, "config_key"].dropna().unique()
    if len(keys) > 1:
        dirs = sorted(set(sub.loc[sub["arm"] == baseline, "sweep_dir"].dropna()))
        raise ResultsError(f"{model}/{task}: the {baseline} runs come from {len(keys)} different "
                        f"recipes ({', '.join(dirs) or 'one folder'}); allowed: one recipe per "
                        "report (report those sweeps separately)")


def sign_flips(strata: list[StratumReport]) -> list[str]:
    """Tricks whose significant effects have opposite signs in different strata."""
    signs: dict[str, set[str]] = {}
    for st in strata:
        for a in st.arms:
            if a.verdict in ("improves", "harms"):
                signs.setdefault(a.arm, set()).add(a.verdict)
    return sorted(arm for arm, s in signs.items() if len(s) > 1)
