"""Seeds and held-out prompts as sources of chance (stats/crossed.py, docs/verdicts.md "Task
scope"): the variance components against statsmodels' MixedLM, the two scopes against the
seed-only paired t, a long CSV through the report, and the per-prompt outcomes a run
records."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from grpo_ablate.cli import main
from grpo_ablate.stats.crossed import components, crossed_test, precision_for, standard_error
from grpo_ablate.stats.significance import paired_compare


def planted(seeds: int = 6, prompts: int = 40, seed: int = 3, seed_sd: float = 0.03) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.02 + rng.normal(0, seed_sd, (seeds, 1)) + rng.normal(0, 0.1, (1, prompts))
            + rng.normal(0, 0.05, (seeds, prompts)))


def test_the_components_and_the_task_scope_se_are_statsmodels_mixedlm_reml():
    """An independent computation: a crossed random-effects model fit by REML."""
    smf = pytest.importorskip("statsmodels.formula.api")
    d = planted()
    s, p = d.shape
    df = pd.DataFrame([(i, j, d[i, j]) for i in range(s) for j in range(p)],
                      columns=["seed", "prompt", "d"]).assign(group=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = smf.mixedlm("d ~ 1", df, groups="group", re_formula="0",
                          vc_formula={"seed": "0 + C(seed)", "prompt": "0 + C(prompt)"}
                          ).fit(reml=True)
    vc = dict(zip(fit.model.exog_vc.names, fit.vcomp, strict=True))
    ours = components(d)
    assert ours.seed == pytest.approx(vc["seed"], rel=1e-3)
    assert ours.prompt == pytest.approx(vc["prompt"], rel=1e-3)
    assert ours.residual == pytest.approx(fit.scale, rel=1e-3)
    assert crossed_test(d, 0.01, "task").se == pytest.approx(fit.bse["Intercept"], rel=1e-3)


def test_the_prompts_scope_is_the_paired_t_on_per_seed_means_and_task_adds_prompts():
    d = planted()
    s, p = d.shape
    base = np.random.default_rng(0).uniform(0.3, 0.7, (s, p))
    seed_only = paired_compare((base + d).mean(axis=1), base.mean(axis=1), 0.01)
    x = crossed_test(d, 0.01, "prompts")
    assert x.p_value == pytest.approx(seed_only.p_value, rel=1e-9)
    assert (x.ci_low, x.ci_high) == pytest.approx((seed_only.ci_low, seed_only.ci_high))
    task = crossed_test(d, 0.01, "task")
    parts = task.parts
    assert task.se ** 2 - x.se ** 2 == pytest.approx(parts.prompt / p, rel=1e-9)
    assert task.p_value > x.p_value and task.df > s - 1


def test_more_seeds_cannot_buy_what_only_prompts_can():
    """The prompt component falls with more prompts alone: a target below it is out of
    reach of seeds, and the prompts that reach it are found."""
    parts = components(planted(seed_sd=0.002))
    floor = math.sqrt(parts.prompt / parts.prompts)
    seeds, prompts = precision_for(parts, floor * 0.9)
    assert seeds is None and prompts is not None and prompts > parts.prompts
    assert parts.variance("task", prompts=prompts) <= (floor * 0.9) ** 2
    assert parts.variance("task", prompts=prompts - 1) > (floor * 0.9) ** 2
    seeds, _ = precision_for(parts, standard_error(parts, "task")[0] * 0.99)
    assert seeds is not None and seeds > parts.seeds


def long_csv(path, shift: float = 0.02):
    """Per-prompt effects of +-0.5 (zero on the task's average) plus a sample mean of
    `shift` on these 40 prompts, and almost no seed noise: on these prompts the arm clearly
    differs, for the task it is far from shown."""
    rng = np.random.default_rng(5)
    effect = np.where(np.arange(40) % 2 == 0, 0.5, -0.5) + shift
    rows = []
    for s in range(8):
        for j in range(40):
            base = 0.4 + 0.01 * (j % 7)
            rows.append(("baseline", s, f"q{j}", base + rng.normal(0, 0.001)))
            rows.append(("x", s, f"q{j}", base + effect[j] + rng.normal(0, 0.001)))
    pd.DataFrame(rows, columns=["arm", "seed", "prompt", "eval/accuracy"]).to_csv(path, index=False)


# These long CSVs are of matched seeds whose held-out prompts are a sample of the task's:
# said as their user says it (a CSV's own defaults, independent runs on a fixed set of
# prompts, are tests/test_results_csv_design.py's).
MATCHED_SAMPLE = ("--runs", "matched", "--scope", "task")


def report_of(tmp_path, capsys, *flags):
    csv = tmp_path / "long.csv"
    long_csv(csv)
    out = tmp_path / ("out" + "".join(flags).replace("-", ""))
    assert main(["report", str(csv), "--no-figures", "--out", str(out), *MATCHED_SAMPLE,
                 *flags]) == 0
    capsys.readouterr()
    return json.loads((out / "report.json").read_text()), (out / "report.md").read_text()


def test_the_scope_line_says_why_seeds_are_the_only_chance(tmp_path, capsys):
    """Per-prompt outcomes whose differences have no spread (the arm equals the baseline on
    every seed and prompt) are not "no per-prompt outcomes"; a CSV without prompts is."""
    rows = [(arm, s, f"q{j}", 0.4 + 0.01 * j) for arm in ("baseline", "x") for s in range(3)
            for j in range(5)]
    pd.DataFrame(rows, columns=["arm", "seed", "prompt", "eval/accuracy"]).to_csv(
        tmp_path / "same.csv", index=False)
    wide = pd.DataFrame(rows, columns=["arm", "seed", "prompt", "eval/accuracy"])
    wide.groupby(["arm", "seed"], as_index=False)["eval/accuracy"].mean().to_csv(
        tmp_path / "wide.csv", index=False)
    scopes = {}
    for name in ("same", "wide"):
        out = tmp_path / f"out-{name}"
        assert main(["report", str(tmp_path / f"{name}.csv"), "--no-figures", "--out",
                     str(out), *MATCHED_SAMPLE]) == 0
        scopes[name] = json.loads((out / "report.json").read_text())["strata"][0]["scope"]
        md = (out / "report.md").read_text()
        assert ("carry per-prompt outcomes, but no arm's difference" in md) == (name == "same")
    capsys.readouterr()
    assert scopes == {"same": "prompts (no spread to split)",
                      "wide": "prompts (no per-prompt outcomes)"}


def test_a_long_csv_of_a_sample_is_judged_for_the_task_and_on_its_prompts_when_asked(
        tmp_path, capsys):
    rep, md = report_of(tmp_path, capsys)
    (arm,) = rep["strata"][0]["arms"]
    assert rep["scope"] == "task" and rep["strata"][0]["scope"] == "task"
    assert arm["test"] == "crossed_t" and arm["verdict"] == "inconclusive"
    assert arm["n"] == 8 and arm["diff"] == pytest.approx(0.02, abs=1e-3)
    v = arm["variance"]
    assert v["seeds"] == 8 and v["prompts"] == 40 and v["prompt_share"] > 0.99
    assert "Scope: **the task**" in md and "Where the uncertainty comes from" in md
    assert "no number of seeds" in arm["waiting_on"]["text"]
    assert arm["waiting_on"]["more_prompts"] > 1000
    rep, md = report_of(tmp_path, capsys, "--scope", "prompts")
    (arm,) = rep["strata"][0]["arms"]
    assert rep["strata"][0]["scope"] == "prompts" and "Scope: **these held-out prompts**" in md
    assert arm["test"] == "paired_t" and arm["verdict"] == "improves"


@pytest.mark.slow
def test_a_record_carries_its_final_evaluation_per_prompt(smoke_sweep):
    from grpo_ablate.records import scan_records

    _, out = smoke_sweep
    records, _ = scan_records(out / "smoke")
    ids = {tuple(r.prompts["ids"]) for r in records}
    assert len(records) == 6 and len(ids) == 1 and len(next(iter(ids))) == 200
    for r in records:
        p = r.prompts
        assert np.mean(p["greedy"]) == pytest.approx(r.metrics["eval/accuracy"], abs=1e-12)
        assert np.mean(p["sampled"]) == pytest.approx(r.metrics["eval/sampled_accuracy"],
                                                      abs=1e-12)
        assert np.mean(p["reward"]) == pytest.approx(r.metrics["eval/reward_mean"], abs=1e-12)


def test_the_adaptive_looks_use_the_scope_their_plan_declares(tmp_path):
    """The same records: under a seeds-only plan look 1 calls the arm an improvement (its
    sample effect on these prompts is clear); under the task scope the prompt component
    leaves it open or stops it for futility, never an improvement."""
    from grpo_ablate.results.table import load_results
    from grpo_ablate.stats.ladder_replay import replay_ladder
    from grpo_ablate.stats.sequential import Design
    from grpo_ablate.stats.stratum import Stratum

    csv = tmp_path / "long.csv"
    long_csv(csv, shift=0.05)
    df, _, prompts = load_results(csv, with_prompts=True)
    st = Stratum(df, "baseline", ["eval/accuracy"])
    settled = {}
    for scope in ("prompts", "task"):
        ladder, _ = replay_ladder(st, Design(rungs=(4, 8), arms=("x",), scope=scope), "higher",
                                  prompts)
        settled[scope] = {a: (got.look, got.verdict) for a, got in ladder.settled.items()}
    assert settled["prompts"] == {"x": (1, "improves")}
    assert settled["task"].get("x", (None, "open"))[1] in ("inconclusive", "open")


def open_entry(table: np.ndarray, min_effect: float = 0.5) -> dict:
    """An arm's report entry, as decide makes it, for a crossed difference table."""
    from grpo_ablate.stats.metric_table import variance_entry

    x = crossed_test(table, min_effect)
    return {"arm": "x", "verdict": "inconclusive", "test": "crossed_t", "n": table.shape[0],
            "diff": x.diff, "diff_sd": float(np.std(table.mean(axis=1), ddof=1)),
            "ci_low": x.ci_low, "ci_high": x.ci_high, "variance": variance_entry(x, "task")}


def test_an_open_arm_under_an_adaptive_plan_names_both_routes_at_its_next_look_and_prices_them():
    """Seeds: the first later rung whose seeds reach the boundary's precision at these
    prompts; prompts: what reaches the next look's precision at that look's seeds. Each
    route is priced from the runs' seconds: a seed is two runs, more prompts every run of
    the pair again with the larger held-out set."""
    from grpo_ablate.stats.crossed import Components, prompts_for, target_se
    from grpo_ablate.stats.sequential import Design
    from grpo_ablate.stats.waiting import RunCosts, waiting_on

    rng = np.random.default_rng(11)
    table = (0.03 + rng.normal(0, 0.02, (3, 1)) + rng.normal(0, 0.05, (1, 30))
             + rng.normal(0, 0.05, (3, 30)))
    entry = open_entry(table, min_effect=0.01)  # |diff| 0.04 > min-effect: not equivalence
    design = Design(rungs=(3, 6, 10), arms=("x", "y"), alpha=0.05)
    costs = RunCosts(run_seconds=100.0, prompt_seconds=0.5)
    w = waiting_on(entry, 0.01, 0.05, 2, design, costs)
    assert w["on"] == "either"  # the routes to an effect's confirmation (or its absence)
    v = entry["variance"]
    parts = Components(v["seed"], v["prompt"], v["residual"], 3, 30, math.nan, math.nan,
                       math.nan)
    next_level = design.boundary_p(1, 0.05 / 2)
    goal = target_se(entry["diff"], next_level)
    assert w["prompts"] == prompts_for(parts, goal, 6) and w["more_prompts"] == w["prompts"] - 30
    assert parts.variance("task", seeds=6, prompts=w["prompts"]) <= goal ** 2
    assert parts.variance("task", seeds=6, prompts=w["prompts"] - 1) > goal ** 2
    assert f"+{w['more_prompts']} held-out prompts ({w['prompts']} in all at 6 seeds" in w["text"]
    assert w["seeds"] is not None and w["more_seeds"] == w["seeds"] - 3
    assert w["seeds_seconds"] == 2 * w["more_seeds"] * 100.0
    assert w["prompts_seconds"] == pytest.approx(2 * 6 * (100.0 + w["more_prompts"] * 0.5))
    assert w["cheaper"] == ("seeds" if w["seeds_seconds"] <= w["prompts_seconds"] else "prompts")
    # The same entry under a fixed-n sweep: the prompts at its own 3 seeds, at Holm's level.
    fixed = waiting_on(entry, 0.01, 0.05, 2, None, costs)
    assert fixed["prompts"] == prompts_for(parts, target_se(entry["diff"], 0.025), 3)
    assert "at Holm's level alpha/2" in fixed["text"] and " at 3 seeds" not in fixed["text"]
    assert waiting_on(entry, 0.01, 0.05, 2, None, None)["seeds_seconds"] is None


def test_the_routes_are_priced_from_the_pair_of_arms_runs():
    """run_costs: the mean wall seconds of the arm's and its baseline's usable runs, and a
    held-out prompt's share of their evaluation seconds; another arm's runs do not count."""
    from grpo_ablate.stats.stratum import Stratum
    from grpo_ablate.stats.waiting import run_costs

    rows = [{"arm": a, "seed": s, "model": "m", "task": "t", "status": status,
             "eval/accuracy": 0.5, "wall_seconds": wall, "budget/eval_seconds": ev}
            for a, s, status, wall, ev in [
                ("baseline", 0, "completed", 100.0, 20.0), ("baseline", 1, "completed", 120.0, 24.0),
                ("x", 0, "completed", 140.0, 28.0), ("x", 1, "failed", 9999.0, 9999.0),
                ("y", 0, "completed", 5000.0, 1000.0), ("y", 1, "completed", 5000.0, 1000.0)]]
    st = Stratum(pd.DataFrame(rows), "baseline", ["eval/accuracy"])
    got = run_costs(st, "x", {"prompts": 8})
    assert got.run_seconds == pytest.approx(120.0)
    assert got.prompt_seconds == pytest.approx(24.0 / 8)
    assert run_costs(st, "x", None).prompt_seconds is None


def test_when_neither_route_alone_can_settle_an_arm_the_two_together_are_named():
    """Seed and prompt components both above what 80% power needs: no number of seeds at
    these prompts, nor of prompts at these seeds, reaches it; a pair of both does, and it is
    the cheapest of the pairs tried."""
    from grpo_ablate.stats.crossed import Components, target_se
    from grpo_ablate.stats.waiting import RunCosts, waiting_on

    rng = np.random.default_rng(2)
    table = (0.05 + rng.normal(0, 0.12, (3, 1)) + rng.normal(0, 0.2, (1, 20))
             + rng.normal(0, 0.05, (3, 20)))
    entry = open_entry(table, min_effect=0.01)
    w = waiting_on(entry, 0.01, 0.05, 1, None, RunCosts(run_seconds=60.0, prompt_seconds=0.2))
    assert w["seeds"] is None and w["prompts"] is None, w["text"]
    b = w["both"]
    v = entry["variance"]
    parts = Components(v["seed"], v["prompt"], v["residual"], 3, 20, math.nan, math.nan, math.nan)
    goal = target_se(entry["diff"], 0.05)
    assert parts.variance("task", seeds=b["seeds"], prompts=b["prompts"]) <= goal ** 2
    assert b["seconds"] == pytest.approx(2 * b["seeds"] * (60.0 + (b["prompts"] - 20) * 0.2))
    assert f"neither alone: +{b['more_seeds']} seeds and +{b['more_prompts']} held-out prompts" \
        in w["text"]
    # Against the closed form: at S seeds the fewest prompts are
    # ceil((residual / S + prompt) / (goal^2 - seed / S)); the cheapest S by brute force.
    def price(seeds: int, prompts: int) -> float:
        return 2 * seeds * (60.0 + (prompts - 20) * 0.2)

    best = min(price(n, math.ceil((parts.residual / n + parts.prompt)
                                  / (goal ** 2 - parts.seed / n)))
               for n in range(4, 2000) if goal ** 2 > parts.seed / n)
    assert best <= b["seconds"] <= 1.02 * best


def test_a_prompts_route_beyond_what_the_task_holds_is_not_offered():
    """The same open arm: with a pool above the prompts it needs, the route stands; with a
    smaller pool it says how many would be needed and how many the task holds."""
    from grpo_ablate.stats.waiting import RunCosts, waiting_on

    rng = np.random.default_rng(11)
    table = (0.03 + rng.normal(0, 0.02, (3, 1)) + rng.normal(0, 0.05, (1, 30))
             + rng.normal(0, 0.05, (3, 30)))
    entry = open_entry(table, min_effect=0.01)  # |diff| 0.04 > min-effect: not equivalence
    free = waiting_on(entry, 0.01, 0.05, 8, None, RunCosts(100.0, 0.5))
    needed = free["prompts"]
    assert needed is not None and needed > 31
    held = waiting_on(entry, 0.01, 0.05, 8, None, RunCosts(100.0, 0.5, prompt_pool=needed))
    assert held["prompts"] == needed
    short = waiting_on(entry, 0.01, 0.05, 8, None, RunCosts(100.0, 0.5, prompt_pool=needed - 1))
    assert short["prompts"] is None and short["more_prompts"] is None
    assert f"not more prompts: {needed} would be needed, the task holds {needed - 1}" in short["text"]
    assert short["seeds"] == free["seeds"]


def long_rows(seeds: int = 4, prompts: int = 12) -> list[dict]:
    """A small long table: the arm 0.05 above the baseline on every prompt, some noise."""
    rng = np.random.default_rng(11)
    return [{"arm": arm, "seed": s, "prompt": f"q{j}", "status": "completed",
             "eval/accuracy": 0.5 + 0.02 * (j % 5) + (0.05 if arm == "x" else 0.0)
             + rng.normal(0, 0.03)}
            for arm in ("baseline", "x") for s in range(seeds) for j in range(prompts)]


def report_rows(tmp_path, capsys, rows):
    csv = tmp_path / "long.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    code = main(["report", str(csv), "--no-figures", "--out", str(tmp_path / "out"),
                 *MATCHED_SAMPLE])
    err = capsys.readouterr().err
    if code != 0:
        return code, err, None, None
    out = tmp_path / "out"
    return code, err, json.loads((out / "report.json").read_text()), (out / "report.md").read_text()


