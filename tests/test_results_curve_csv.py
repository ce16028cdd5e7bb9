"""Another trainer's learning curves as a long CSV (one row per run and evaluation, a `step`
column, optionally `tokens`): the run's final numbers are its last evaluated values, the
curves get ceiling-or-speed verdicts, paired where the file declares matched runs and Welch
where its runs are independent, and a bad file is refused in one line. The curves are
planted from ScaleRL's form written out from the paper (tests/scalerl.py), not from our fit."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scalerl import scalerl

from grpo_ablate import cli

STEPS = np.arange(0, 130, 10)


def curve_rows(seeds: int = 8, design: str | None = None, seed: int = 0) -> list[dict]:
    """baseline: ceiling 0.60, midpoint 30 steps; high: ceiling 0.75; fast: midpoint 10."""
    rng = np.random.default_rng(seed)
    rows = []
    for arm, (a, mid) in {"baseline": (0.60, 30.0), "high": (0.75, 30.0),
                          "fast": (0.60, 10.0)}.items():
        for s in range(seeds):
            v = scalerl(STEPS.astype(float), 0.1, a + rng.normal(0, 0.005), 2.0,
                        mid * math.exp(rng.normal(0, 0.05))) + rng.normal(0, 0.004, len(STEPS))
            v[0] = 0.1
            rows += [{"arm": arm, "seed": s, "step": int(t), "tokens": 512.0 * t,
                      "accuracy": float(x), **({"design": design} if design else {})}
                     for t, x in zip(STEPS, v, strict=True)]
    return rows


def report(tmp_path, rows, *flags, name="c", figures=False):
    csv = tmp_path / f"{name}.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    out = tmp_path / f"{name}-out"
    code = cli.main(["report", str(csv), "--out", str(out), "--metric", "accuracy", *flags,
                     *([] if figures else ["--no-figures"])])
    if code != 0:
        return code, None, None
    return code, json.loads((out / "report.json").read_text()), (out / "report.md").read_text()


def test_matched_curves_get_ceiling_and_speed_verdicts_and_the_final_value_is_the_last(tmp_path):
    rows = curve_rows(design="matched")
    code, rep, md = report(tmp_path, rows)
    assert code == 0
    curves = rep["curves"]
    assert curves["unit"] == "tokens" and curves["paired"] is True
    arms = {a["arm"]: a for a in curves["strata"][0]["arms"]}
    assert arms["high"]["words"].startswith("raises the ceiling")
    assert arms["high"]["ceiling"]["diff"] == pytest.approx(0.15, abs=0.02)
    assert arms["high"]["ceiling"]["test"] == "paired_t"
    assert arms["fast"]["words"].startswith("learns faster")
    assert 10 ** arms["fast"]["speed"]["diff"] == pytest.approx(1 / 3, rel=0.2)
    # The run's number in the main table is its value at its last step (120).
    table = pd.DataFrame(rows)
    last = table[table["step"] == 120].groupby("arm")["accuracy"].mean()
    main = {a["arm"]: a for a in rep["strata"][0]["arms"]}
    assert main["high"]["mean"] == pytest.approx(last["high"])
    assert main["high"]["diff"] == pytest.approx(last["high"] - last["baseline"])
    assert "## Ceiling or speed" in md and "paired t" in md


def test_independent_curves_are_compared_by_welch_and_the_band_by_bonferroni(tmp_path):
    rows = curve_rows()  # no design column: a CSV's runs are independent
    code, rep, md = report(tmp_path, rows)
    assert code == 0 and rep["curves"]["paired"] is False
    arms = {a["arm"]: a for a in rep["curves"]["strata"][0]["arms"]}
    assert arms["high"]["ceiling"]["test"] == "welch_t"
    assert arms["high"]["words"].startswith("raises the ceiling")
    band = arms["fast"]["band"]
    assert band["method"] == "bonferroni-welch"
    # fast learns faster to the same ceiling: decided above the baseline early, never below,
    # and the band holds the planted difference at every step
    assert band["low"][band["steps"].index(10)] > 0 and not band["sign_flips"]
    steps = np.array(band["steps"], dtype=float)
    truth = scalerl(steps, 0.1, 0.60, 2.0, 10.0) - scalerl(steps, 0.1, 0.60, 2.0, 30.0)
    assert np.all(np.array(band["low"]) <= truth) and np.all(truth <= np.array(band["high"]))
    assert "Welch's t" in md


def test_a_run_whose_metric_is_missing_at_its_last_step_keeps_its_last_evaluation(tmp_path):
    rows = curve_rows(seeds=3, design="matched")
    for r in rows:
        if r["step"] == 120 and r["arm"] == "high" and r["seed"] == 0:
            r["accuracy"] = float("nan")  # evaluated at 110, a training row at 120
    code, rep, _ = report(tmp_path, rows)
    assert code == 0
    at_110 = next(r["accuracy"] for r in rows
                  if (r["arm"], r["seed"], r["step"]) == ("high", 0, 110))
    others = [r["accuracy"] for r in rows if r["arm"] == "high" and r["step"] == 120
              and r["seed"] != 0]
    main = {a["arm"]: a for a in rep["strata"][0]["arms"]}
    assert main["high"]["mean"] == pytest.approx((at_110 + sum(others)) / 3)


def test_steps_without_tokens_measure_compute_in_steps(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "tokens"} for r in curve_rows(seeds=3)]
    code, rep, _ = report(tmp_path, rows)
    assert code == 0 and rep["curves"]["unit"] == "steps"


@pytest.mark.parametrize("change, says", [
    (lambda rows: rows[5].update(step=2.5), "column step must hold integers >= 0; row 7"),
    (lambda rows: rows[5].update(step=-1), "column step must hold integers >= 0; row 7"),
    (lambda rows: rows.append({**rows[3], "accuracy": 0.99}),
     "two rows of arm=baseline seed=0 step=30 with different values"),
    (lambda rows: [r.update(prompt="p1") for r in rows], "both a step and a prompt column"),
    (lambda rows: rows[4].update(tokens="many"), "column tokens must hold numbers"),
])
def test_a_bad_curve_csv_is_refused_in_one_line(tmp_path, capsys, change, says):
    rows = curve_rows(seeds=2)
    change(rows)
    code, _, _ = report(tmp_path, rows)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and says in err[0], err
    assert not (tmp_path / "c-out").exists()


def test_an_exact_copy_of_a_row_is_kept_once(tmp_path):
    rows = curve_rows(seeds=3)
    code, rep, _ = report(tmp_path, [*rows, rows[7]])
    assert code == 0
    fits = [r for r in rep["curves"]["runs"] if (r["arm"], r["seed"]) == ("baseline", 0)]
    assert len(fits) == 1


@pytest.mark.slow
def test_wandb_gets_the_curve_tables_and_the_fitted_curves_as_a_panel(tmp_path):
    """Offline W&B (no server here): the summary run's files hold the ceiling-or-speed table
    and every run's fit, the figure of fitted curves is logged, and the report spec shows
    all three in one panel grid."""
    from wandb_files import read_run

    rows = curve_rows(seeds=6, design="matched")
    code, rep, _ = report(tmp_path, rows, "--wandb", "offline", figures=True)
    assert code == 0
    out = tmp_path / "c-out"
    (run_file,) = sorted((out / "wandb").glob("offline-run-*/run-*.wandb"))
    (row,) = read_run(run_file)["history"]
    tables = {name: json.loads((run_file.parent / "files" / row[f"{name}/path"]).read_text())
              for name in ("curves", "curve_fits")}
    by_arm = {r[2]: dict(zip(tables["curves"]["columns"], r, strict=True))
              for r in tables["curves"]["data"]}
    fast = next(a for a in rep["curves"]["strata"][0]["arms"] if a["arm"] == "fast")
    assert by_arm["fast"]["midpoint_ratio"] == pytest.approx(10 ** fast["speed"]["diff"])
    assert by_arm["fast"]["in_words"] == fast["words"]
    assert len(tables["curve_fits"]["data"]) == len(rep["curves"]["runs"]) == 18
    assert row["figures/ceiling_speed/_type"] == "image-file"
    spec = json.loads((out / "wandb_report.json").read_text())
    grids = [b for b in spec["spec"]["blocks"] if b["type"] == "panel-grid"]
    text = [json.dumps(g) for g in grids]
    (curve_grid,) = [t for t in text if "curve_fits" in t]
    assert '"curves"' in curve_grid and "figures/ceiling_speed" in curve_grid


def test_an_arm_the_main_table_calls_inert_is_not_tested_on_its_curves_either(tmp_path):
    """The curve section agrees with the main table: an inert arm (its trick hardly acted)
    gets no ceiling or speed verdict and takes no share of the Holm family."""
    from grpo_ablate.report.curves import INERT_WORDS, curves_of, render_curves
    from grpo_ablate.results.table import load_results
    from grpo_ablate.stats.curve_verdicts import ceiling_or_speed

    csv = tmp_path / "c.csv"
    pd.DataFrame(curve_rows(seeds=6, design="matched")).to_csv(csv, index=False)
    df, _ = load_results(csv)
    stratum = {"model": "-", "task": "-", "min_effect": 0.01,
               "arms": [{"arm": "high", "verdict": "inert"}, {"arm": "fast", "verdict": "improves"}]}
    report = {"metric": "accuracy", "baseline": "baseline", "alpha": 0.05, "min_effect": 0.01,
              "direction": "higher", "design": {"runs": "matched"}, "strata": [stratum]}
    curves = curves_of(df, report)
    rows = {r["arm"]: r for r in curves["strata"][0]["arms"]}
    assert rows["high"]["words"] == INERT_WORDS and rows["high"]["ceiling"]["verdict"] == "inert"
    fits = pd.DataFrame(curves["runs"])
    (alone,) = ceiling_or_speed(fits[fits["arm"] != "high"], "baseline", 0.05, 0.01)
    assert rows["fast"]["speed"]["p_adjusted"] == alone["speed"]["p_adjusted"]
    # An arm identical to the baseline on every seed has no interval: the table says why.
    rows["fast"]["ceiling"].update(diff=0.0, ci=[math.nan, math.nan])
    text = "\n".join(render_curves(curves))
    assert "+0.000 [identical on every seed]" in text and "nan" not in text
