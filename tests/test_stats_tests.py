"""The statistics against independent computations (scipy directly, statsmodels)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from grpo_ablate.stats.correct import bh_adjust, holm_adjust
from grpo_ablate.stats.decide import Settings, analyse
from grpo_ablate.stats.significance import first_n, mde, paired_compare, power, welch_compare
from grpo_ablate.stats.verdicts import verdict

P = [0.001, 0.04, 0.03, 0.2, 0.012, 0.5, 0.049]


def test_holm_matches_statsmodels():
    assert np.allclose(holm_adjust(P), multipletests(P, method="holm")[1])


def test_bh_matches_statsmodels():
    assert np.allclose(bh_adjust(P), multipletests(P, method="fdr_bh")[1])


def test_nan_pvalues_are_not_hypotheses():
    out = holm_adjust([0.01, math.nan, 0.04])
    assert math.isnan(out[1])
    assert np.allclose([out[0], out[2]], multipletests([0.01, 0.04], method="holm")[1])


A = np.array([0.71, 0.74, 0.69, 0.80, 0.77])
B = np.array([0.65, 0.70, 0.70, 0.72, 0.70])


def test_paired_matches_scipy():
    c = paired_compare(A, B, min_effect=0.01)
    ref = stats.ttest_rel(A, B)
    ci = ref.confidence_interval(0.95)
    assert c.test == "paired_t"
    assert math.isclose(c.p_value, ref.pvalue) and math.isclose(c.ci_low, ci.low)
    assert math.isclose(c.ci_high, ci.high)
    d = A - B
    assert math.isclose(c.effect_size, d.mean() / d.std(ddof=1))
    assert math.isclose(c.robust_p, stats.wilcoxon(d).pvalue)


def test_welch_matches_scipy():
    c = welch_compare(A, B[:4], min_effect=0.01)
    ref = stats.ttest_ind(A, B[:4], equal_var=False)
    assert math.isclose(c.p_value, ref.pvalue)
    assert math.isclose(c.ci_low, ref.confidence_interval(0.95).low)


def test_tost_matches_statsmodels():
    from statsmodels.stats.weightstats import ttost_paired

    c = paired_compare(A, B, min_effect=0.1)
    p, _, _ = ttost_paired(A, B, -0.1, 0.1)
    assert math.isclose(c.tost_p, p, rel_tol=1e-9)


def test_mde_and_first_n_seeds_match_statsmodels_power():
    sd, n, alpha = 0.03, 5, 0.05
    d = TTestPower().solve_power(nobs=n, alpha=alpha, power=0.8)
    assert math.isclose(mde("paired_t", sd, n, alpha), d * sd, rel_tol=1e-4)
    need = first_n(lambda k: power("paired_t", 0.02, sd, k, alpha), 2)
    assert TTestPower().power(0.02 / sd, need, alpha) >= 0.8 > TTestPower().power(0.02 / sd, need - 1, alpha)


def test_degenerate_cases_give_notes_not_numbers():
    zero = paired_compare(np.array([0.5, 0.6, 0.7]), np.array([0.4, 0.5, 0.6]), 0.01)
    assert math.isnan(zero.p_value) and "zero variance" in zero.notes[0]
    one = paired_compare(np.array([0.5]), np.array([0.4]), 0.01)
    assert math.isnan(one.p_value) and "fewer than 2" in one.notes[0]


@pytest.mark.parametrize("p,lo,hi,tost,expected", [
    (0.01, 0.02, 0.08, 0.9, "improves"), (0.01, -0.08, -0.02, 0.9, "harms"),
    (0.01, 0.002, 0.008, 0.01, "negligible"), (0.4, -0.005, 0.006, 0.01, "no_effect"),
    (0.4, -0.05, 0.06, 0.3, "inconclusive"), (math.nan, math.nan, math.nan, math.nan, "inconclusive"),
])
def test_verdict_rules(p, lo, hi, tost, expected):
    assert verdict(p, lo, hi, tost, 0.05, 0.01) == expected


def table(effects, seeds=5, noise=0.04, seed=0):
    rng = np.random.default_rng(seed)
    seed_effect = rng.normal(0, noise, seeds)  # matched seeds share this
    rows = []
    for arm, eff in effects.items():
        for s in range(seeds):
            rows.append({"arm": arm, "seed": s, "model": "m", "task": "t", "status": "completed",
                         "eval/accuracy": 0.6 + eff + seed_effect[s] + rng.normal(0, 0.005)})
    return pd.DataFrame(rows)


def test_analyse_finds_planted_effects_and_equivalence():
    df = table({"baseline": 0, "good": 0.05, "bad": -0.05, "same": 0.0})
    rep = analyse(df, Settings(min_effect=0.02))
    arms = {a["arm"]: a for a in rep["strata"][0]["arms"]}
    assert arms["good"]["verdict"] == "improves" and arms["bad"]["verdict"] == "harms"
    assert arms["same"]["verdict"] == "no_effect"
    assert all(a["test"] == "paired_t" for a in arms.values())
    assert rep["strata"][0]["recipe"]["keep"] == ["good"]


def test_one_shared_seed_falls_back_to_welch_with_a_note():
    df = table({"baseline": 0, "x": 0.01}, seeds=4)
    df.loc[df["arm"] == "x", "seed"] += 3  # arm seeds 3-6, baseline 0-3: 1 shared
    rep = analyse(df, Settings())
    arm = rep["strata"][0]["arms"][0]
    assert arm["test"] == "welch_t" and "baseline only: [0, 1, 2]" in arm["notes"][0]
    a = df[df["arm"] == "x"]["eval/accuracy"].to_numpy()
    b = df[df["arm"] == "baseline"]["eval/accuracy"].to_numpy()
    assert math.isclose(arm["p_value"], stats.ttest_ind(a, b, equal_var=False).pvalue)


def test_failed_runs_are_counted_not_used_and_diverged_are_used():
    df = table({"baseline": 0, "x": 0.0})
    df.loc[(df["arm"] == "x") & (df["seed"] == 0), "status"] = "failed"
    df.loc[(df["arm"] == "x") & (df["seed"] == 1), "status"] = "diverged"
    rep = analyse(df, Settings())
    arm = rep["strata"][0]["arms"][0]
    assert arm["runs_failed"] == 1 and arm["runs_diverged"] == 1 and arm["n"] == 4
    assert {f["status"] for f in rep["strata"][0]["failures"]} == {"failed", "diverged"}


def test_single_run_illusion_counts_unconfirmed_improvements():
    df = table({"baseline": 0, "noise": 0.0}, noise=0.0, seeds=6, seed=3)
    df.loc[df["arm"] == "noise", "eval/accuracy"] += np.array([0.03, -0.03, 0.03, -0.03, 0.03, -0.03])
    rep = analyse(df, Settings())
    il = rep["strata"][0]["single_run_illusion"]
    assert il["single_run_improves"] == 3 and il["unconfirmed_improves"] == 3
    assert il["unconfirmed_fraction"] == 1.0


def test_sign_flips_across_strata():
    a = table({"baseline": 0, "x": 0.05})
    b = table({"baseline": 0, "x": -0.05}, seed=1)
    b["task"] = "other"
    rep = analyse(pd.concat([a, b]), Settings())
    assert rep["sign_flips"] == ["x"]