def test_a_non_finite_per_prompt_cell_is_missing_with_a_note(tmp_path, capsys):
    rows = long_rows()
    rows[5]["eval/accuracy"] = float("inf")
    code, err, rep, md = report_rows(tmp_path, capsys, rows)
    assert code == 0, err
    (arm,) = rep["strata"][0]["arms"]
    assert arm["test"] == "crossed_t" and arm["variance"]["prompts"] == 11  # q5 left out
    assert "1 non-finite per-prompt value" in md


def test_a_failed_runs_prompts_stay_out_of_the_crossed_table(tmp_path, capsys):
    rows = long_rows()
    for row in rows:
        if row["arm"] == "x" and row["seed"] == 3:
            row["status"] = "failed"
    code, err, rep, _ = report_rows(tmp_path, capsys, rows)
    assert code == 0, err
    (arm,) = rep["strata"][0]["arms"]
    assert arm["n"] == 3 and arm["variance"]["seeds"] == 3


def test_conflicting_duplicate_prompt_rows_are_refused_in_one_line(tmp_path, capsys):
    rows = long_rows()
    rows.append({**rows[7], "eval/accuracy": rows[7]["eval/accuracy"] + 0.5})
    code, err, _, _ = report_rows(tmp_path, capsys, rows)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "duplicate per-prompt rows with different results: arm=baseline seed=0 prompt=q7" \
        in lines[0]
    rows = long_rows()
    rows.append(dict(rows[7]))  # an exact copy: kept once, with a note
    code, err, rep, md = report_rows(tmp_path, capsys, rows)
    assert code == 0, err
    (arm,) = rep["strata"][0]["arms"]
    assert arm["variance"]["prompts"] == 12 and "exact duplicate per-prompt row" in md


