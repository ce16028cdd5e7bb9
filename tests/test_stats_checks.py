"""The statistics stage against an independent check's cases: each numbered case of the
issue that found them, through the real `grpo-ablate report` on a CSV, compared with
scipy / statsmodels / numerical integration computed here."""

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats
from statsmodels.stats.power import TTestIndPower, TTestPower

from grpo_ablate import cli
from grpo_ablate.results.table import load_results
from grpo_ablate.stats.decide import Settings, analyse
from grpo_ablate.stats.significance import first_n, mde, paired_power, power, welch_power
from grpo_ablate.stats.verdicts import default_direction


def write_csv(tmp_path, rows, columns=None, name="r.csv"):
    path = tmp_path / name
    pd.DataFrame(rows, columns=columns).to_csv(path, index=False)
    return path


# These CSVs are of matched runs whose arms are tricks: said as a user of such a CSV says it
# (a CSV's own default is independent runs of methods: tests/test_results_csv_design.py).
MATCHED_TRICKS = ("--runs", "matched", "--arms", "tricks")


def report(tmp_path, csv, *flags):
    out = tmp_path / "out"
    said = [f for f in MATCHED_TRICKS[::2] if f not in flags]
    given = [x for f in said for x in MATCHED_TRICKS[MATCHED_TRICKS.index(f):][:2]]
    code = cli.main(["report", str(csv), "--out", str(out), *given, *flags])
    rep = json.loads((out / "report.json").read_text()) if code == 0 else None
    return code, rep, out


def bad(capsys, tmp_path, csv, *flags):
    code, _, out = report(tmp_path, csv, *flags)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert not out.exists()
    return lines[0]


def arms_of(rep):
    return {a["arm"]: a for a in rep["strata"][0]["arms"]}


BASE = [0.61, 0.57, 0.66, 0.59, 0.63, 0.60]


# 1 -----------------------------------------------------------------------------------
def independent_power(nc: float, df: int, alpha: float) -> float:
    """P(|T| > crit) by integrating over the chi-square variable: T = (Z + nc) / sqrt(V/df)."""
    crit = stats.t.ppf(1 - alpha / 2, df)

    def given_v(v):
        s = crit * math.sqrt(v / df)
        return (stats.norm.sf(s - nc) + stats.norm.cdf(-s - nc)) * stats.chi2.pdf(v, df)

    return integrate.quad(given_v, 0, np.inf, limit=200)[0]


@pytest.mark.parametrize("ratio", [0.2, 0.5, 1, 2, 5, 10, 10.1, 20, 35, 50])
@pytest.mark.parametrize("n", [2, 3, 4, 6, 10])
def test_power_is_finite_and_right_for_large_effect_to_sd_ratios(ratio, n):
    ours = paired_power(ratio, 1.0, n, 0.05)
    ref = TTestPower().power(ratio, n, 0.05)
    exact = independent_power(ratio * math.sqrt(n), n - 1, 0.05)
    assert math.isfinite(ours)
    assert math.isclose(ours, exact, abs_tol=1e-6)
    if math.isfinite(ref):  # statsmodels itself returns NaN far in the tail
        assert math.isclose(ours, ref, abs_tol=1e-6)


# 2 -----------------------------------------------------------------------------------
def test_a_decimal_shift_is_an_exact_shift_not_p_1e_minus_105(tmp_path):
    rows = [("baseline", s, v) for s, v in enumerate(BASE)]
    rows += [("x", s, v + 0.03) for s, v in enumerate(BASE)]
    _, rep, _ = report(tmp_path, write_csv(tmp_path, rows, ["arm", "seed", "eval/accuracy"]),
                       "--no-figures")
    x = arms_of(rep)["x"]
    assert x["p_value"] is None and x["effect_size"] is None
    assert x["verdict"] == "inconclusive"
    assert any("the same difference (+0.03) on every matched seed" in n for n in x["notes"])


