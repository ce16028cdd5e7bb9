"""One comparison per row: every number a report row shows (n, diff, CI, p, MDE) is the
comparison that decided its verdict, and satisfies that verdict's own definition. Each path
a verdict can be reached by is planted here (a fixed-n test, the identical rule, zero
variance, the inert rule, an adaptive sweep's looks: efficacy, equivalence, identical,
futility), and every row is checked with `row_contradiction`, which the report also runs on
every report it writes (a contradiction becomes a warning)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_ablate.report.markdown import render_markdown
from grpo_ablate.stats.decide import Settings, analyse
from grpo_ablate.stats.sequential import Design
from grpo_ablate.stats.verdicts import row_contradiction

MARGIN = 0.01


def table(effects: dict[str, float], seeds: int, noise: dict[str, float],
          acted: dict[str, float] | None = None, seed: int = 0) -> pd.DataFrame:
    """Matched runs: a shared seed effect, each arm's effect, its own noise per run; an arm
    whose noise is 0 is its effect plus the baseline's own values exactly (a clone, or a
    constant shift)."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(0, 0.03, seeds)
    base = 0.6 + shared + rng.normal(0, noise["baseline"], seeds)
    rows = []
    for arm, effect in effects.items():
        values = base if arm == "baseline" else base + effect + (
            rng.normal(0, noise[arm], seeds) if noise[arm] else 0.0)
        for s in range(seeds):
            rows.append({"arm": arm, "seed": s, "model": "m", "task": "t",
                         "status": "completed", "eval/accuracy": float(values[s]),
                         "activity": None if arm == "baseline" else (acted or {}).get(arm, 1.0)})
    return pd.DataFrame(rows)


FIXED = {"good": (0.05, 0.005), "bad": (-0.05, 0.005), "tiny": (0.004, 0.0003),
         "same": (0.0, 0.0005), "clone": (0.0, 0.0), "shifted": (0.02, 0.0),
         "noisy": (0.01, 0.05), "quiet": (0.0, 0.05)}


def rows_of(report: dict) -> dict[str, dict]:
    return {x["arm"]: x for x in report["strata"][0]["arms"]}


def check(report: dict) -> None:
    for x in report["strata"][0]["arms"]:
        why = row_contradiction(x, report["alpha"], MARGIN, report["direction"],
                                report["inert_below"])
        assert why is None, f"{x['arm']}: {why}"


def test_every_fixed_n_path_shows_the_comparison_that_decided_it():
    df = table({"baseline": 0.0, **{a: e for a, (e, _) in FIXED.items()}}, seeds=8,
               noise={"baseline": 0.005, **{a: n for a, (_, n) in FIXED.items()}},
               acted={"quiet": 0.0})
    report = analyse(df, Settings(min_effect=MARGIN))
    rows = rows_of(report)
    assert {a: (x["verdict"], x["decided_by"]["rule"]) for a, x in rows.items()} == {
        "good": ("improves", "test"), "bad": ("harms", "test"), "tiny": ("negligible", "test"),
        "same": ("no_effect", "test"), "clone": ("no_effect", "identical"),
        "shifted": ("inconclusive", "untested"), "noisy": ("inconclusive", "test"),
        "quiet": ("inert", "test")}
    clone = rows["clone"]
    assert (clone["diff"], clone["ci_low"], clone["ci_high"], clone["mde"]) == (0.0, 0.0, 0.0, 0.0)
    assert clone["decided_by"]["text"] == "identical to baseline on all 8 seeds (no test needed)"
    check(report)
    md = render_markdown(report, [])
    assert "| clone | 8 |" in md and "identical to baseline on all 8 seeds" in md
    assert "inert rule: acted on 0% of its units" in md
    # "In short" names an open arm with the table's short form, never the full sentence
    (line,) = [ln for ln in md.splitlines() if ln.startswith("- **Still open**")]
    assert "noisy (waiting on " in line and "80% power" not in line and len(line) < 200


def test_every_look_of_an_adaptive_sweep_shows_that_looks_comparison():
    """Ten seeds of every arm are on disk (the other arms' runs), but each row is the look
    that settled it: its seeds, difference, CI, p against that look's boundary."""
    arms = {"good": (0.08, 0.005), "same": (0.0, 0.0003), "clone": (0.0, 0.0),
            "noisy": (0.0, 0.06)}
    df = table({"baseline": 0.0, **{a: e for a, (e, _) in arms.items()}}, seeds=10,
               noise={"baseline": 0.005, **{a: n for a, (_, n) in arms.items()}})
    design = Design(rungs=(3, 6, 10), arms=tuple(arms), min_effect=MARGIN)
    report = analyse(df, Settings(min_effect=MARGIN, sequential=design))
    rows = rows_of(report)
    reasons = {a: (x["verdict"], x["adaptive"]["reason"]) for a, x in rows.items()}
    assert reasons == {"good": ("improves", "efficacy"), "clone": ("no_effect", "identical"),
                       "same": ("no_effect", "equivalence"),
                       "noisy": ("inconclusive", reasons["noisy"][1])}
    assert rows["clone"]["n"] == 3 and rows["good"]["n"] < 10  # settled before the last look
    for x in rows.values():
        assert x["n"] == x["adaptive"]["seeds"]  # the look's seeds, not every run on disk
        assert x["decided_by"]["rule"] == "look" and x["p_adjusted"] is None
        assert x["decided_by"]["text"].startswith(f"look {x['adaptive']['look']} ")
    full = analyse(df, Settings(min_effect=MARGIN))  # every run: another n and difference
    assert rows_of(full)["good"]["n"] == 10 and rows["good"]["diff"] != rows_of(full)["good"]["diff"]
    check(report)


@pytest.mark.parametrize("planted", [
    {"verdict": "no_effect", "decided_by": {"rule": "test"}, "ci_low": -0.02, "ci_high": 0.0,
     "tost_p_adjusted": 0.001, "mde": 0.005, "diff": -0.01},
    {"verdict": "no_effect", "decided_by": {"rule": "test"}, "ci_low": -0.005, "ci_high": 0.005,
     "tost_p_adjusted": 0.001, "mde": 0.13, "diff": 0.0},
    {"verdict": "no_effect", "decided_by": {"rule": "identical"}, "ci_low": -0.022,
     "ci_high": 0.053, "diff": 0.015, "mde": 0.13},
    {"verdict": "improves", "decided_by": {"rule": "test"}, "ci_low": -0.01, "ci_high": 0.05,
     "p_adjusted": 0.01, "diff": 0.02},
    {"verdict": "inconclusive", "decided_by": {"rule": "test"}, "ci_low": 0.01, "ci_high": 0.05,
     "p_adjusted": 0.01, "diff": 0.03},
])
def test_the_check_names_a_row_whose_numbers_deny_its_verdict(planted):
    """The demo's old `length_penalty_task` row among them: no effect by the identical rule,
    shown with +0.015 and CI [-0.022, 0.053] from another comparison."""
    assert row_contradiction(planted, 0.05, MARGIN) is not None