def test_an_arm_that_is_the_baseline_plus_a_constant_is_not_tested_in_either_scope(
        tmp_path, capsys):
    """Every cell 0.03 above the baseline's, up to the rounding of decimals: no spread, so the
    task scope says what the prompts scope says (zero variance, not tested), with one note."""
    rows = long_rows()
    base = {(r["seed"], r["prompt"]): round(r["eval/accuracy"], 2) for r in rows
            if r["arm"] == "baseline"}
    for r in rows:
        r["eval/accuracy"] = base[r["seed"], r["prompt"]] + (0.03 if r["arm"] == "x" else 0.0)
    verdicts = []
    for scope in ("task", "prompts"):
        csv = tmp_path / "shift.csv"
        pd.DataFrame(rows).to_csv(csv, index=False)
        out = tmp_path / scope
        assert main(["report", str(csv), "--no-figures", "--out", str(out), *MATCHED_SAMPLE,
                     "--scope", scope]) == 0
        capsys.readouterr()
        (arm,) = json.loads((out / "report.json").read_text())["strata"][0]["arms"]
        verdicts.append((arm["verdict"], arm["test"], arm["p_value"]))
        assert sum("zero variance" in n for n in arm["notes"]) == 1, arm["notes"]
    assert verdicts[0] == verdicts[1] and verdicts[0][0] != "improves" and verdicts[0][2] is None