def test_an_arm_identical_to_the_baseline_is_no_effect_exactly(tmp_path):
    rows = [(arm, s, v) for arm in ("baseline", "same") for s, v in enumerate(BASE)]
    _, rep, _ = report(tmp_path, write_csv(tmp_path, rows, ["arm", "seed", "eval/accuracy"]),
                       "--no-figures")
    same = arms_of(rep)["same"]
    assert same["verdict"] == "no_effect" and same["diff"] == 0.0
    assert "identical to the baseline on every matched seed" in same["notes"]


# 3 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("n, n_base, effect", [(3, 3, 1.2), (5, 8, 0.8), (10, 30, 0.8),
                                                (30, 10, 0.8), (2, 4, 3.0)])
def test_welch_power_is_the_rate_at_which_scipys_welch_test_rejects(n, n_base, effect):
    """Welch's power against scipy's Welch t-test on 40,000 planted normal draws: within 3
    Monte Carlo SE (the pooled t's power, TTestIndPower, misses by up to 0.05 here)."""
    rng = np.random.default_rng(n * 100 + n_base)
    draws = 40_000
    a, b = rng.normal(effect, 1.0, (draws, n)), rng.normal(0.0, 1.0, (draws, n_base))
    rate = float((stats.ttest_ind(a, b, axis=1, equal_var=False).pvalue < 0.05).mean())
    ours = welch_power(effect, 1.0, n, 0.05, n_base=n_base)
    assert abs(ours - rate) < 3 * math.sqrt(rate * (1 - rate) / draws)


def test_welch_power_meets_the_pooled_t_where_the_df_are_many():
    for n, n_base in ((60, 60), (80, 120)):
        ref = TTestIndPower().power(0.4, nobs1=n, ratio=n_base / n, alpha=0.05)
        assert math.isclose(welch_power(0.4, 1.0, n, 0.05, n_base=n_base), ref, abs_tol=2e-3)


def test_mde_of_unbalanced_welch_uses_both_sizes():
    both = mde("welch_t", 1.0, 5, 0.05, n_base=8)
    assert not math.isclose(both, mde("welch_t", 1.0, 5, 0.05), rel_tol=1e-3)
    assert math.isclose(welch_power(both, 1.0, 5, 0.05, n_base=8), 0.8, rel_tol=1e-6)


# 4 -----------------------------------------------------------------------------------
def test_exact_duplicate_rows_are_dropped_with_a_note(tmp_path, capsys):
    rows = [(arm, s, v + (0.05 if arm == "x" else 0) + 0.01 * (s % 2))
            for arm in ("baseline", "x") for s, v in enumerate(BASE)]
    rows.append(rows[-1])
    code, rep, out = report(tmp_path, write_csv(tmp_path, rows, ["arm", "seed", "eval/accuracy"]))
    assert code == 0 and (out / "figures" / "forest.png").is_file()
    assert arms_of(rep)["x"]["test"] == "paired_t" and arms_of(rep)["x"]["n"] == 6
    assert any("1 exact duplicate run(s) dropped" in w for w in rep["warnings"])
    assert "exact duplicate" in capsys.readouterr().err


def test_conflicting_duplicate_rows_are_refused(tmp_path, capsys):
    rows = [(arm, s, v) for arm in ("baseline", "x") for s, v in enumerate(BASE)]
    rows.append(("x", 2, 0.99))
    line = bad(capsys, tmp_path, write_csv(tmp_path, rows, ["arm", "seed", "eval/accuracy"]))
    assert "duplicate runs with different results: arm=x seed=2" in line


