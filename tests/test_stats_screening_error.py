"""The screening analysis's error from all the information a design holds: Lenth's PSE over
every contrast (Lenth 1989's formula, recomputed here), the replicates' own error pooled with
the unmodelled contrasts (statsmodels' OLS of the same model), an error of zero claimed only
where replicates agree, OVAT's inert rule for a factor whose trick did not act, and
`grpo-ablate report --design FILE.csv` on a published table with its one-line refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf

from grpo_ablate.config.screening import Factor, design_record
from grpo_ablate.report.screening import screening_report
from grpo_ablate.stats.screening import MIN_RESIDUAL_DF

ROOT = Path(__file__).resolve().parent.parent
# Montgomery, Design and Analysis of Experiments, Example 6.2: filtration rate, a 2^4 in
# standard order (A fastest), unreplicated.
FILTRATION = [45, 71, 48, 65, 68, 60, 80, 65, 43, 100, 45, 104, 75, 86, 70, 96]


def standard_order(k: int) -> np.ndarray:
    return np.array([[1 if (i >> j) & 1 else -1 for j in range(k)] for i in range(2 ** k)])


def design_of(k: int, replicates: int, y: np.ndarray | list[float], names: str) -> tuple:
    matrix = standard_order(k)
    fs = [Factor(name=n, family=n, settings={f"trainer.k_{n}": 1}) for n in names]
    design = design_record(fs, matrix, k + 1, "test")
    rows = [{"arm": design["points"][i % len(matrix)], "seed": i // len(matrix),
             "status": "completed", "score": float(v)} for i, v in enumerate(y)]
    assert len(rows) == len(matrix) * replicates
    return design, pd.DataFrame(rows)


def lenth_by_hand(y: np.ndarray, k: int) -> tuple[dict[str, float], float]:
    """Every contrast of a full 2^k by its definition (mean at + minus mean at -), and
    Lenth's PSE: s0 = 1.5 median |c|, PSE = 1.5 median of the |c| below 2.5 s0."""
    x = standard_order(k)
    effects = {}
    for order in range(1, k + 1):
        for term in combinations(range(k), order):
            col = np.prod(x[:, list(term)], axis=1)
            effects["".join("ABCD"[i] for i in term)] = float(y[col > 0].mean()
                                                               - y[col < 0].mean())
    c = np.abs(list(effects.values()))
    s0 = 1.5 * np.median(c)
    return effects, float(1.5 * np.median(c[c < 2.5 * s0]))


def test_an_unreplicated_2_4_pools_its_higher_order_contrasts_as_statsmodels_fits_it():
    # 5 residual df (the three- and four-trick contrasts): the residual's t, by the rule.
    y = np.array(FILTRATION, dtype=float)
    design, df = design_of(4, 1, y, "ABCD")
    rep = screening_report(df, design, "score", 0.05, 1.0, None, "higher")
    assert rep["error"] == "ols" and rep["residual_df"] == 5 >= MIN_RESIDUAL_DF
    x = standard_order(4)
    frame = pd.DataFrame({"y": y, **{n: x[:, i] for i, n in enumerate("ABCD")}})
    ref = smf.ols("y ~ (A + B + C + D) ** 2", data=frame).fit()
    by = {r["name"]: r for r in rep["effects"]}
    assert by["A"]["effect"] == pytest.approx(21.625)
    for name, term in (("A", "A"), ("A x C", "A:C"), ("B x D", "B:D")):
        assert by[name]["effect"] == pytest.approx(2 * ref.params[term])
        assert by[name]["se"] == pytest.approx(2 * ref.bse[term])
        assert by[name]["p"] == pytest.approx(ref.pvalues[term])
    called = {n for n, r in by.items() if r["verdict"] in ("improves", "harms", "interacts")}
    assert {"A", "D", "A x C", "A x D"} <= called <= {"A", "C", "D", "A x C", "A x D"}


def test_an_unreplicated_2_3_uses_lenths_pse_over_all_seven_contrasts():
    # Montgomery Example 6.1's first replicate: 1 residual df, so Lenth over every contrast
    # (ABC, which the model does not hold, included).
    y = np.array([550, 669, 633, 642, 1037, 749, 1075, 729], dtype=float)
    design, df = design_of(3, 1, y, "ABC")
    rep = screening_report(df, design, "score", 0.05, 10.0, None, "higher")
    effects, pse = lenth_by_hand(y, 3)
    assert rep["error"] == "lenth" and rep["contrasts"] == 7 and rep["residual_df"] == 1
    for r in rep["effects"]:
        key = r["name"].replace(" x ", "")
        assert r["effect"] == pytest.approx(effects[key])
        assert r["se"] == pytest.approx(pse, rel=1e-9)
    modelled = np.abs([v for k, v in effects.items() if len(k) < 3])
    s0 = 1.5 * np.median(modelled)
    assert 1.5 * np.median(modelled[modelled < 2.5 * s0]) != pytest.approx(pse)