def test_with_too_few_shared_seeds_the_note_names_the_crossed_test_it_ran(tmp_path, capsys):
    rows = [r for r in long_rows(seeds=6) if not (r["arm"] == "x" and r["seed"] < 2)
            and not (r["arm"] == "baseline" and r["seed"] > 3)]  # shared: seeds 2 and 3
    code, err, rep, _ = report_rows(tmp_path, capsys, rows)
    assert code == 0, err
    (arm,) = rep["strata"][0]["arms"]
    assert arm["test"] == "crossed_t" and arm["variance"]["seeds"] == 2
    assert not any("Welch's t-test on all runs" in n for n in arm["notes"]), arm["notes"]
    assert not any("partially overlapping" in n for n in arm["notes"]), arm["notes"]
    assert any("the crossed test pairs the 2 seeds both arms have" in n for n in arm["notes"])


def test_prompts_missing_from_a_run_are_counted_in_a_note(tmp_path, capsys):
    rows = [r for r in long_rows() if not (r["arm"] == "x" and r["seed"] == 1
                                           and r["prompt"] in ("q0", "q1", "q2"))]
    code, err, rep, _ = report_rows(tmp_path, capsys, rows)
    assert code == 0, err
    (arm,) = rep["strata"][0]["arms"]
    assert arm["variance"]["prompts"] == 9 and arm["variance"]["dropped_prompts"] == 3
    assert any(n.startswith("3 held-out prompt(s) left out of the crossed test") for n in arm["notes"])