# 5 -----------------------------------------------------------------------------------
def test_an_inf_cell_is_missing_with_a_note_and_no_warnings(tmp_path):
    path = tmp_path / "inf.csv"
    lines = ["arm,seed,eval/accuracy"] + [f"baseline,{s},{v}" for s, v in enumerate(BASE)]
    lines += [f"x,{s},{v + 0.04 + 0.01 * (s % 3)}" for s, v in enumerate(BASE[:5])] + ["x,5,inf"]
    path.write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, rep, _ = report(tmp_path, path, "--no-figures")
    x = arms_of(rep)["x"]
    assert x["n"] == 5 and x["diff"] is not None and x["p_value"] is not None
    assert any("missing or non-finite for seeds [5]" in n for n in x["notes"])


# 6 -----------------------------------------------------------------------------------
def test_a_non_numeric_metric_is_one_line(tmp_path, capsys):
    rows = [(arm, s, "m1", v) for arm in ("baseline", "x") for s, v in enumerate(BASE)]
    rows[3] = ("baseline", 3, "m1", "error")
    csv = write_csv(tmp_path, rows, ["arm", "seed", "model", "eval/accuracy"])
    line = bad(capsys, tmp_path, csv)
    assert "--metric eval/accuracy: the column is not numeric (holds 'error')" in line
    line = bad(capsys, tmp_path, csv, "--metric", "model")
    assert "--metric model: no run has it" in line or "not numeric" in line


# 7, 8 --------------------------------------------------------------------------------
def test_status_spelling_is_normalised_and_blank_means_completed(tmp_path):
    rows = [("baseline", s, "completed", v) for s, v in enumerate(BASE)]
    rows += [("x", s, st, v + 0.04) for s, (st, v) in
             enumerate(zip(["FAILED", "Failed", "", " Completed ", "diverged", ""], BASE, strict=True))]
    _, rep, _ = report(tmp_path, write_csv(tmp_path, rows, ["arm", "seed", "status", "eval/accuracy"]),
                       "--no-figures")
    x = arms_of(rep)["x"]
    assert x["runs_failed"] == 2 and x["n"] == 4 and x["runs_diverged"] == 1
    assert sorted((f["seed"], f["status"]) for f in rep["strata"][0]["failures"]) == \
        [(0, "failed"), (1, "failed"), (4, "diverged")]


def test_an_unknown_status_is_one_line(tmp_path, capsys):
    rows = [("baseline", s, "completed", v) for s, v in enumerate(BASE)]
    rows += [("x", 0, "crashed", 0.5), ("x", 1, "completed", 0.6)]
    line = bad(capsys, tmp_path, write_csv(tmp_path, rows, ["arm", "seed", "status", "eval/accuracy"]))
    assert "status 'crashed' unknown; allowed: completed, diverged, failed" in line


# 9, 11 -------------------------------------------------------------------------------
@pytest.mark.parametrize("column", ["task", "model", "arm"])
def test_an_empty_identity_cell_is_one_line(tmp_path, capsys, column):
    rows = [{"arm": arm, "seed": s, "model": "m", "task": "t", "eval/accuracy": v}
            for arm in ("baseline", "x") for s, v in enumerate(BASE)]
    rows[7][column] = ""
    line = bad(capsys, tmp_path, write_csv(tmp_path, rows))
    assert f"empty {column} cell in row(s) 9" in line


# 10 ----------------------------------------------------------------------------------
def test_a_stratum_without_baseline_is_named(tmp_path):
    rows = [{"arm": arm, "seed": s, "task": "math", "eval/accuracy": v}
            for arm in ("baseline", "x") for s, v in enumerate(BASE)]
    rows += [{"arm": "x", "seed": s, "task": "code", "eval/accuracy": v} for s, v in enumerate(BASE)]
    _, rep, out = report(tmp_path, write_csv(tmp_path, rows), "--no-figures")
    assert [s["task"] for s in rep["strata"]] == ["math"]
    assert rep["strata_without_baseline"] == [{"model": "-", "task": "code", "arms": ["x"], "runs": 6}]
    assert "-/code: 6 runs of x; no `baseline` runs" in (out / "report.md").read_text()


