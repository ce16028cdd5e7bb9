"""Per stratum (model x task) and metric: every arm against the baseline, corrected for
multiple comparisons, with a verdict (fixed n, or an adaptive sweep's looks replayed from
its records). What sits beside each verdict is in accounting.py.

Decision rules (docs/verdicts.md):
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
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from grpo_ablate.stats.accounting import (
    activity,
    budget,
    diagnostics,
    ema_vs_raw,
    note_activity,
    recipe,
    single_run_illusion,
)
from grpo_ablate.stats.columns import metric_columns
from grpo_ablate.stats.correct import adjust
from grpo_ablate.stats.crossed import CrossedTest, crossed_test, standard_error
from grpo_ablate.stats.errors import ResultsError, SettingError
from grpo_ablate.stats.sequential import Design, Ladder, take_look
from grpo_ablate.stats.significance import Comparison, is_zero_spread, mde
from grpo_ablate.stats.stratum import Stratum, clean, compare, mean_std
from grpo_ablate.stats.waiting import DECIDED, RunCosts, waiting_on

STABILITY_METRICS = ("kl_final", "kl_max", "entropy_ratio_final", "length_growth",
                     "grad_norm_max", "reward_volatility", "checkpoint_regret")
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
    min_effect: float = 0.01   # in metric units: 1 point of accuracy
    secondary_correction: str = "bh"
    direction: str | None = None  # higher | lower; None: from the metric's name
    inert_below: float = 0.05     # activity under this: the trick was not really tested
    sequential: Design | None = None  # an adaptive sweep's plan: verdicts from its looks
    scope: str = "task"  # task: seeds and held-out prompts as chance; prompts: seeds only

    @property
    def metric_direction(self) -> str:
        return self.direction or default_direction(self.metric)


UNTESTED = ("no_effect", "negligible", "inconclusive")  # what a trick that did not act gets


def verdict(p_adjusted: float, ci_low: float, ci_high: float, tost_p: float, alpha: float,
            min_effect: float, direction: str = "higher", exact_zero: bool = False,
            acted: float | None = None, inert_below: float = 0.05) -> str:
    """improves/harms: significant and the CI excludes 0 on that side; negligible:
    significant but the CI lies inside +/- min_effect; no_effect: TOST shows equivalence, or
    `exact_zero` (identical to the baseline on every matched seed); else inconclusive. p >
    alpha alone never means no effect. Then the inert rule (`inert`)."""
    return inert_rule(_outcome(p_adjusted, ci_low, ci_high, tost_p, alpha, min_effect,
                               direction, exact_zero), acted, inert_below)


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


def analyse_metric(st: Stratum, s: Settings, metric: str, correction: str, direction: str,
                   full: bool = True, acts: dict[str, dict] | None = None,
                   prompts: pd.DataFrame | None = None) -> dict:
    """One stratum, one metric: baseline summary and one entry per arm. `full` adds the
    robustness columns and power (the primary metric); secondary metrics skip them. `acts`:
    each arm's trick activity (the primary metric's verdicts apply the inert rule)."""
    comps, crossed = comparisons(st, s, metric, full, prompts)
    k = max(1, sum(not math.isnan(c.p_value) for c in comps))
    p_adj = adjust([c.p_value for c in comps], correction)
    tost_adj = adjust([c.tost_p for c in comps], correction)
    entries = []
    for arm, c, pa, ta, x in zip(st.arms, comps, p_adj, tost_adj, crossed, strict=True):
        act = (acts or {}).get(arm)
        v = verdict(pa, c.ci_low, c.ci_high, ta, s.alpha, s.min_effect, direction,
                    exact_zero=c.exact and c.diff == 0.0 and c.n >= 2,
                    acted=act["acted"] if act else None, inert_below=s.inert_below)
        vals = st.column(arm, metric)
        mean, std = mean_std(vals)
        diverged, failed = st.counts.get(arm, (0, 0))
        entry = {
            "arm": arm, "n": int((~np.isnan(vals)).sum()), "mean": mean, "std": std,
            "diff": c.diff, "ci_low": c.ci_low, "ci_high": c.ci_high, "test": c.test,
            "p_value": c.p_value, "p_adjusted": pa, "effect_size": c.effect_size,
            "tost_p": c.tost_p, "tost_p_adjusted": ta, "seed_correlation": c.correlation,
            "mde": mde(c.test, c.sd, c.n, s.alpha / k, n_base=c.n_base) if full else None,
            "diff_sd": c.sd if full else None,  # the test's sd: of paired differences, or pooled
            "seeds_needed": None, "more_seeds_needed": None,  # set by settle_waiting
            "robust_p": c.robust_p, "permutation_p": c.permutation_p,
            "prob_improvement": c.prob_improvement if direction == "higher"
            else 1 - c.prob_improvement,
            "runs_diverged": diverged, "runs_failed": failed, "verdict": v,
            "notes": c.notes + ([f"its trick is compared with {st.missing_against[arm]}, which "
                                 f"has no runs here: compared with {st.baseline}"]
                                if arm in st.missing_against else []),
            "against": st.against_of(arm),
            "variance": variance_entry(x, s.scope) if x is not None else None,
        }
        entries.append({key: clean(val) for key, val in entry.items()})
    return {"baseline": baseline_summary(st, metric), "arms": entries, "k": k}


def comparisons(st: Stratum, s: Settings, metric: str, full: bool,
                prompts: pd.DataFrame | None) -> tuple[list[Comparison], list]:
    """Each arm's comparison with the arm it is against, and its crossed test where there
    are per-prompt outcomes; under the task scope the crossed test decides."""
    comps = [st.compare(arm, st.against_of(arm), metric, s.min_effect, full) for arm in st.arms]
    tables: dict[str, pd.DataFrame] = {}  # each arm's seeds x prompts table, pivoted once
    crossed = [crossed_for(prompts, arm, st.against_of(arm), metric, s.min_effect, s.scope,
                           tables) if prompts is not None else None for arm in st.arms]
    if s.scope == "task":  # the prompt component in every test, CI and TOST
        comps = [with_crossed(c, x) for c, x in zip(comps, crossed, strict=True)]
    return comps, crossed


def crossed_for(prompts: pd.DataFrame, arm: str, other: str, metric: str, min_effect: float,
                scope: str, tables: dict | None = None) -> CrossedTest | None:
    """The seeds x prompts table of paired differences (arm - other) on the seeds both have
    and the prompts every one of those runs has, and its crossed test; None under 2 x 2."""
    if metric not in prompts.columns:
        return None

    tables = {} if tables is None else tables

    def table(name: str) -> pd.DataFrame:  # the baseline's is shared by every arm
        if name not in tables:
            rows = prompts[prompts["arm"] == name]
            tables[name] = rows.pivot_table(index="seed", columns="prompt", values=metric,
                                            aggfunc="mean")
        return tables[name]

    a, b = table(arm), table(other)
    seeds = a.index.intersection(b.index)
    ids = a.columns.union(b.columns)
    a, b = a.reindex(index=seeds, columns=ids), b.reindex(index=seeds, columns=ids)
    keep = a.notna().all(axis=0) & b.notna().all(axis=0)
    d = (a.loc[:, keep] - b.loc[:, keep]).to_numpy(float)
    if d.shape[0] < 2 or d.shape[1] < 2:
        return None
    # The same difference in every cell (up to rounding): no spread to test, and the seeds'
    # comparison already says so; the relative rule is the seed path's.
    if is_zero_spread(float(d.std()), a.loc[:, keep].to_numpy(float),
                      b.loc[:, keep].to_numpy(float)):
        return None
    return replace(crossed_test(d, min_effect, scope), dropped_prompts=int((~keep).sum()))


def with_crossed(c: Comparison, x: CrossedTest | None) -> Comparison:
    """The seed comparison with its test, CI and TOST taken from the crossed test (its
    robustness columns, which never decide, stay the seeds'). Unchanged without one, or
    when the table has no spread (an exact tie stays the seeds' exact verdict)."""
    if x is None or not x.se > 0:
        return c
    n = x.parts.seeds
    # The seeds' note on their own test (Welch on all runs when too few seeds are shared)
    # does not describe the crossed test, which pairs the seeds both arms have.
    notes = [note for note in c.notes if not note.endswith("Welch's t-test on all runs")]
    if c.test == "welch_t":
        notes.append(f"seeds not matched: the crossed test pairs the {n} seeds both arms have "
                     "(Welch's test on all runs is not used)")
    notes.append(f"seeds and {x.parts.prompts} held-out prompts as chance (Satterthwaite df "
                 f"{x.df:.1f}, and the paired t on per-seed means: the larger p)")
    if x.dropped_prompts:
        notes.append(f"{x.dropped_prompts} held-out prompt(s) left out of the crossed test: "
                     "missing from some run of the pair")
    # Not exact any more: per-seed means can tie while the prompts each arm solves differ.
    return replace(c, test="crossed_t", n=n, n_base=n, exact=False, diff=x.diff, ci_low=x.ci_low,
                   ci_high=x.ci_high, p_value=x.p_value, tost_p=x.tost_p,
                   sd=x.se * math.sqrt(n), effect_size=x.diff / (x.se * math.sqrt(n)),
                   notes=notes)


def variance_entry(x: CrossedTest, scope: str) -> dict:
    """An arm's variance decomposition, and the standard error under each scope."""
    v = x.parts
    return {"seed": v.seed, "prompt": v.prompt, "residual": v.residual, "seeds": v.seeds,
            "prompts": v.prompts, "se_prompts_scope": math.sqrt(v.ms_seed / (v.seeds * v.prompts)),
            "se_task_scope": standard_error(v, "task")[0], "prompt_share": clean(v.prompt_share()),
            "scope": scope, "dropped_prompts": x.dropped_prompts,
            "note": ("the seed component came out below zero (MS_seed < MS_residual) and is "
                     "set to 0, as REML sets it: the task-scope SE is then REML's, "
                     "MS_prompt / (S P), which the components shown add up to")
            if v.seed_truncated and v.prompt > 0 else None}


def baseline_summary(st: Stratum, metric: str) -> dict:
    values = st.column(st.baseline, metric)
    mean, std = mean_std(values)
    return {"n": int((~np.isnan(values)).sum()), "mean": mean, "std": std,
            "runs_failed": st.counts.get(st.baseline, (0, 0))[1]}


# ---------------------------------------------------------------------------- adaptive ladder
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


def apply_ladder(arms: list[dict], ladder: Ladder, pending: int | None, runs: int,
                 acts: dict[str, dict] | None = None, inert_below: float = 0.05) -> dict:
    """An adaptive sweep's verdicts are its looks' decisions (then the inert rule): the arm
    entries get them, and the stratum gets the plan and the runs saved against fixed n at
    the last rung."""
    acted = {a: act["acted"] for a, act in (acts or {}).items() if act}
    d = ladder.design
    for entry in arms:
        got = ladder.settled.get(entry["arm"])
        if entry["arm"] not in ladder.arms:
            entry["notes"].append("not in the adaptive plan: a fixed-n verdict")
            continue
        if got is None:
            entry["verdict"] = inert_rule("inconclusive", acted.get(entry["arm"]), inert_below)
            entry["adaptive"] = {"look": None, "seeds": None, "reason": "open",
                                 "next_seeds": d.rungs[pending] if pending is not None else None}
            continue
        entry["verdict"] = inert_rule(got.verdict, acted.get(entry["arm"]), inert_below)
        entry["adaptive"] = {k: clean(v) for k, v in asdict(got).items()}
    fixed = (len(ladder.arms) + 1) * d.rungs[-1]
    return {"design": asdict(d), "plan": d.table(len(ladder.arms)), "looks_done": ladder.looks_done,
            "pending_look": pending + 1 if pending is not None else None,
            "runs_used": runs, "runs_fixed_n": fixed, "runs_saved": 1 - runs / fixed}


def settle_waiting(arms: list[dict], s: Settings, comparisons: int,
                   design: Design | None, st: Stratum | None = None) -> None:
    """Each arm's `waiting_on` (None when decided) and the seeds it names: the one answer the
    table, report.json and the recipe give (stats/waiting.py); priced from `st`'s records."""
    for entry in arms:
        # Priced only where there is a prompts route to weigh: an open arm under the task scope.
        priced = st is not None and entry.get("variance") and entry["verdict"] not in DECIDED
        costs = run_costs(st, entry["arm"], entry["variance"]) if priced else None
        w = waiting_on(entry, s.min_effect, s.alpha, comparisons,
                       design if entry.get("adaptive") else None, costs)
        entry["waiting_on"] = w
        entry["seeds_needed"] = w["seeds"] if w else None
        entry["more_seeds_needed"] = w["more_seeds"] if w else None


def run_costs(st: Stratum, arm: str, variance: dict | None) -> RunCosts | None:
    """An arm's and its baseline's mean run wall seconds, one held-out prompt's share of a
    run's evaluation seconds (where the runs have per-prompt outcomes), and the fewest
    held-out prompts their task's data holds (where the records say)."""
    sub = st.sub[st.sub["arm"].isin([arm, st.against_of(arm)])
                 & (st.sub["status"].to_numpy() != "failed")]
    if "wall_seconds" not in sub or not sub["wall_seconds"].notna().any():
        return None
    per_prompt = None
    if variance and "budget/eval_seconds" in sub and sub["budget/eval_seconds"].notna().any():
        per_prompt = float(sub["budget/eval_seconds"].mean()) / variance["prompts"]
    pool = sub["prompt_pool"].min() if "prompt_pool" in sub else math.nan
    return RunCosts(float(sub["wall_seconds"].mean()), per_prompt,
                    int(pool) if pd.notna(pool) else None)


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
    direction = s.metric_direction
    numeric = set(metric_columns(df))
    out = {"metric": s.metric, "direction": direction, "alpha": s.alpha,
           "correction": s.correction, "baseline": s.baseline, "min_effect": s.min_effect,
           "inert_below": s.inert_below, "scope": s.scope, "strata": [],
           "strata_without_baseline": []}
    for (model, task), sub in df.groupby(["model", "task"], sort=True):
        if s.baseline not in set(sub["arm"]):
            out["strata_without_baseline"].append(
                {"model": model, "task": task, "arms": sorted(set(sub["arm"])), "runs": len(sub)})
            continue
        _check_one_recipe(sub, s.baseline, model, task)
        mine = None if prompts is None else \
            prompts[(prompts["model"] == model) & (prompts["task"] == task)]
        out["strata"].append(analyse_stratum(sub, s, model, task, numeric, secondary or [],
                                             mine if mine is not None and len(mine) else None))
    out["sign_flips"] = sign_flips(out["strata"])
    return out


def side_metrics(st: Stratum, s: Settings, metrics, prefix: str = "") -> dict:
    """The secondary or stability metrics' arm entries (no ladder, their own correction)."""
    return {m: analyse_metric(st, s, prefix + m, s.secondary_correction, default_direction(m),
                              full=False)["arms"]
            for m in metrics if prefix + m in st.tables and st.sub[prefix + m].notna().any()}


def analyse_stratum(sub: pd.DataFrame, s: Settings, model: str, task: str, numeric: set[str],
                    secondary: list[str], prompts: pd.DataFrame | None = None) -> dict:
    """One (model, task) stratum: the primary metric's verdicts (an adaptive sweep's from
    its looks), the secondary and stability metrics, and what sits beside the verdicts."""
    direction = s.metric_direction
    wanted = [s.metric, f"raw/{s.metric}", *secondary,
              *(f"stability/{m}" for m in STABILITY_METRICS), "stability/checkpoint_regret_raw"]
    st = Stratum(sub, s.baseline, [m for m in dict.fromkeys(wanted) if m in numeric])
    acts = activity(st)
    adaptive_plan = s.sequential is not None and s.sequential.metric == s.metric
    # An adaptive sweep's looks use the scope its plan declared, whatever the report asks.
    scoped = replace(s, scope=s.sequential.scope) if adaptive_plan else s
    primary = analyse_metric(st, scoped, s.metric, s.correction, direction, acts=acts,
                             prompts=prompts)
    if primary["baseline"]["n"] < 2:
        raise SettingError(
            "baseline", s.baseline, f"{primary['baseline']['n']} usable run(s) for "
            f"{model}/{task}; allowed: at least 2 seeds, which every test needs")
    adaptive = None
    if adaptive_plan:
        ladder, pending = replay_ladder(st, s.sequential, direction, prompts)
        adaptive = apply_ladder(primary["arms"], ladder, pending, runs=len(sub),
                                acts=acts, inert_below=s.inert_below)
    note_activity(primary["arms"], acts, s.inert_below)
    settle_waiting(primary["arms"], s, primary["k"], s.sequential if adaptive else None, st)
    stratum = {"model": model, "task": task, "baseline": primary["baseline"],
               "arms": primary["arms"], "comparisons": primary["k"],
               "scope": scope_in_force(scoped.scope, primary["arms"], prompts is not None)}
    if adaptive:
        stratum["adaptive"] = adaptive
    stratum["secondary"] = side_metrics(st, s, [m for m in secondary if m != s.metric])
    stratum["stability"] = side_metrics(st, s, STABILITY_METRICS, prefix="stability/")
    return {**stratum, **beside_verdicts(st, s, primary["arms"])}


def scope_in_force(scope: str, arms: list[dict], have_prompts: bool) -> str:
    """What the stratum's verdicts generalise to: `task` (seeds and prompts as chance),
    `prompts` (these held-out prompts, as asked, or as an adaptive plan declared), or
    `prompts (no per-prompt outcomes)`, or `prompts (no spread to split)` where the runs
    carry them but no arm's difference has a spread (each the same on every seed and
    prompt, or too few of them)."""
    if scope == "prompts":
        return "prompts"
    if have_prompts and any(a.get("variance") for a in arms):
        return "task"
    return "prompts (no spread to split)" if have_prompts else "prompts (no per-prompt outcomes)"


def beside_verdicts(st: Stratum, s: Settings, arms: list[dict]) -> dict:
    """What a stratum's report shows beside its verdicts (stats/accounting.py)."""
    sub = st.sub
    return {
        "budget": budget(st),
        "ema_vs_raw": ema_vs_raw(st, s.metric, s.min_effect),
        "single_run_illusion": single_run_illusion(st, arms, s.metric, s.min_effect,
                                                   s.metric_direction),
        "recipe": recipe(arms),
        "failures": [{k: clean(r.get(k)) for k in ("arm", "seed", "status", "error", "run_id")}
                     for r in sub[sub["status"] != "completed"].to_dict("records")],
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


def sign_flips(strata: list[dict]) -> list[str]:
    """Tricks whose significant effects have opposite signs in different strata."""
    signs: dict[str, set[str]] = {}
    for st in strata:
        for a in st["arms"]:
            if a["verdict"] in ("improves", "harms"):
                signs.setdefault(a["arm"], set()).add(a["verdict"])
    return sorted(arm for arm, s in signs.items() if len(s) > 1)
