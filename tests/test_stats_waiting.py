"""What each open verdict is waiting on: one number per open arm, the same in the
verdict table, report.json and the recipe, checked against power computed here by numerical
integration written independently of grpo_ablate.stats."""

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from grpo_ablate import cli
from grpo_ablate.stats.decide import Settings, analyse
from grpo_ablate.stats.sequential import Design
from grpo_ablate.stats.waiting import INERT

BASE = np.array([0.61, 0.57, 0.66, 0.59, 0.63, 0.60, 0.64, 0.58])


def t_power(nc: float, df: int, alpha: float) -> float:
    """Two-sided t power, integrating over the chi-square variable (independent of scipy's
    noncentral t, which grpo_ablate uses)."""
    crit = stats.t.ppf(1 - alpha / 2, df)

    def given_v(v):
        s = crit * math.sqrt(v / df)
        return (stats.norm.sf(s - nc) + stats.norm.cdf(-s - nc)) * stats.chi2.pdf(v, df)

    return integrate.quad(given_v, 0, np.inf, limit=200)[0]


def tost_power(diff: float, sd: float, n: int, alpha: float, margin: float) -> float:
    """Paired TOST power, integrating over the sample mean (grpo_ablate integrates over the
    sample sd): for a mean x, both one-sided tests reject when the sample sd is below
    (margin - |x|) sqrt(n) / c, a chi-square probability."""
    df, se = n - 1, sd / math.sqrt(n)
    c = stats.t.ppf(1 - alpha, df)

    def given_mean(x):
        s_max = (margin - abs(x)) * math.sqrt(n) / c
        return stats.norm.pdf(x, diff, se) * stats.chi2.cdf(df * (s_max / sd) ** 2, df)

    return integrate.quad(given_mean, -margin, margin, limit=200, points=[0.0, diff])[0]


def shifted(diffs_mean: float, diffs_sd: float, n: int, seed: int = 3) -> np.ndarray:
    """n paired differences with exactly this mean and sd."""
    z = np.random.default_rng(seed).normal(size=n)
    return diffs_mean + diffs_sd * (z - z.mean()) / z.std(ddof=1)


def table(arms: dict[str, np.ndarray], n: int) -> pd.DataFrame:
    rows = [{"arm": "baseline", "seed": s, "model": "m", "task": "t", "status": "completed",
             "eval/accuracy": BASE[s]} for s in range(n)]
    rows += [{"arm": a, "seed": s, "model": "m", "task": "t", "status": "completed",
              "eval/accuracy": BASE[s] + d[s]} for a, d in arms.items() for s in range(n)]
    return pd.DataFrame(rows)


def arms_of(rep) -> dict:
    return {a["arm"]: a for a in rep["strata"][0]["arms"]}


def test_fixed_n_an_effect_that_holm_has_not_confirmed_waits_for_confirmation():
    # Four arms: x's CI excludes 0 (p ~ 0.03); after y is rejected Holm tests x at alpha/3,
    # which it does not reach; z and w are noise.
    d = shifted(0.03, 0.025, 6)
    rep = analyse(table({"x": d, "y": shifted(0.3, 0.01, 6, 4), "z": shifted(0.0, 0.05, 6, 5),
                         "w": shifted(0.0, 0.06, 6, 6)}, 6), Settings(min_effect=0.01))
    x = arms_of(rep)["x"]
    assert x["verdict"] == "inconclusive" and x["ci_low"] > 0
    w = x["waiting_on"]
    assert w["on"] == "effect" and w["level"] == pytest.approx(0.05 / 4)
    need = w["seeds"]
    assert x["seeds_needed"] == need and x["more_seeds_needed"] == need - 6 == w["more_seeds"]
    nc = 0.03 / 0.025
    assert t_power(nc * math.sqrt(need), need - 1, 0.05 / 4) >= 0.8
    assert t_power(nc * math.sqrt(need - 1), need - 2, 0.05 / 4) < 0.8
    y = arms_of(rep)["y"]  # a decided arm waits on nothing
    assert y["verdict"] == "improves" and y["waiting_on"] is None and y["seeds_needed"] is None


def test_fixed_n_an_arm_near_zero_waits_for_equivalence():
    d = shifted(0.003, 0.012, 6)
    rep = analyse(table({"x": d}, 6), Settings(min_effect=0.01))
    x = arms_of(rep)["x"]
    assert x["verdict"] == "inconclusive" and x["ci_low"] < 0 < x["ci_high"]
    w = x["waiting_on"]
    assert w["on"] == "equivalence"
    need = w["seeds"]
    assert tost_power(0.003, 0.012, need, 0.05, 0.01) >= 0.8
    assert tost_power(0.003, 0.012, need - 1, 0.05, 0.01) < 0.8


