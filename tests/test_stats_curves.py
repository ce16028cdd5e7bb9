"""Learning curves: ScaleRL's saturating form fitted to planted curves (the form written out
from the paper in tests/scalerl.py, not taken from our module), a ceiling never given where
the curve has not bent, the area by the trapezoid rule, ceiling-or-speed verdicts on planted
arms, and the band over budgets with its sign flip."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scalerl import scalerl

from grpo_ablate.stats.curve_verdicts import budget_band, ceiling_or_speed, curve_words, run_fits
from grpo_ablate.stats.curves import fit_curve

COMPUTE = np.linspace(0, 1000, 11)


def test_a_bent_curve_gives_its_ceiling_and_midpoint():
    rng = np.random.default_rng(0)
    v = scalerl(COMPUTE, 0.5, 0.8, 2.0, 200.0) + rng.normal(0, 0.003, len(COMPUTE))
    v[0] = 0.5
    f = fit_curve(COMPUTE, v)
    assert f.identifiable and f.reason == ""
    assert f.asymptote == pytest.approx(0.8, abs=0.01)
    assert math.log(f.midpoint / 200.0) == pytest.approx(0.0, abs=0.1)
    assert f.exponent == pytest.approx(2.0, rel=0.2)


@pytest.mark.parametrize("curve,says", [
    (lambda c: 0.5 + 0.0002 * c, "a straight rise fits as well as a curve"),
    (lambda c: np.full(len(c), 0.5), "did not move from its start"),
])
def test_a_curve_that_has_not_bent_gives_no_ceiling(curve, says):
    rng = np.random.default_rng(1)
    v = curve(COMPUTE) + rng.normal(0, 0.01, len(COMPUTE))
    v[0] = 0.5
    f = fit_curve(COMPUTE, v)
    assert not f.identifiable and says in f.reason
    assert math.isnan(f.asymptote) and math.isnan(f.midpoint)
    assert math.isfinite(f.auc)  # the area needs no fit


def test_too_few_evaluations_say_so_and_the_area_is_the_trapezoid():
    c, v = np.array([0.0, 10.0, 30.0]), np.array([0.5, 0.6, 0.7])
    f = fit_curve(c, v)
    assert not f.identifiable and "2 evaluations after the start" in f.reason
    # by hand: compute scaled to 0, 1/3, 1; trapezoids (0.5+0.6)/2/3 + (0.6+0.7)/2*2/3
    assert f.auc == pytest.approx((0.5 + 0.6) / 2 / 3 + (0.6 + 0.7) / 2 * 2 / 3)


def rows_of(arm: str, seed: int, values: np.ndarray) -> list[dict]:
    return [{"model": "m", "task": "t", "arm": arm, "seed": seed, "step": i, "compute": c,
             "value": x} for i, (c, x) in enumerate(zip(COMPUTE, values, strict=True))]


def planted(arms: dict[str, tuple[float, float]], seeds: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for arm, (a, mid) in arms.items():
        for s in range(seeds):
            v = scalerl(COMPUTE, 0.5, a + rng.normal(0, 0.005), 2.0,
                        mid * math.exp(rng.normal(0, 0.05))) + rng.normal(0, 0.004, 11)
            v[0] = 0.5
            rows += rows_of(arm, s, v)
    return pd.DataFrame(rows)


def test_a_faster_arm_with_the_same_ceiling_is_called_faster_not_higher():
    curves = planted({"baseline": (0.75, 250.0), "fast": (0.75, 100.0),
                      "high": (0.85, 250.0)}, seeds=6)
    rows = {r["arm"]: r for r in ceiling_or_speed(run_fits(curves), "baseline", 0.05, 0.02)}
    assert rows["fast"]["speed"]["verdict"] == "improves"
    assert rows["fast"]["ceiling"]["verdict"] in ("no_effect", "negligible", "inconclusive")
    assert 10 ** rows["fast"]["speed"]["diff"] == pytest.approx(0.4, rel=0.15)
    assert rows["high"]["ceiling"]["verdict"] == "improves"
    assert rows["high"]["ceiling"]["diff"] == pytest.approx(0.10, abs=0.02)
    assert rows["fast"]["words"].startswith("learns faster")
    assert rows["high"]["words"].startswith("raises the ceiling")


def test_arms_without_readable_curves_are_not_identifiable_never_a_number():
    rng = np.random.default_rng(3)
    rows = []
    for arm in ("baseline", "slow"):
        for s in range(4):
            v = 0.5 + 0.0001 * COMPUTE + rng.normal(0, 0.01, 11)  # straight rises
            rows += rows_of(arm, s, v)
    (row,) = ceiling_or_speed(run_fits(pd.DataFrame(rows)), "baseline", 0.05, 0.02)
    assert row["ceiling"] == {"n": 0, "verdict": "not_identifiable"}
    assert row["words"] == "not identifiable at this budget"
    assert curve_words("no_effect", "harms") == "learns slower, same ceiling"


def test_the_band_over_budgets_is_simultaneous_and_flags_a_sign_flip():
    """A fast start with a lower ceiling: better early, worse late, each decided."""
    curves = planted({"baseline": (0.75, 400.0), "fast_low": (0.65, 60.0)}, seeds=16)
    band = budget_band(curves, "fast_low", "baseline", 0.05)
    assert band["method"] == "max-t" and band["sign_flips"]
    steps = band["steps"]
    assert band["low"][0] > 0 and band["high"][steps.index(10)] < 0
    # simultaneous: wider than a pointwise t, narrower than Bonferroni over the 10 points
    from scipy import stats
    n = band["n"]
    assert stats.t.ppf(0.975, n - 1) < band["critical"] < stats.t.ppf(1 - 0.05 / 20, n - 1)
    few = budget_band(curves[curves["seed"] < 4], "fast_low", "baseline", 0.05)
    assert few["method"] == "bonferroni-t"  # 3 df cannot estimate 10 points' correlation


@pytest.mark.slow
def test_a_sweeps_report_reads_each_runs_curve_from_its_history(smoke_sweep):
    """The smoke sweep (4 steps, evaluated at 0, 2 and 4): each run's curve is read from
    its history with compute in tokens, and too short to give a ceiling, which the report
    says run by run and arm by arm."""
    import json

    from grpo_ablate.records import read_history, scan_records
    from grpo_ablate.report.curves import curves_of, render_curves

    _, out = smoke_sweep
    report = json.loads((out / "smoke" / "report.json").read_text())
    records, _ = scan_records(out / "smoke")
    df = pd.DataFrame([{"model": r.model, "task": r.task, "arm": r.arm, "seed": r.seed,
                        "status": r.status, "run_id": r.run_id, "sweep_dir": r.source_dir}
                       for r in records])
    curves = curves_of(df, report)
    assert curves["unit"] == "tokens" and len(curves["runs"]) == len(records)
    first = records[0]
    history = read_history(out / "smoke" / "runs" / first.run_id)
    evals = [r["eval/accuracy"] for r in history if "eval/accuracy" in r]
    (run,) = [r for r in curves["runs"] if r["arm"] == first.arm and r["seed"] == first.seed]
    assert len(evals) == 3 and run["start"] == evals[0]
    assert not run["identifiable"] and "2 evaluations after the start" in run["reason"]
    inert = {a["arm"] for st in report["strata"] for a in st["arms"] if a["verdict"] == "inert"}
    words = {a["arm"]: a["words"] for st in curves["strata"] for a in st["arms"]}
    assert {a for a, w in words.items() if w.startswith("inert")} == inert
    assert len(words) > len(inert)
    assert all(w == "not identifiable at this budget" for a, w in words.items() if a not in inert)
    text = "\n".join(render_curves(curves))
    assert "## Ceiling or speed" in text and "a curve needs 4" in text
    assert "Ceiling or speed" in (out / "smoke" / "report.md").read_text()