# 12 ----------------------------------------------------------------------------------
def test_unknown_metric_lists_plain_metric_names(tmp_path, capsys):
    rows = [(arm, s, v) for arm in ("baseline", "x") for s, v in enumerate(BASE)]
    line = bad(capsys, tmp_path, write_csv(tmp_path, rows, ["arm", "seed", "accuracy"]))
    assert "--metric eval/accuracy: no run has it; available: accuracy" in line


# 13 ----------------------------------------------------------------------------------
def test_lower_is_better_metrics_flip_the_verdict(tmp_path):
    rows = [(arm, s, v - (0.2 + 0.005 * (s % 3) if arm == "x" else 0))
            for arm in ("baseline", "x") for s, v in enumerate(BASE)]
    csv = write_csv(tmp_path, rows, ["arm", "seed", "eval/loss"])
    _, rep, out = report(tmp_path, csv, "--metric", "eval/loss")
    assert rep["direction"] == "lower" and arms_of(rep)["x"]["verdict"] == "improves"
    assert "(lower is better)" in (out / "report.md").read_text()
    assert rep["strata"][0]["recipe"]["keep"] == ["x"]
    _, rep, _ = report(tmp_path, csv, "--metric", "eval/loss", "--direction", "higher")
    assert arms_of(rep)["x"]["verdict"] == "harms"
    assert default_direction("stability/kl_max") == "lower"
    assert default_direction("entropy_ratio_final") == "higher"


def test_stability_does_not_call_a_lower_kl_harms():
    lower = {"baseline": 0.0, "x": 0.3}
    rows = [{"arm": arm, "seed": s, "model": "m", "task": "t", "status": "completed",
             "eval/accuracy": v,
             "stability/kl_max": 0.5 + 0.1 * v - lower[arm] - (0.01 * (s % 3) if arm == "x" else 0)}
            for arm in ("baseline", "x") for s, v in enumerate(BASE)]
    rep = analyse(pd.DataFrame(rows), Settings())
    assert rep["strata"][0]["stability"]["kl_max"][0]["verdict"] == "improves"


# partial pairing ---------------------------------------------------------------------
def t_new2(a: dict, b: dict) -> tuple[float, float]:
    """(difference, p) of Derrick, Toher and White's (2017) partially overlapping samples
    t-test, T_new2, written from the paper: a and b map seed -> value, shared seeds paired."""
    xa, xb = np.array(list(a.values())), np.array(list(b.values()))
    common = sorted(set(a) & set(b))
    n1, n2, nc = len(xa), len(xb), len(common)
    s1, s2 = xa.std(ddof=1), xb.std(ddof=1)
    r = np.corrcoef([a[k] for k in common], [b[k] for k in common])[0, 1]
    se = math.sqrt(s1 ** 2 / n1 + s2 ** 2 / n2 - 2 * r * s1 * s2 * nc / (n1 * n2))
    gamma = (s1 ** 2 / n1 + s2 ** 2 / n2) ** 2 / (
        (s1 ** 2 / n1) ** 2 / (n1 - 1) + (s2 ** 2 / n2) ** 2 / (n2 - 1))
    na, nb = n1 - nc, n2 - nc
    v = (nc - 1) + (gamma - nc + 1) / (na + nb + 2 * nc) * (na + nb)
    diff = xa.mean() - xb.mean()
    return diff, 2 * stats.t.sf(abs(diff / se), v)


