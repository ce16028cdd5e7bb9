"""A CSV read as it was made (docs/contracts.md, "What a CSV says about itself"):
independent runs whatever their numbers, every run used, the fixed prompts of a benchmark
unless a pool is declared, margins on the metric's scale, a "no effect" the table agrees
with, and arms that are methods without a recipe."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from grpo_ablate import cli


def report(tmp_path, rows, *flags, name="r"):
    csv = tmp_path / f"{name}.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    out = tmp_path / f"{name}-out"
    code = cli.main(["report", str(csv), "--out", str(out), "--no-figures", *flags])
    if code != 0:
        return code, None, None
    return code, json.loads((out / "report.json").read_text()), (out / "report.md").read_text()


def arms_of(rep) -> dict:
    return {a["arm"]: a for a in rep["strata"][0]["arms"]}


def runs(rng, spec: dict, start: dict | None = None) -> list[dict]:
    """Independent runs: arm -> (mean, sd, count); numbered 1..n in each arm, or from `start`."""
    rows = []
    for arm, (mu, sd, n) in spec.items():
        first = (start or {}).get(arm, 1)
        rows += [{"arm": arm, "seed": first + i, "return": float(v)}
                 for i, v in enumerate(rng.normal(mu, sd, n))]
    return rows


# Independent runs ----------------------------------------------------------------------
def test_independent_runs_get_one_verdict_whatever_their_numbering(tmp_path, capsys):
    rng = np.random.default_rng(5)
    spec = {"baseline": (3000, 300, 5), "drq": (3420, 300, 5), "curl": (2990, 300, 5)}
    alike = runs(rng, spec)
    # The same runs numbered apart (arm k's runs 100k + 1..): no seed is shared.
    apart = [{**r, "seed": r["seed"] + 100 * list(spec).index(r["arm"])} for r in alike]
    # And numbered alike but shuffled within each arm: a pairing would change the numbers.
    shuffled = []
    for arm in spec:
        mine = [r for r in alike if r["arm"] == arm]
        order = rng.permutation(len(mine)) + 1
        shuffled += [{**r, "seed": int(s)} for r, s in zip(mine, order, strict=True)]
    reps = [report(tmp_path, rows, "--metric", "return", name=n)[1]
            for n, rows in (("alike", alike), ("apart", apart), ("shuffled", shuffled))]
    capsys.readouterr()
    first = arms_of(reps[0])
    for rep in reps:
        assert rep["runs"] == "independent" and rep["design"]["runs"] == "independent"
        for arm, a in arms_of(rep).items():
            assert a["test"] == "welch_t" and a["verdict"] == first[arm]["verdict"]
            assert a["p_value"] == pytest.approx(first[arm]["p_value"], rel=1e-12)
            assert a["ci_low"] == pytest.approx(first[arm]["ci_low"], rel=1e-12)
    x = [r["return"] for r in alike if r["arm"] == "drq"]
    b = [r["return"] for r in alike if r["arm"] == "baseline"]
    assert first["drq"]["p_value"] == pytest.approx(stats.ttest_ind(x, b, equal_var=False).pvalue)
    # The design line says which runs the test used, and why.
    md = (tmp_path / "alike-out" / "report.md").read_text()
    assert "Runs: **independent**" in md and "not assumed to share anything" in md
    assert "single-run illusion" not in md and reps[0]["strata"][0]["single_run_illusion"] is None


def test_the_same_runs_declared_matched_are_paired(tmp_path, capsys):
    rng = np.random.default_rng(2)
    seed_effect = rng.normal(0, 0.05, 6)
    rows = [{"arm": arm, "seed": s, "eval/accuracy": 0.6 + d + seed_effect[s]
             + rng.normal(0, 0.005)} for arm, d in (("baseline", 0), ("kl_off", 0.01))
            for s in range(6)]
    _, said, md = report(tmp_path, rows, "--runs", "matched", name="flag")
    _, column, _ = report(tmp_path, [{**r, "design": "matched"} for r in rows], name="column")
    _, default, _ = report(tmp_path, rows, name="default")
    capsys.readouterr()
    assert arms_of(said)["kl_off"]["test"] == arms_of(column)["kl_off"]["test"] == "paired_t"
    assert column["design"]["runs_reason"].startswith("as the CSV's `design` column says")
    assert "as `--runs matched` says" in md
    assert arms_of(default)["kl_off"]["test"] == "welch_t"
    # Paired, the seed effect cancels: the matched test sees what Welch cannot.
    assert arms_of(said)["kl_off"]["p_value"] < arms_of(default)["kl_off"]["p_value"]


def test_a_design_column_with_two_values_is_refused_in_one_line(tmp_path, capsys):
    rows = [{"arm": a, "seed": s, "m": float(s), "design": "matched" if s else "independent"}
            for a in ("baseline", "x") for s in range(3)]
    code, _, _ = report(tmp_path, rows, "--metric", "m")
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and "column design holds independent, matched" in err[0]


@pytest.mark.parametrize("runs_flag", ["independent", "matched"])
def test_unequal_counts_use_every_run_and_the_columns_agree(tmp_path, capsys, runs_flag):
    rng = np.random.default_rng(9)
    rows = runs(rng, {"baseline": (3000, 400, 10), "dqn": (3300, 400, 30), "der": (3100, 400, 5)})
    _, rep, _ = report(tmp_path, rows, "--metric", "return", "--runs", runs_flag)
    capsys.readouterr()
    base = rep["strata"][0]["baseline"]
    assert base["n"] == 10
    for arm, n in (("dqn", 30), ("der", 5)):
        a = arms_of(rep)[arm]
        assert a["n"] == n
        # n, mean and diff describe the same runs: the diff is the shown means' difference.
        assert a["diff"] == pytest.approx(a["mean"] - base["mean"], rel=1e-12)
        mine = [r["return"] for r in rows if r["arm"] == arm]
        assert a["mean"] == pytest.approx(float(np.mean(mine)))
        assert a["test"] == ("welch_t" if runs_flag == "independent" else "overlap_t")


# The prompts' scope ----------------------------------------------------------------------
def long_rows(rng, prompts: int = 12, runs_per_arm: int = 4, shift: float = 0.04):
    hard = rng.normal(0, 0.15, prompts)
    trick = rng.normal(0, 0.08, prompts)  # the trick helps some tasks and not others
    return [{"arm": arm, "seed": s, "prompt": f"task{p}",
             "score": float(0.5 + hard[p] + (shift + trick[p]) * (arm == "x")
                            + rng.normal(0, 0.05))}
            for arm in ("baseline", "x") for s in range(runs_per_arm) for p in range(prompts)]


def test_a_long_csv_speaks_for_its_fixed_prompts_unless_a_pool_is_declared(tmp_path, capsys):
    rows = long_rows(np.random.default_rng(4))
    _, fixed, md = report(tmp_path, rows, "--metric", "score", name="fixed")
    assert fixed["scope"] == "prompts" and "the fixed set they are" in md
    (x,) = fixed["strata"][0]["arms"]
    assert x["test"] == "welch_t" and "more_prompts" not in (x["waiting_on"] or {})
    _, pooled, md = report(tmp_path, rows, "--metric", "score", "--prompts-pool", "20",
                           name="pooled")
    capsys.readouterr()
    assert pooled["scope"] == "task" and "declares a prompt pool" in md
    (x,) = pooled["strata"][0]["arms"]
    # Independent runs sharing the prompts: the crossed model without a seed effect.
    assert x["test"] == "crossed_welch" and x["variance"]["prompts"] == 12
    w = x["waiting_on"]
    assert w is not None, x["verdict"]
    # The prompts route never asks for more prompts than the pool holds.
    assert w["prompts"] is None or w["prompts"] <= 20
    assert w["prompts"] is not None or w["over_pool"] > 20
    assert "the task holds 20" in w["text"] or w["prompts"] is not None


def test_the_prompts_route_is_capped_by_a_prompt_pool_column(tmp_path, capsys):
    rows = [{**r, "prompt_pool": 14} for r in long_rows(np.random.default_rng(4))]
    _, rep, _ = report(tmp_path, rows, "--metric", "score", "--runs", "matched")
    capsys.readouterr()
    (x,) = rep["strata"][0]["arms"]
    assert rep["scope"] == "task" and x["test"] == "crossed_t"
    w = x["waiting_on"]
    assert w["prompts"] is None and w["over_pool"] > 14 and "the task holds 14" in w["text"]


def test_matched_runs_without_shared_seeds_say_why_the_task_scope_is_not_in_force(tmp_path,
                                                                                 capsys):
    rows = long_rows(np.random.default_rng(4))
    apart = [{**r, "seed": r["seed"] + (10 if r["arm"] == "x" else 0)} for r in rows]
    _, rep, md = report(tmp_path, apart, "--metric", "score", "--runs", "matched", "--scope",
                        "task")
    capsys.readouterr()
    assert rep["strata"][0]["scope"] == "prompts (no seeds shared)"
    assert "no arm shares 2 seeds" in md and "no spread to split" not in md
    _, rep, _ = report(tmp_path, apart, "--metric", "score", "--scope", "task", name="ind")
    capsys.readouterr()
    (x,) = rep["strata"][0]["arms"]
    assert rep["strata"][0]["scope"] == "task" and x["test"] == "crossed_welch"


# Margins on the metric's scale -------------------------------------------------------------
def test_a_default_margin_on_returns_in_the_thousands_gets_a_clear_line(tmp_path, capsys):
    rng = np.random.default_rng(1)
    rows = runs(rng, {"baseline": (3000, 300, 10), "x": (3005, 300, 10)})
    _, rep, md = report(tmp_path, rows, "--metric", "return")
    err = capsys.readouterr().err
    note = rep["strata"][0]["margin_note"]
    assert note and "min-effect 0.01" in note and "no verdict can be 'no effect'" in note
    assert note in err and note in rep["warnings"]
    _, rel, md = report(tmp_path, rows, "--metric", "return", "--min-effect", "5%", name="rel")
    capsys.readouterr()
    base = [r["return"] for r in rows if r["arm"] == "baseline"]
    assert rel["strata"][0]["min_effect"] == pytest.approx(0.05 * abs(np.mean(base)))
    assert rel["strata"][0]["margin_note"] is None and rel["min_effect_rule"].startswith("0.05")
    assert f"min-effect ±{0.05 * abs(np.mean(base)):.4g}" in md
    _, sd, _ = report(tmp_path, rows, "--metric", "return", "--min-effect", "0.2sd", name="sd")
    capsys.readouterr()
    assert sd["strata"][0]["min_effect"] == pytest.approx(0.2 * np.std(base, ddof=1))


def test_a_margin_that_is_not_one_is_refused_in_one_line(tmp_path, capsys):
    rows = runs(np.random.default_rng(1), {"baseline": (1, 0.1, 3), "x": (1, 0.1, 3)})
    code, _, _ = report(tmp_path, rows, "--metric", "return", "--min-effect", "5 percent")
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and "allowed: a number in the metric's units" in err[0]


# "No effect" only where what is shown agrees ---------------------------------------------------
@pytest.mark.parametrize("truth, margin, n, draws", [
    (0.79, 1.2, 40, 40),   # inside the margin: TOST's 90% interval fits, the 95% one may not
    (2.0, 1.9, 5, 300),    # a real difference over the margin: TOST passes in under 5%
])
def test_no_effect_never_sits_beside_an_interval_that_crosses_the_margin(truth, margin, n,
                                                                        draws):
    """Planted: draws in which TOST alone passes exist (the premise is counted), and there
    the verdict is inconclusive, says why, and the recipe does not drop the trick."""
    from grpo_ablate.stats.decide import Settings, analyse

    hits = 0
    for k in range(draws):
        rows = runs(np.random.default_rng(1000 + k),
                    {"baseline": (0.0, 1.0, n), "kl_off": (truth, 1.0, n)})
        df = pd.DataFrame(rows).assign(model="m", task="t", status="completed")
        rep = analyse(df, Settings(metric="return", runs="independent", min_effect=margin))
        x = arms_of(rep)["kl_off"]
        inside = -margin <= x["ci_low"] and x["ci_high"] <= margin
        if x["verdict"] == "no_effect":
            assert inside and x["mde"] <= margin
        if x["tost_p_adjusted"] < 0.05 and not (inside and x["mde"] <= margin):
            hits += 1  # significant draws say improves/harms; the others are open, and say why
            assert x["verdict"] in ("inconclusive", "improves", "harms")
            if x["verdict"] == "inconclusive":
                assert any("not called no effect" in n for n in x["notes"]), x["notes"]
            assert rep["strata"][0]["recipe"]["safe_to_drop"] == []
    assert hits > 0  # the premise: some draws have TOST alone


def test_p_and_interval_come_from_one_method_at_every_run_count(tmp_path, capsys):
    """p < alpha exactly when the 95% CI excludes 0 (no bootstrap interval beside a t p)."""
    for n in (5, 25):
        for k in range(10):
            rng = np.random.default_rng(k)
            rows = runs(rng, {"baseline": (0.0, 1.0, n), "x": (0.5, 1.0, n)})
            _, rep, _ = report(tmp_path, rows, "--metric", "return", name=f"p{n}-{k}")
            x = arms_of(rep)["x"]
            assert (x["p_value"] < 0.05) == (x["ci_low"] > 0 or x["ci_high"] < 0)
    capsys.readouterr()


# Arms that are methods ---------------------------------------------------------------------
def test_arms_that_are_methods_get_no_recipe(tmp_path, capsys):
    rng = np.random.default_rng(3)
    rows = runs(rng, {"SAC": (3000, 100, 5), "DrQ": (3600, 100, 5), "CURL": (2500, 100, 5)})
    _, rep, md = report(tmp_path, rows, "--metric", "return", "--baseline", "SAC")
    capsys.readouterr()
    assert rep["arms"] == "methods" and rep["strata"][0]["recipe"] is None
    assert "Baseline plus" not in md and "Safe to drop" not in md
    assert "the arms are methods, not tricks" in md
    code = cli.main(["recipe", str(tmp_path / "r-out")])  # nothing to confirm: one line
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and "arms are methods, not tricks" in err[0]
    tricks = [{**r, "arm": {"SAC": "baseline", "DrQ": "kl_off", "CURL": "entropy_coef_0.01"}
               .get(r["arm"], r["arm"])} for r in rows]
    _, rep, md = report(tmp_path, tricks, "--metric", "return", name="tricks")
    capsys.readouterr()
    assert rep["arms"] == "tricks" and rep["strata"][0]["recipe"]["keep"] == ["kl_off"]
    assert "Baseline plus: kl_off" in md
