"""A screening design's effects on the learning curve: runs of a 2^3 in two seeds whose
histories hold curves planted from ScaleRL's form (tests/scalerl.py): factor A raises the
ceiling by 0.1, factor B halves the compute to half the gain, C does nothing. The effects on
A and on log10 C_mid come out as planted; a design where one run's curve has not bent gives
no effect on either, and says why."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scalerl import scalerl

from grpo_ablate.config.screening import Factor, design_record
from grpo_ablate.report.screening import render_screening, screening_report

STEPS = np.arange(0, 44, 4)  # 0..40, every 4 steps: the demo's evaluations


def planted_design(tmp_path, flat_run: int | None = None) -> tuple[dict, pd.DataFrame]:
    x = np.array([[1 if (i >> j) & 1 else -1 for j in range(3)] for i in range(8)])
    factors = [Factor(name=n, family=n, settings={f"trainer.k_{n}": 1}) for n in "ABC"]
    design = design_record(factors, x, 4, "test")
    rng = np.random.default_rng(5)
    rows = []
    for seed in range(2):
        for i, point in enumerate(design["points"]):
            a = 0.70 + 0.05 * x[i, 0] + rng.normal(0, 0.004)
            mid = 8.0 * (0.5 if x[i, 1] > 0 else 1.0) * math.exp(rng.normal(0, 0.03))
            v = scalerl(STEPS.astype(float), 0.4, a, 2.0, mid) + rng.normal(0, 0.003,
                                                                               len(STEPS))
            v[0] = 0.4
            if flat_run == len(rows):
                v = 0.4 + 0.004 * STEPS  # a straight rise: not bent within the budget
            run_id = f"run{len(rows):02d}"
            folder = tmp_path / "runs" / run_id
            folder.mkdir(parents=True)
            (folder / "history.jsonl").write_text("".join(
                json.dumps({"step": int(s), "eval/accuracy": float(val)}) + "\n"
                for s, val in zip(STEPS, v, strict=True)))
            rows.append({"arm": point, "seed": seed, "model": "tiny", "task": "t",
                         "status": "completed", "eval/accuracy": float(v[-1]),
                         "run_id": run_id, "sweep_dir": str(tmp_path)})
    return design, pd.DataFrame(rows)


def test_each_factors_effect_on_ceiling_and_speed_is_the_planted_one(tmp_path):
    design, df = planted_design(tmp_path)
    rep = screening_report(df, design, "eval/accuracy", 0.05, 0.01, None, "higher")
    curves = rep["curves"]
    assert curves["readable"] == curves["runs"] == 16 and curves["unit"] == "steps"
    effects = {e["name"]: e for e in curves["effects"]}
    assert effects["A"]["ceiling"]["effect"] == pytest.approx(0.10, abs=0.01)
    assert effects["A"]["ceiling"]["verdict"] == "improves"
    assert effects["B"]["speed"]["effect"] == pytest.approx(math.log10(0.5), abs=0.05)
    assert effects["B"]["speed"]["verdict"] == "improves"  # less compute to half the gain
    assert effects["B"]["ceiling"]["verdict"] != "improves"
    assert effects["A"]["speed"]["verdict"] not in ("improves", "harms")
    assert all(effects["C"][p]["verdict"] not in ("improves", "harms")
               for p in ("ceiling", "speed"))
    text = render_screening(rep, [])
    assert "## Ceiling or speed, per factor" in text and "| A | +0.10" in text


def test_a_design_with_one_unbent_curve_gives_no_curve_effect_and_says_why(tmp_path):
    design, df = planted_design(tmp_path, flat_run=5)
    rep = screening_report(df, design, "eval/accuracy", 0.05, 0.01, None, "higher")
    curves = rep["curves"]
    assert curves["readable"] == 15 and curves["effects"] is None
    assert curves["unread"] == {"straight": 1}
    text = render_screening(rep, [])
    assert "15 of 16 runs show their ceiling" in text and "Not identifiable" in text
    # The final-metric screening is unaffected.
    assert rep["effects"] and rep["runs_used"] == 16


def test_runs_without_histories_give_no_curve_section(tmp_path):
    design, df = planted_design(tmp_path)
    rep = screening_report(df.drop(columns=["sweep_dir"]), design, "eval/accuracy", 0.05,
                           0.01, None, "higher")
    assert rep["curves"] is None and "Ceiling or speed" not in render_screening(rep, [])
