"""One stratum, one metric: every arm against the arm it is compared with (the seeds'
test, or under the task scope the crossed test of seeds x held-out prompts), corrected for
multiple comparisons, each arm's fixed-n verdict as an `ArmResult`."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from grpo_ablate.stats.arm_result import ArmResult
from grpo_ablate.stats.correct import adjust
from grpo_ablate.stats.crossed import CrossedTest, crossed_test, standard_error
from grpo_ablate.stats.independent import independent_crossed
from grpo_ablate.stats.significance import Comparison, is_zero_spread, mde
from grpo_ablate.stats.stratum import Stratum, clean, mean_std
from grpo_ablate.stats.verdicts import Settings, equivalence_gap, margin_for, verdict


@dataclass(frozen=True)
class MetricTable:
    """The baseline's summary, one result per arm, and the number of comparisons (k)."""

    baseline: dict
    arms: tuple[ArmResult, ...]
    k: int


def analyse_metric(st: Stratum, s: Settings, metric: str, correction: str, direction: str,
                   full: bool = True, acts: dict[str, dict] | None = None,
                   prompts: pd.DataFrame | None = None) -> MetricTable:
    """One stratum, one metric: baseline summary and one result per arm. `full` adds the
    robustness columns and power (the primary metric); secondary metrics skip them. `acts`:
    each arm's trick activity (the primary metric's verdicts apply the inert rule)."""
    s = resolved(s, st, metric)
    comps, crossed = comparisons(st, s, metric, full, prompts)
    k = max(1, sum(not math.isnan(c.p_value) for c in comps))
    p_adj = adjust([c.p_value for c in comps], correction)
    tost_adj = adjust([c.tost_p for c in comps], correction)
    results = []
    for arm, c, pa, ta, x in zip(st.arms, comps, p_adj, tost_adj, crossed, strict=True):
        act = (acts or {}).get(arm)
        arm_mde = mde(c.test, c.sd, c.n, s.alpha / k, n_base=c.n_base) if full else None
        exact = c.exact and c.diff == 0.0 and c.n >= 2
        v = verdict(pa, c.ci_low, c.ci_high, ta, s.alpha, s.min_effect, direction,
                    exact_zero=exact, acted=act["acted"] if act else None,
                    inert_below=s.inert_below, mde=arm_mde)
        gap = None if exact or not ta < s.alpha else \
            equivalence_gap(c.ci_low, c.ci_high, s.min_effect, arm_mde)
        against = st.against_of(arm)
        ci_low, ci_high, decided = c.ci_low, c.ci_high, decided_by_test(c, correction)
        if exact:  # the rule's comparison: the same value on every seed, no test needed
            ci_low = ci_high = 0.0
            arm_mde = 0.0 if full else None
            decided = {"rule": "identical", "text": f"identical to {against} on all {c.n} "
                       "seeds (no test needed)"}
        elif c.exact:
            decided = {"rule": "untested", "text": f"the same difference on all {c.n} seeds: "
                       "zero variance, not tested"}
        vals = st.column(arm, metric)
        mean, std = mean_std(vals)
        diverged, failed = st.counts.get(arm, (0, 0))
        entry = {
            "arm": arm, "n": int((~np.isnan(vals)).sum()), "mean": mean, "std": std,
            "diff": c.diff, "ci_low": ci_low, "ci_high": ci_high, "test": c.test,
            "p_value": c.p_value, "p_adjusted": pa, "effect_size": c.effect_size,
            "tost_p": c.tost_p, "tost_p_adjusted": ta, "seed_correlation": c.correlation,
            "mde": arm_mde,
            "diff_sd": c.sd if full else None,  # the test's sd: of paired differences, or pooled
            "seeds_needed": None, "more_seeds_needed": None,  # waiting.with_waiting's
            "robust_p": c.robust_p, "permutation_p": c.permutation_p,
            "prob_improvement": c.prob_improvement if direction == "higher"
            else 1 - c.prob_improvement,
            "runs_diverged": diverged, "runs_failed": failed, "verdict": v,
            "notes": c.notes + notes_of(st, arm, ta, gap if v in ("inconclusive", "inert")
                                        else None),
            "against": against,
            "variance": variance_entry(x, s.scope) if x is not None else None,
            "decided_by": decided,
        }
        cleaned = {key: clean(val) for key, val in entry.items()}
        results.append(ArmResult(**{**cleaned, "notes": tuple(cleaned["notes"])}))
    return MetricTable(baseline_summary(st, metric), tuple(results), k)


TESTS = {"paired_t": "paired t", "welch_t": "Welch's t", "overlap_t": "partially overlapping t",
         "crossed_t": "seeds x prompts t", "crossed_welch": "runs x prompts Welch t"}