def test_arm_seeds_all_partnered_use_every_baseline_run_too(tmp_path):
    rng = np.random.default_rng(7)
    seed_effect = rng.normal(0, 0.04, 8)
    base = {s: 0.6 + seed_effect[s] for s in range(8)}
    arm = {s: 0.62 + seed_effect[s] + rng.normal(0, 0.005) for s in range(5)}
    rows = [("baseline", s, v) for s, v in base.items()] + [("x", s, v) for s, v in arm.items()]
    _, rep, _ = report(tmp_path, write_csv(tmp_path, rows, ["arm", "seed", "eval/accuracy"]),
                       "--no-figures")
    x = arms_of(rep)["x"]
    diff, p = t_new2(arm, base)
    assert x["test"] == "overlap_t" and math.isclose(x["p_value"], p, rel_tol=1e-9)
    # The diff is the shown means' difference: every run of both arms.
    assert math.isclose(x["diff"], x["mean"] - rep["strata"][0]["baseline"]["mean"])
    assert math.isclose(x["diff"], diff) and rep["strata"][0]["baseline"]["n"] == 8
    assert "baseline seeds [5, 6, 7]" in x["notes"][0] and "all 5 + 8 runs" in x["notes"][0]


def test_three_of_five_shared_seeds_use_every_run(tmp_path):
    rng = np.random.default_rng(3)
    seed_effect = rng.normal(0, 0.04, 7)
    base = {s: 0.6 + seed_effect[s] for s in range(5)}
    arm = {s: 0.63 + seed_effect[s] + rng.normal(0, 0.004) for s in (2, 3, 4, 5, 6)}
    rows = [("baseline", s, v) for s, v in base.items()] + [("x", s, v) for s, v in arm.items()]
    _, rep, _ = report(tmp_path, write_csv(tmp_path, rows, ["arm", "seed", "eval/accuracy"]),
                       "--no-figures")
    x = arms_of(rep)["x"]
    diff, p = t_new2(arm, base)
    assert x["test"] == "overlap_t" and math.isclose(x["p_value"], p, rel_tol=1e-9)
    assert math.isclose(x["diff"], diff)
    assert "arm seeds [5, 6], baseline seeds [0, 1]" in x["notes"][0]


@pytest.mark.parametrize("shared", [0, 6])
def test_the_overlapping_test_is_welch_without_pairs_and_paired_with_all(shared):
    from grpo_ablate.stats.significance import overlap_compare

    rng = np.random.default_rng(shared)
    a, b = rng.normal(0.62, 0.03, 6), rng.normal(0.6, 0.04, 6)
    if shared:
        b = a - 0.02 + rng.normal(0, 0.01, 6)
    c = overlap_compare(a, b, np.column_stack([a, b])[:shared], 0.01)
    ref = stats.ttest_rel(a, b) if shared else stats.ttest_ind(a, b, equal_var=False)
    assert math.isclose(c.p_value, ref.pvalue, rel_tol=1e-9)
    low, high = ref.confidence_interval()
    assert math.isclose(c.ci_low, low, rel_tol=1e-9) and math.isclose(c.ci_high, high, rel_tol=1e-9)


def test_equivalence_p_values_are_holm_adjusted_like_significance():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(11)
    seed_effect = rng.normal(0, 0.04, 6)
    rows = [{"arm": arm, "seed": s, "model": "m", "task": "t", "status": "completed",
             "eval/accuracy": 0.6 + seed_effect[s] + rng.normal(0, 0.004)}
            for arm in ("baseline", "a", "b", "c") for s in range(6)]
    arms = analyse(pd.DataFrame(rows), Settings(min_effect=0.01))["strata"][0]["arms"]
    ref = multipletests([a["tost_p"] for a in arms], method="holm")[1]
    assert np.allclose([a["tost_p_adjusted"] for a in arms], ref)


def test_first_n_seeds_for_welch_is_the_first_with_enough_power():
    need = first_n(lambda k: power("welch_t", 0.02, 0.03, k, 0.05), 2)
    assert welch_power(0.02, 0.03, need, 0.05) >= 0.8 > welch_power(0.02, 0.03, need - 1, 0.05)


def test_load_keeps_plain_string_columns(tmp_path):
    rows = [(arm, s, v) for arm in ("baseline", "x") for s, v in enumerate(BASE)]
    df, _ = load_results(write_csv(tmp_path, rows, ["arm", "seed", "eval/accuracy"]))
    assert df["arm"].dtype == object and df["eval/accuracy"].dtype == np.float64


