"""An adaptive screening's looks on planted data: the first look spends exactly Lan-DeMets'
O'Brien-Fleming-type alpha (recomputed here from the formula), decided effects stop the
design, an incomplete look waits, open effects carry on to the cap, and the expected runs
lie between one look and the cap."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from grpo_ablate.config.screening import Factor, design_record
from grpo_ablate.report.screening import columns_of, screening_report, term_text
from grpo_ablate.stats.screening_expected import expected_screening_runs
from grpo_ablate.stats.screening_looks import screening_looks
from grpo_ablate.stats.sequential import Design

MATRIX = np.array([[1 if (i >> j) & 1 else -1 for j in range(3)] for i in range(8)])


def full_2_3() -> dict:
    fs = [Factor(name=n, family=n, settings={f"trainer.{n}": 1}) for n in ("a", "b", "c")]
    return design_record(fs, MATRIX, 4, "test")


def runs(design: dict, replicates: int, effect_a: float, noise: float, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    points = np.tile(np.arange(8), replicates)
    seeds = np.repeat(np.arange(replicates), 8)
    y = 0.5 + 0.01 * seeds + effect_a / 2 * MATRIX[points, 0] + rng.normal(0, noise, len(points))
    return y, points, seeds


def looks_of(design, y, points, seeds, plan, margin):
    columns = columns_of(design)
    names = [term_text(t, [f["name"] for f in design["factors"]]) for t in columns]
    return screening_looks(y, MATRIX[points], points, seeds, seeds.astype(str), 8, columns,
                           names, plan, margin, "higher"), names


def obf_first_look(fraction: float, level: float) -> float:
    """The alpha a two-sided symmetric design spends at its first look: gsDesign's sfLDOF
    (Lan & DeMets 1983), alpha(t) = 2 - 2 Phi(Phi^-1(1 - a/2) / sqrt(t)), on each side with
    a = level / 2; the first boundary is exactly what it spends."""
    one_side = level / 2
    return 2 * (2 - 2 * stats.norm.cdf(stats.norm.ppf(1 - one_side / 2) / math.sqrt(fraction)))


def test_a_large_effect_and_nulls_within_a_wide_margin_settle_at_the_first_look():
    design = full_2_3()
    plan = Design(rungs=(2, 3, 4), alpha=0.05, min_effect=0.1, arms=("x",), scope="prompts")
    y, points, seeds = runs(design, 4, 0.3, 0.01, 0)
    looks, names = looks_of(design, y, points, seeds, plan, 0.1)
    assert looks.pending is None and len(looks.rows) == 1  # stopped before the cap
    settled = looks.ladder.settled
    assert settled["a"].reason == "efficacy" and settled["a"].verdict == "improves"
    m = len(names)
    assert settled["a"].p_boundary == pytest.approx(obf_first_look(2 / 4, 0.05 / m), rel=1e-6)
    assert all(settled[n].reason == "equivalence" for n in names if n != "a")


def test_an_incomplete_look_waits_and_open_effects_go_on_to_the_cap():
    design = full_2_3()
    plan = Design(rungs=(2, 3), alpha=0.05, min_effect=0.001, arms=("x",), scope="prompts")
    y, points, seeds = runs(design, 3, 0.0, 0.05, 1)
    missing = ~((points == 5) & (seeds == 1))  # one point of the second seed not recorded
    looks, _ = looks_of(design, y[missing], points[missing], seeds[missing], plan, 0.001)
    assert looks.pending == 0 and looks.rows == []
    full = ~((points == 5) & (seeds == 2))  # the first look complete, the second not
    looks, names = looks_of(design, y[full], points[full], seeds[full], plan, 0.001)
    assert len(looks.rows) == 1
    # A margin far below the noise decides nothing at look 1 unless futility stops it.
    open_or_futile = [n for n in names if n in looks.ladder.open
                      or looks.ladder.settled[n].reason == "futility"]
    assert open_or_futile == names
    assert looks.pending == (1 if looks.ladder.open else None)


def test_the_report_takes_each_effects_numbers_from_its_settling_look():
    design = full_2_3()
    y, points, seeds = runs(design, 3, 0.3, 0.01, 2)
    df = pd.DataFrame({"arm": [design["points"][p] for p in points], "seed": seeds,
                       "status": "completed", "score": y})
    plan = Design(rungs=(2, 3), alpha=0.05, min_effect=0.1, metric="score", arms=("x",),
                  scope="prompts")
    rep = screening_report(df, design, "score", 0.05, 0.1, None, "higher", plan)
    assert rep["adaptive"]["finished"] and rep["adaptive"]["looks_taken"] == 1
    first = screening_report(df[df["seed"] < 2], design, "score", 0.05, 0.1, None, "higher")
    a, a_first = (next(r for r in x["effects"] if r["name"] == "a") for x in (rep, first))
    assert a["effect"] == pytest.approx(a_first["effect"]) and a["look"] == 1
    assert a["verdict"] == "improves" and "settled at look 1" in a["waiting_on"]
    # Another metric than the plan's: the fixed analysis of every run.
    fixed = screening_report(df.assign(other=y), design, "other", 0.05, 0.1, None, "higher",
                             plan)
    assert fixed["adaptive"] is None and fixed["runs_used"] == 24


def test_expected_runs_lie_between_the_first_look_and_the_cap():
    design = full_2_3()
    plan = Design(rungs=(2, 3, 4), alpha=0.05, min_effect=0.2, arms=("x",), scope="prompts")
    columns = columns_of(design)
    wide, _ = expected_screening_runs(MATRIX, columns, plan, 0.0, 0.01, 0.01, sims=30)
    assert wide == 16.0  # nulls within a margin 20 times the noise: all at look 1
    narrow = Design(rungs=(2, 3, 4), alpha=0.05, min_effect=0.001, arms=("x",),
                    scope="prompts")
    mean, se = expected_screening_runs(MATRIX, columns, narrow, 0.0, 0.03, 0.03, sims=30)
    assert 16.0 < mean <= 32.0 and se >= 0