def test_a_replicated_2_3_uses_its_replicate_error_as_statsmodels_fits_it():
    # Montgomery Example 6.1, plasma etch: a 2^3 in two replicates (a block each here).
    y = [550, 669, 633, 642, 1037, 749, 1075, 729, 604, 650, 601, 635, 1052, 868, 1063, 860]
    design, df = design_of(3, 2, y, "ABC")
    rep = screening_report(df, design, "score", 0.05, 10.0, None, "higher")
    assert rep["error"] == "ols" and rep["pure_error_df"] == 7 and rep["residual_df"] == 8
    x = standard_order(3)
    frame = pd.DataFrame({"y": y, "xa": np.tile(x[:, 0], 2), "xb": np.tile(x[:, 1], 2),
                          "xc": np.tile(x[:, 2], 2), "block": np.repeat([0, 1], 8)})
    ref = smf.ols("y ~ C(block) + (xa + xb + xc) ** 2", data=frame).fit()
    by = {r["name"]: r for r in rep["effects"]}
    for name, term in (("A", "xa"), ("C", "xc"), ("A x C", "xa:xc"), ("B x C", "xb:xc")):
        assert by[name]["effect"] == pytest.approx(2 * ref.params[term])
        assert by[name]["se"] == pytest.approx(2 * ref.bse[term])
        assert by[name]["p"] == pytest.approx(ref.pvalues[term])
    called = {n for n, r in by.items() if r["verdict"] in ("improves", "harms", "interacts")}
    assert called == {"A", "C", "A x C"}  # the textbook ANOVA's


def planted_inert(noise_seed: int) -> tuple[dict, pd.DataFrame]:
    """The issue's case: 8 points x 2 seeds, two tricks that did nothing (their contrasts
    exactly zero), seeds that differ."""
    rng = np.random.default_rng(noise_seed)
    matrix = standard_order(3)
    fs = [Factor(name=n, family=n, settings={f"trainer.{n}": 1}) for n in ("a", "b", "c")]
    design = design_record(fs, matrix, 4, "test")
    rows = []
    for seed in (0, 1):
        shift = rng.normal(0, 0.02)  # each seed's own draw where c is on: the only noise
        for i, (a, b, c) in enumerate(matrix):
            rows.append({"arm": design["points"][i], "seed": seed, "status": "completed",
                         "score": 0.5 + 0.04 * seed + (0.02 + shift if c > 0 else 0.0),
                         "acted_by_key/trainer.a": 0.0 if a > 0 else np.nan,
                         "acted_by_key/trainer.b": 0.0 if b > 0 else np.nan,
                         "acted_by_key/trainer.c": 0.6 if c > 0 else np.nan})
    return design, pd.DataFrame(rows)


def test_tricks_that_did_not_act_are_inert_and_the_error_is_the_replicates():
    design, df = planted_inert(1)
    rep = screening_report(df, design, "score", 0.05, 0.01, None, "higher")
    assert rep["error"] == "ols" and rep["residual_df"] == 8 and rep["pure_error_df"] == 7
    by = {r["name"]: r for r in rep["effects"]}
    for name in ("a", "b"):
        assert by[name]["effect"] == pytest.approx(0.0, abs=1e-12)
        assert by[name]["verdict"] == "inert" and by[name]["acted"] == 0.0
        lo, hi = by[name]["ci"]
        assert hi - lo > 0.0  # an interval, never [0, 0]
        assert "acted on 0%" in by[name]["waiting_on"]
    assert by["c"]["acted"] == pytest.approx(0.6) and by["c"]["verdict"] != "inert"
    # Without the activity (a table from elsewhere), the same zeros are tested, not inert.
    bare = df.drop(columns=[c for c in df.columns if c.startswith("acted_by_key/")])
    rep = screening_report(bare, design, "score", 0.05, 0.01, None, "higher")
    assert all(r["verdict"] != "inert" for r in rep["effects"])


def test_zero_contrasts_without_replicates_leave_every_effect_open():
    design, df = planted_inert(2)
    c_on = {p for p, row in zip(design["points"], design["design"], strict=True) if row[2] > 0}
    one = df[df["seed"] == 0].assign(score=lambda d: np.where(
        d["arm"].isin(c_on), 0.52, 0.5))  # only c moves, by exactly 0.02
    one = one.drop(columns=[c for c in one.columns if c.startswith("acted_by_key/")])
    rep = screening_report(one, design, "score", 0.05, 0.01, None, "higher")
    assert rep["error"] == "unknown"
    assert all(r["verdict"] == "inconclusive" for r in rep["effects"])


def report(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grpo_ablate.cli", "report", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_a_published_table_gets_a_screening_report_and_bad_tables_one_line(tmp_path):
    x = standard_order(4)
    table = pd.DataFrame({n: np.where(x[:, i] > 0, "+", "-") for i, n in enumerate("ABCD")})
    table["rate"] = FILTRATION
    path = tmp_path / "filtration.csv"
    table.to_csv(path, index=False)
    got = report("--design", str(path), "--metric", "rate", "--no-figures", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    rep = json.loads((tmp_path / "filtration-report" / "report.json").read_text())
    by = {e["name"]: e for e in rep["effects"]}
    assert by["A x D"]["effect"] == pytest.approx(16.625) and rep["error"] == "ols"
    assert {"effect", "se", "p_adjusted", "verdict"} <= set(by["A"])
    # Three levels in a column, a missing response column, two columns that move together.
    three = table.assign(B=["-", "+", "0", "+"] * 4)
    together = table.assign(B=table["A"])
    for bad, metric, says in ((three, "rate", "column B has 3 distinct"),
                              (table, "yield", "no column yield"),
                              (together, "rate", "do not estimate every main effect")):
        bad.to_csv(path, index=False)
        got = report("--design", str(path), "--metric", metric, cwd=tmp_path)
        assert got.returncode == 2 and says in got.stderr, got.stderr
        assert len(got.stderr.strip().splitlines()) == 1