# trick fidelity in the report: activity, budget, EMA ------------------------------------
def fidelity_table(acted_x=0.01, key_x="k-x"):
    rng = np.random.default_rng(5)
    seed_effect = rng.normal(0, 0.04, 6)
    rows = []
    for arm, acted, key, steps, lr in (("baseline", np.nan, "k0", 40, 2.0), ("x", acted_x, key_x, 40, 2.0),
                                       ("y", 1.0, "k-y", 40, 1.0), ("ema", 1.0, "k-e", 40, 2.0)):
        for s in range(6):
            acc = 0.6 + seed_effect[s] + rng.normal(0, 0.004)
            rows.append({"arm": arm, "seed": s, "model": "m", "task": "t", "status": "completed",
                         "eval/accuracy": acc + (0.03 + 0.002 * (s % 3) if arm == "ema" else 0.0),
                         "raw/eval/accuracy": acc if arm == "ema" else np.nan,
                         "stability/checkpoint_regret": 0.01,
                         "stability/checkpoint_regret_raw": 0.03 if arm == "ema" else np.nan,
                         "activity": acted, "activity_measure": "samples clipped", "config_key": key,
                         "budget/optimizer_steps": steps, "budget/completions": 2560,
                         "budget/total_lr": lr, "budget/completion_tokens": 9000})
    return pd.DataFrame(rows)


def test_an_arm_whose_trick_hardly_acted_is_inert_not_no_effect():
    rep = analyse(fidelity_table(acted_x=0.01), Settings())
    x = arms_of(rep)["x"]
    assert x["verdict"] == "inert" and x["activity"]["acted"] == 0.01
    assert rep["strata"][0]["recipe"]["untested"] == ["x"]
    assert arms_of(analyse(fidelity_table(acted_x=0.5), Settings()))["x"]["verdict"] != "inert"


def test_an_arm_identical_to_the_baseline_by_construction_is_inert():
    rep = analyse(fidelity_table(acted_x=1.0, key_x="k0"), Settings())
    x = arms_of(rep)["x"]
    assert x["verdict"] == "inert"
    assert x["activity"]["measure"] == "identical to the baseline by construction"


def test_budget_differences_are_flagged_beside_the_verdict(tmp_path):
    rep = analyse(fidelity_table(), Settings())
    budget = rep["strata"][0]["budget"]
    assert budget["y"]["differs"] == ["total_lr"] and budget["y"]["ratio"]["total_lr"] == 0.5
    assert budget["x"]["differs"] == []
    from grpo_ablate.report.markdown import render_markdown

    rep["direction"], rep["inert_below"] = "higher", 0.05
    md = render_markdown(rep, [])
    assert "| y |" in md and "total LR x0.50" in md


def test_ema_is_compared_with_its_raw_weights_within_the_arm():
    df = fidelity_table()
    rep = analyse(df, Settings())
    (row,) = rep["strata"][0]["ema_vs_raw"]
    e = df[df["arm"] == "ema"]
    ref = stats.ttest_rel(e["eval/accuracy"], e["raw/eval/accuracy"])
    assert row["arm"] == "ema" and math.isclose(row["diff"], 0.032, rel_tol=1e-9)
    assert row["regret_ema"] == 0.01 and row["regret_raw"] == 0.03
    assert math.isclose(row["p_value"], ref.pvalue, rel_tol=1e-9)


def test_figure_titles_leave_out_missing_model_and_task():
    from grpo_ablate.report.figures import _stratum_name

    assert _stratum_name({"model": "-", "task": "-"}) == ""
    assert _stratum_name({"model": "tiny", "task": "-"}) == "tiny"
    assert _stratum_name({"model": "tiny", "task": "arithmetic"}) == "tiny / arithmetic"


