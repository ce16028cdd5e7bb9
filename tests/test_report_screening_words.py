"""A screening report in words first, and beside a one-at-a-time sweep with both effect sizes:
a replicated 2^3 whose response is planted (A raises it by 6, B lowers it by 4, C does
nothing), read as a reader of an ablation table would."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from grpo_ablate.config.screening import Factor, design_record
from grpo_ablate.errors import UserError
from grpo_ablate.report.screening import render_screening, screening_report
from grpo_ablate.report.screening_beside import beside


def planted() -> tuple[dict, pd.DataFrame]:
    x = np.array([[1 if (i >> j) & 1 else -1 for j in range(3)] for i in range(8)])
    design = design_record([Factor(name=n, family=n, settings={f"trainer.k_{n}": 1})
                            for n in "ABC"], x, 4, "test")
    rng = np.random.default_rng(2)
    rows = [{"arm": design["points"][i], "seed": s, "status": "completed",
             "score": float(10 + 3 * x[i, 0] - 2 * x[i, 1] + rng.normal(0, 0.3))}
            for s in range(2) for i in range(8)]
    return design, pd.DataFrame(rows)


def test_the_report_opens_with_what_to_keep_drop_and_leave_in_words():
    design, df = planted()
    rep = screening_report(df, design, "score", 0.05, 0.5, None, "higher")
    text = render_screening(rep, [])
    short = text[text.index("## In short"):text.index("**Design:**")]
    effects = {r["name"]: r for r in rep["effects"]}
    a = effects["A"]
    assert f"**Keep** (improves): A ({a['effect']:+.3g}, 95% CI [{a['ci'][0]:+.3g}," in short
    assert a["effect"] == pytest.approx(6.0, abs=0.5)
    assert "**Drop** (harms): B (" in short
    assert "**Recipe**: keep A; safe to drop" in short
    assert "**Left out**: nothing" in short
    # One run missing: the summary says so, with the count.
    rep = screening_report(df.iloc[1:], design, "score", 0.05, 0.5, None, "higher")
    assert "**Left out**: 1 of the design's 16 runs" in render_screening(rep, [])


def test_beside_an_ovat_sweep_shows_both_effect_sizes(tmp_path):
    design, df = planted()
    rep = screening_report(df, design, "score", 0.05, 0.5, None, "higher")
    ovat = {"metric": "score", "strata": [{"arms": [
        {"arm": "A", "verdict": "improves", "diff": 5.5, "ci_low": 4.9, "ci_high": 6.1},
        {"arm": "B", "verdict": "inconclusive", "diff": -1.0, "ci_low": -2.5, "ci_high": 0.5}]}]}
    (tmp_path / "report.json").write_text(json.dumps(ovat))
    rep["beside"] = beside(rep, tmp_path)
    text = render_screening(rep, [])
    a = next(r for r in rep["effects"] if r["name"] == "A")
    row = next(line for line in text.splitlines() if line.startswith("| A | +5.5 "))
    assert row.startswith(f"| A | +5.5 [+4.9, +6.1] | improves | {a['effect']:+.3g} "
                          f"[{a['ci'][0]:+.3g}, {a['ci'][1]:+.3g}] | improves |")
    assert "| C | - | - |" in text  # not in the OVAT sweep
    (tmp_path / "report.json").write_text(json.dumps({**ovat, "kind": "screening"}))
    with pytest.raises(UserError, match="not a one-at-a-time report"):
        beside(rep, tmp_path)