def decided_by_test(c: Comparison, correction: str) -> dict:
    """A fixed-n row's rule: its test on the n runs shown, corrected over the arms."""
    name = TESTS.get(c.test, c.test)
    return {"rule": "test", "text": f"{name} on {c.n} seeds, {correction.upper()}-adjusted"}


def notes_of(st: Stratum, arm: str, tost_adjusted: float, gap: str | None) -> list[str]:
    """An arm's notes beside its comparison's: why TOST alone did not make it no effect,
    and a comparison arm that has no runs."""
    out = [f"TOST shows equivalence (p adj {tost_adjusted:.3g}), but {gap}: not called no "
           "effect"] if gap else []
    if arm in st.missing_against:
        out.append(f"its trick is compared with {st.missing_against[arm]}, which has no runs "
                   f"here: compared with {st.baseline}")
    return out


def resolved(s: Settings, st: Stratum, metric: str) -> Settings:
    """The settings with the margin in `metric`'s units for this stratum (margin_for): a
    relative `--min-effect` (5%, 0.2sd) is read off the baseline's runs of that metric."""
    if s.min_effect_of is None:
        return s
    mean, sd = mean_std(st.column(st.baseline, metric))
    return replace(s, min_effect=margin_for(s, mean, sd), min_effect_of=None)


def comparisons(st: Stratum, s: Settings, metric: str, full: bool,
                prompts: pd.DataFrame | None) -> tuple[list[Comparison], list]:
    """Each arm's comparison with the arm it is against, and its crossed test where there
    are per-prompt outcomes; under the task scope the crossed test decides."""
    comps = [st.compare(arm, st.against_of(arm), metric, s.min_effect, full) for arm in st.arms]
    tables: dict[str, pd.DataFrame] = {}  # each arm's seeds x prompts table, pivoted once
    crossed = [crossed_for(prompts, arm, st.against_of(arm), metric, s.min_effect, s.scope,
                           tables, s.runs) if prompts is not None else None for arm in st.arms]
    if s.scope == "task":  # the prompt component in every test, CI and TOST
        comps = [with_crossed(c, x, s.runs) for c, x in zip(comps, crossed, strict=True)]
    return comps, crossed


def crossed_for(prompts: pd.DataFrame, arm: str, other: str, metric: str, min_effect: float,
                scope: str, tables: dict | None = None, runs: str = "matched"
                ) -> CrossedTest | None:
    """The seeds x prompts table of paired differences (arm - other) on the seeds both have
    and the prompts every one of those runs has, and its crossed test; None under 2 x 2.
    Independent runs: each arm's runs x prompts table, every run, on the prompts all of
    them have, and the crossed model without a seed effect (stats/independent.py)."""
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
    if runs == "independent":
        ids = a.columns.intersection(b.columns)
        keep = a.reindex(columns=ids).notna().all(axis=0) & b.reindex(columns=ids).notna().all(axis=0)
        ta, tb = a.loc[:, ids[keep]].to_numpy(float), b.loc[:, ids[keep]].to_numpy(float)
        if min(len(ta), len(tb)) < 2 or ta.shape[1] < 2:
            return None
        dropped = len(a.columns.union(b.columns)) - int(keep.sum())
        return replace(independent_crossed(ta, tb, min_effect, scope), dropped_prompts=dropped)
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


def with_crossed(c: Comparison, x: CrossedTest | None, runs: str = "matched") -> Comparison:
    """The seed comparison with its test, CI and TOST taken from the crossed test (its
    robustness columns, which never decide, stay the seeds'). Unchanged without one, or
    when the table has no spread (an exact tie stays the seeds' exact verdict)."""
    if x is None or not x.se > 0:
        return c
    n = x.parts.seeds
    if runs == "independent":
        notes = [*c.notes, f"every run, the prompts shared: the crossed model without a seed "
                 f"effect ({x.parts.prompts} prompts; Welch df, at most P - 1)"]
        if x.dropped_prompts:
            notes.append(f"{x.dropped_prompts} held-out prompt(s) left out: missing from some "
                         "run of the pair (a seed x prompt cell without an outcome)")
        return replace(c, test="crossed_welch", n=n, n_base=n, exact=False, diff=x.diff, ci_low=x.ci_low,
                       ci_high=x.ci_high, p_value=x.p_value, tost_p=x.tost_p,
                       sd=x.se * math.sqrt(n), effect_size=c.effect_size, notes=notes)
    # The seeds' note on their own test (Welch on all runs when too few seeds are shared)
    # does not describe the crossed test, which pairs the seeds both arms have.
    notes = [note for note in c.notes if not note.endswith("Welch's t-test on all runs")
             and "partially overlapping samples t-test" not in note]
    if c.test in ("welch_t", "overlap_t"):
        notes.append(f"seeds not all matched: the crossed test pairs the {n} seeds both arms "
                     "have (the seeds' test on all runs is not used)")
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