def test_a_seed_component_below_zero_is_said_and_the_parts_add_up_to_the_se():
    from grpo_ablate.stats.metric_table import variance_entry

    rng = np.random.default_rng(3)
    for _ in range(50):  # no seed effect, large cell noise: MS_seed < MS_residual by chance
        table = rng.normal(0, 0.1, (1, 20)) + rng.normal(0, 0.3, (4, 20))
        x = crossed_test(table, 0.01)
        if x.parts.ms_seed < x.parts.ms_residual and x.parts.prompt > 0:
            break
    else:
        pytest.fail("no table with a truncated seed component")
    v = variance_entry(x, "task")
    assert v["seed"] == 0 and "below zero" in v["note"]
    assert x.parts.variance("task") == pytest.approx(v["se_task_scope"] ** 2)  # the parts add up
    assert v["prompt_share"] == pytest.approx(v["prompt"] / v["prompts"] / v["se_task_scope"] ** 2)


def test_at_the_seed_components_boundary_the_task_se_is_statsmodels_reml():
    """The boundary (a seed component estimated at or below 0): REML, fit by Nelder-Mead and
    by Powell (statsmodels' default optimizer stops short there), gives the task scope's SE."""
    smf = pytest.importorskip("statsmodels.formula.api")
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(200):
        d = 0.02 + rng.normal(0, 0.1, (1, 20)) + rng.normal(0, 0.3, (4, 20))
        parts = components(d)
        if not (parts.ms_seed < parts.ms_residual and parts.prompt > 0):
            continue
        s, p = d.shape
        rows = pd.DataFrame([(i, j, d[i, j]) for i in range(s) for j in range(p)],
                            columns=["seed", "prompt", "d"]).assign(group=1)
        for method in ("nm", "powell"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = smf.mixedlm("d ~ 1", rows, groups="group", re_formula="0",
                                  vc_formula={"seed": "0 + C(seed)", "prompt": "0 + C(prompt)"}
                                  ).fit(reml=True, method=method)
            assert crossed_test(d, 0.01, "task").se == pytest.approx(fit.bse["Intercept"],
                                                                     rel=1e-3)
        checked += 1
        if checked == 3:
            break
    assert checked == 3