def test_a_wide_interval_around_a_large_estimate_waits_on_either():
    d = shifted(0.02, 0.05, 6)
    x = arms_of(analyse(table({"x": d}, 6), Settings(min_effect=0.01)))["x"]
    assert x["ci_low"] < 0 < x["ci_high"] and x["waiting_on"]["on"] == "either"
    need = x["waiting_on"]["seeds"]
    assert t_power(0.02 / 0.05 * math.sqrt(need), need - 1, 0.05) >= 0.8
    assert t_power(0.02 / 0.05 * math.sqrt(need - 1), need - 2, 0.05) < 0.8


def test_adaptive_an_arm_that_failed_the_final_boundary_waits_beyond_the_plan():
    """Rungs 3 -> 6, two arms, no futility stop: x's CI excludes 0 and its p (about 0.03)
    misses the final boundary; the seeds are those the last boundary needs."""
    design = Design(rungs=(3, 6), alpha=0.05, min_effect=0.01, futility=0.0,
                    arms=("x", "same"))
    d = shifted(0.03, 0.025, 6)
    rep = analyse(table({"x": d, "same": np.zeros(6)}, 6),
                  Settings(min_effect=0.01, sequential=design))
    x = arms_of(rep)["x"]
    assert x["adaptive"]["reason"] == "final" and x["ci_low"] > 0
    w = x["waiting_on"]
    final = design.boundary_p(1, 0.05 / 2)
    assert w["on"] == "effect" and w["level"] == pytest.approx(final)
    assert "beyond the plan's last rung" in w["text"]
    need = w["seeds"]
    assert need > 6
    assert t_power(1.2 * math.sqrt(need), need - 1, final) >= 0.8
    assert need == 7 or t_power(1.2 * math.sqrt(need - 1), need - 2, final) < 0.8
    assert arms_of(rep)["same"]["verdict"] == "no_effect" and arms_of(rep)["same"]["waiting_on"] is None


def test_adaptive_an_open_arm_waits_for_the_first_rung_with_enough_power():
    """After look 1 of 3 -> 6 -> 12 an arm is open; the answer is a rung of the plan, checked
    at that look's boundary."""
    design = Design(rungs=(3, 6, 12), alpha=0.05, min_effect=0.01, futility=0.0, arms=("x",))
    d = shifted(0.05, 0.03, 3)
    x = arms_of(analyse(table({"x": d}, 3), Settings(min_effect=0.01, sequential=design)))["x"]
    assert x["adaptive"]["reason"] == "open"
    w = x["waiting_on"]
    assert w["seeds"] in design.rungs and w["seeds"] > 3
    look = design.rungs.index(w["seeds"])
    level = design.boundary_p(look, 0.05)
    assert w["level"] == pytest.approx(level)
    ratio = 0.05 / 0.03
    assert t_power(ratio * math.sqrt(w["seeds"]), w["seeds"] - 1, level) >= 0.8
    for k in range(look):  # earlier rungs beyond 3 seeds do not have the power
        if design.rungs[k] > 3:
            n = design.rungs[k]
            assert t_power(ratio * math.sqrt(n), n - 1, design.boundary_p(k, 0.05)) < 0.8


def test_table_json_and_recipe_agree_and_inert_arms_name_the_trick(tmp_path, capsys):
    rows = table({"x": shifted(0.03, 0.025, 6), "y": shifted(0.3, 0.01, 6, 4),
                  "q": shifted(0.003, 0.012, 6, 8)}, 6)
    rows["activity"] = np.where(rows["arm"] == "q", 0.01, 1.0)
    rows["activity_measure"] = "samples clipped"
    csv = tmp_path / "r.csv"
    rows.to_csv(csv, index=False)
    assert cli.main(["report", str(csv), "--out", str(tmp_path / "o"), "--no-figures",
                     "--runs", "matched", "--arms", "tricks"]) == 0
    capsys.readouterr()
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    md = (tmp_path / "o" / "report.md").read_text()
    arms = arms_of(rep)
    assert arms["q"]["verdict"] == "inert" and arms["q"]["waiting_on"]["text"] == INERT
    assert arms["y"]["waiting_on"] is None
    lines = md.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| arm | n |"))
    col = [c.strip() for c in lines[start].split("|")].index("waiting on")
    verdict_rows = lines[start + 2:lines.index("", start)]
    cells = {ln.split("|")[1].strip(): ln.split("|")[col].strip() for ln in verdict_rows}
    x = arms["x"]["waiting_on"]
    assert cells["x"] == f"effect +{x['more_seeds']}" and cells["y"] == "-"
    assert cells["q"] == "a trick that acts"
    undecided = next(ln for ln in md.splitlines() if ln.startswith("- Undecided:"))
    assert re.search(rf"\bx \(effect \+{x['more_seeds']} seeds\)", undecided)
    (entry,) = rep["strata"][0]["recipe"]["undecided"]
    assert entry["more_seeds_needed"] == x["more_seeds"] == arms["x"]["more_seeds_needed"]
    assert x["text"] in md