@pytest.mark.parametrize("test", ["paired_t", "welch_t"])
@pytest.mark.parametrize("ratio", [0.05, 0.3, 1.0, 3.0, 12.0])
def test_first_n_is_the_first_n_with_enough_power(test, ratio):
    from grpo_ablate.stats.significance import power

    need = first_n(lambda k: power(test, 1.0, ratio, k, 0.05 / 19), 2)
    assert power(test, 1.0, ratio, need, 0.05 / 19) >= 0.8
    assert need == 2 or power(test, 1.0, ratio, need - 1, 0.05 / 19) < 0.8


# the seeds-needed figure ---------------------------------------------------------------
def test_mde_curve_uses_the_arm_of_median_test_sd_not_of_median_mde(tmp_path):
    """Arms stopped at different n (as an adaptive sweep leaves them): the arm with the
    median MDE is not the arm with the median seed-to-seed sd; the curve needs the sd."""
    from grpo_ablate.report.figures import median_sd_arm

    rng = np.random.default_rng(11)
    seed_effect = rng.normal(0, 0.04, 10)
    rows = [("baseline", s, 0.6 + seed_effect[s]) for s in range(10)]
    noise = {"wide_at_10": (0.05, 10), "mid_at_3": (0.02, 3), "narrow_at_3": (0.01, 3)}
    diffs = {}
    for arm, (sd, n) in noise.items():
        d = rng.normal(0, sd, n)
        diffs[arm] = d
        rows += [(arm, s, 0.6 + seed_effect[s] + d[s]) for s in range(n)]
    _, rep, _ = report(tmp_path, write_csv(tmp_path, rows, ["arm", "seed", "eval/accuracy"]),
                       "--no-figures")
    arms = arms_of(rep)
    # The arm at 10 seeds is paired; those at 3 are partly matched (the baseline has 10):
    # the overlapping test on every run, whose sd is in Welch's form.
    assert arms["wide_at_10"]["diff_sd"] == pytest.approx(
        float(np.std(diffs["wide_at_10"], ddof=1)), rel=1e-9)
    assert [arms[a]["test"] for a in noise] == ["paired_t", "overlap_t", "overlap_t"]
    by_mde = sorted(arms.values(), key=lambda e: e["mde"])[1]["arm"]
    assert by_mde != "mid_at_3"  # the check can tell the two choices apart
    assert median_sd_arm(list(arms.values()))["arm"] == "mid_at_3"


def test_the_report_is_built_from_frozen_values_never_assigned_into_afterwards():
    """Each arm's result and each stratum are frozen dataclasses (stats/arm_result.py) that
    become dicts only at the report boundary; no module of stats/ sets a named key of a dict
    after building it (`entry["verdict"] = ...`): a later pass cannot rewrite a verdict."""
    import ast
    import dataclasses
    from pathlib import Path

    import grpo_ablate.stats as stats_package
    from grpo_ablate.stats.arm_result import ArmResult, StratumReport

    assert ArmResult.__dataclass_params__.frozen and StratumReport.__dataclass_params__.frozen
    df = pd.DataFrame([{"arm": a, "seed": s, "model": "m", "task": "t", "status": "completed",
                        "eval/accuracy": 0.5 + (0.1 if a == "b" else 0) + 0.01 * s}
                       for a in ("baseline", "b") for s in range(3)])
    from grpo_ablate.stats.metric_table import analyse_metric
    from grpo_ablate.stats.stratum import Stratum

    (arm,) = analyse_metric(Stratum(df, "baseline", ["eval/accuracy"]), Settings(scope="prompts"),
                            "eval/accuracy", "holm", "higher").arms
    with pytest.raises(dataclasses.FrozenInstanceError):
        arm.verdict = "improves"
    named = []
    for path in sorted(Path(stats_package.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
            named += [f"{path.name}:{node.lineno}" for t in targets
                      if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)
                      and isinstance(t.slice.value, str)]
    assert named == []
