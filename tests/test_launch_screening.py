"""Screening designs: the design pyDOE3 draws and its measured resolution and aliases, the
refusals before anything runs, the analysis on planted data, and (slow) a screening sweep on
the tiny policy that resumes after a kill and reuses the runs a one-at-a-time sweep made."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pyDOE3
import pytest

from grpo_ablate import cli
from grpo_ablate.config.fractional import alias_chains, draw, measured_resolution, with_baseline_point
from grpo_ablate.config.screening import Factor, design_record, write_design
from grpo_ablate.errors import UserError
from grpo_ablate.report.screening import screening_report
from grpo_ablate.stats.screening import MIN_RESIDUAL_DF

ROOT = Path(__file__).resolve().parent.parent
NAMES = [f"t{i}" for i in range(12)]


def factors(k: int) -> list[Factor]:
    return [Factor(name=n, family=n, settings={f"k{n}": 1}) for n in NAMES[:k]]


def pydoe_terms(design: np.ndarray) -> list[set[frozenset[int]]]:
    """pyDOE3's own alias map, each chain as its terms of order <= 2 (factor indices)."""
    alias_map, _ = pyDOE3.fracfact_aliasing(design)
    letters = "abcdefghijklmnopqrstuvwxyz"
    chains = []
    for line in alias_map:
        terms = {frozenset(letters.index(c) for c in w.strip()) for w in line.split("=")}
        short = {t for t in terms if len(t) <= 2}
        if short:
            chains.append(short)
    return chains


def pydoe_resolution(design: np.ndarray) -> int:
    alias_map, _ = pyDOE3.fracfact_aliasing(design)
    words = [len(set(a) ^ set(b)) for line in alias_map
             for a, b in combinations([w.strip() for w in line.split("=")], 2)]
    return min(words, default=99)


@pytest.mark.parametrize("k,resolution", [(5, 3), (6, 4), (7, 4), (9, 3), (10, 4), (12, 3),
                                          (12, 4), (6, 5)])
def test_the_measured_resolution_and_aliases_are_pyDOE3s_own(k, resolution):
    # pyDOE3's alias map reads a design as fracfact writes it (its own signs): compared there.
    raw = np.asarray(pyDOE3.fracfact_by_res(k, resolution), dtype=int)
    assert measured_resolution(raw) == min(pydoe_resolution(raw), 7)
    ours = {frozenset(frozenset(t) for t, _ in chain) for chain in alias_chains(raw)}
    assert ours == {frozenset(chain) for chain in pydoe_terms(raw)}
    # The design drawn has the baseline among its points: mirroring columns for it keeps the
    # resolution and which terms share a column.
    mirrored = with_baseline_point(raw)
    assert (mirrored == -1).all(axis=1).any()
    assert measured_resolution(mirrored) == measured_resolution(raw)
    assert {frozenset(frozenset(t) for t, _ in c) for c in alias_chains(mirrored)} == ours
    design, measured, how = draw(k, resolution)
    assert measured >= resolution and (design == -1).all(axis=1).any(), how


def test_pydoe3s_resolution_v_request_beyond_six_factors_is_measured_not_trusted():
    # fracfact_by_res(12, 5) gives a resolution IV design: draw says so instead of using it.
    assert measured_resolution(np.asarray(pyDOE3.fracfact_by_res(12, 5))) == 4
    with pytest.raises(UserError, match="resolution=5: no design of 12 factors"):
        draw(12, 5)
    design, measured, how = draw(8, 5)
    assert (len(design), measured) == (64, 5) and "fracfact_opt" in how


def test_runs_pick_the_highest_resolution_that_fits():
    assert draw(6, points=32)[1] == 6 and draw(6, points=16)[1] == 4
    with pytest.raises(UserError, match="runs=8: the smallest design of 12 factors has 16"):
        draw(12, points=8)


@pytest.mark.parametrize("args,message", [
    (["factors=[temperature_0.6,temperature_1.2,kl_off]"],
     "temperature_0.6 and temperature_1.2 are arms of one family (temperature)"),
    (["factors=[ratio_clip_high_0.28,kl_off,ema_0.9]"],
     "ratio_clip_high_0.28 acts only beside reuse_2x"),
    (["factors=[kl_off,ema_0.9]"], "a screening design needs at least 3 factors"),
    (["factors=[adv_passk_4,filter_low_reward_all,kl_off]"],
     "adv_passk_4 and filter_low_reward_all cannot run together: hooks.filter_low_reward"),
    (["factors=[kl_off,ema_0.9,nope]"], "factors: nope: no such trick file"),
    (["factors=[kl_off,kl_off,ema_0.9]"], "allowed: different tricks, each once"),
    (["factors=[kl_off,ema_0.9,grad_norm_off]", "adaptive=true", "adaptive.rungs=[1,2]"],
     "adaptive.rungs=[1, 2]: must be a list of increasing integers >= 2"),
    (["resolution=5"], "resolution=5: no design of 12 factors"),
    (["runs=8"], "runs=8: the smallest design of 12 factors has 16 runs"),
    (["trick=kl_off"], "trick=: a screening sweep sets each run's tricks"),
    (["design=mixture", "factors=[kl_off,ema_0.9,grad_norm_off]"], "design=mixture: allowed"),
])
def test_an_impossible_screening_is_one_line_exit_2_before_anything_is_written(
        tmp_path, capsys, args, message):
    with contextlib.chdir(ROOT):
        code = cli.main(["sweep", "sweep=screening", f"out_root={tmp_path}", *args])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not list(tmp_path.iterdir())


def test_a_nested_trick_beside_the_one_it_needs_is_its_own_arm(tmp_path):
    from grpo_ablate.launch.screening import screening_sweep

    with contextlib.chdir(ROOT):
        overrides, conf = screening_sweep(
            ["sweep=screening", "factors=[reuse_2x,ratio_clip_high_0.28,kl_off]",
             f"out_root={tmp_path}"], [])
    design = json.loads((tmp_path / "screening" / "design.json").read_text())
    assert design["factors"][1] == {"name": "ratio_clip_high_0.28", "family": "ratio_clip",
                                    "needs": "reuse_2x", "keys": ["trainer.epsilon_high"]}
    row = design["points"].index("ratio_clip_high_0.28")  # reuse on, clip on, kl off
    assert design["design"][row] == [1, 1, -1]
    alone = design["points"][design["design"].index([-1, 1, -1])]  # the clip without reuse
    text = (conf / "trick" / f"{alone}.yaml").read_text()
    assert "epsilon_high: 0.28" in text and "num_iterations" not in text
    assert overrides[-1].startswith("trick=baseline,")


def test_a_sweep_folder_holds_one_design(tmp_path):
    fs = factors(4)
    first = design_record(fs, draw(4)[0], 4, "how")
    write_design(tmp_path, first, fs)
    write_design(tmp_path, first, fs)  # a resumed sweep finds its own
    other = factors(5)
    with pytest.raises(UserError, match="this sweep folder holds another design"):
        write_design(tmp_path, design_record(other, draw(5)[0], 5, "how"), other)


def planted(design: dict, replicates: int, effect, rng, noise: float = 1.0) -> pd.DataFrame:
    levels = np.asarray(design["design"])
    rows = []
    for seed in range(replicates):
        y = effect(levels) + rng.normal(0, 0.5) + rng.normal(0, noise, len(levels))
        rows += [{"arm": p, "seed": seed, "status": "completed", "score": float(v)}
                 for p, v in zip(design["points"], y, strict=True)]
    return pd.DataFrame(rows)


def test_planted_main_effects_and_an_interaction_get_their_verdicts():
    rng = np.random.default_rng(3)
    matrix, res, how = draw(12, 4)
    design = design_record(factors(12), matrix, res, how)
    df = planted(design, 2, lambda x: 1.5 * x[:, 0] - 1.5 * x[:, 1] + 1.5 * x[:, 2] * x[:, 3],
                 rng, noise=0.5)
    rep = screening_report(df, design, "score", 0.05, 0.1, None, "higher")
    by = {r["name"].split(" = ")[0]: r for r in rep["effects"]}
    assert rep["error"] == "ols" and rep["residual_df"] == 64 - 2 - len(rep["effects"])
    assert by["t0"]["verdict"] == "improves" and abs(by["t0"]["effect"] - 3.0) < 0.5
    assert by["t1"]["verdict"] == "harms"
    chain = next(r for r in rep["effects"] if "t2 x t3" in r["name"])
    assert chain["verdict"] == "interacts" and abs(chain["effect"] - 3.0) < 0.5
    called = [r["name"] for r in rep["effects"] if r["verdict"] in ("improves", "harms",
                                                                     "interacts", "aliased")]
    assert len(called) == 3, called


def test_a_resolution_iii_main_effect_that_carries_an_interaction_is_called_aliased():
    rng = np.random.default_rng(4)
    matrix, res, how = draw(12, 3)
    design = design_record(factors(12), matrix, res, how)
    chain = next(c for c in design["chains"] if len(c[0]["term"]) == 1 and len(c) > 1)
    main, (a, b) = chain[0]["term"][0], chain[1]["term"]
    ia, ib = NAMES.index(a), NAMES.index(b)
    df = planted(design, 2, lambda x: 2.0 * x[:, ia] * x[:, ib], rng, noise=0.3)
    rep = screening_report(df, design, "score", 0.05, 0.1, None, "higher")
    row = next(r for r in rep["effects"] if r["name"].split(" = ")[0] == main)
    assert row["verdict"] == "aliased" and f"{a} x {b}" in row["name"]
    assert "fold-over" in row["waiting_on"]


def test_one_replicate_falls_back_to_lenth_and_identical_replicates_test_nothing():
    rng = np.random.default_rng(5)
    matrix, res, how = draw(7, 3)  # 7 factors in a handful of points: too few residual df
    small = design_record(factors(7), matrix, res, how)
    df = planted(small, 1, lambda x: 3.0 * x[:, 0], rng, noise=0.3)
    rep = screening_report(df, small, "score", 0.05, 0.1, None, "higher")
    assert rep["error"] == "lenth" and rep["residual_df"] < MIN_RESIDUAL_DF
    assert rep["contrasts"] == len(small["points"]) - 1  # every contrast, not the modelled
    assert rep["effects"][0]["verdict"] in ("improves", "aliased")
    matrix, res, how = draw(12, 4)
    design = design_record(factors(12), matrix, res, how)
    df = planted(design, 1, lambda x: 3.0 * x[:, 0], rng, noise=0.5)
    rep = screening_report(df, design, "score", 0.05, 0.1, None, "higher")
    assert rep["error"] == "ols" and rep["residual_df"] >= MIN_RESIDUAL_DF
    assert rep["effects"][0]["verdict"] == "improves"
    same = planted(design, 1, lambda x: 0.01 * x[:, 0], rng, noise=0.0)
    twice = pd.concat([same, same.assign(seed=1, score=same["score"] + 0.2)])
    rep = screening_report(twice, design, "score", 0.05, 0.1, None, "higher")
    assert rep["error"] == "none"
    assert rep["effects"][0]["verdict"] == "inconclusive"
    assert all(r["verdict"] == "no_effect" for r in rep["effects"][1:])


# ---------------------------------------------------------------------------- on the tiny policy
SCREEN = ["sweep=screening", "factors=[kl_off,reward_clamp_task,ema_0.9]", "trainer.max_steps=4",
          "eval.every_steps=2"]


# Adaptive: replicates at looks of 2 -> 3 seeds; a margin of 1.0 (all of accuracy) plants
# the premise that every effect is shown to be within it at the first look, wherever the
# replicates give an error at all.
ADAPTIVE = ["adaptive=true", "adaptive.rungs=[2,3]", "adaptive.min_effect=1.0"]


def records(sweep: Path) -> dict[str, bytes]:
    return {p.parent.name: p.read_bytes() for p in sorted(sweep.glob("runs/*/record.json"))}


@pytest.mark.slow
def test_a_killed_adaptive_screening_resumes_stops_at_its_look_and_shares_ovat_runs(
        tmp_path, smoke_sweep):
    _, smoke_out = smoke_sweep
    out = tmp_path / "out"
    shutil.copytree(smoke_out, out)  # its run cache holds baseline, kl_off, reward_clamp_task
    marker = tmp_path / "marker"
    env = {**os.environ, "WANDB_MODE": "offline", "GRPO_ABLATE_PAUSE_AT": "mid_training:2",
           "GRPO_ABLATE_PAUSE_MARKER": str(marker)}
    proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate.cli", "sweep", *SCREEN,
                             *ADAPTIVE, f"out_root={out}"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while not marker.exists():
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    sweep = out / "screening"
    before = records(sweep)
    design = json.loads((sweep / "design.json").read_text())
    assert len(design["points"]) == 8 and design["resolution"] >= 4  # 2^3, every point
    assert 2 <= len(before) < 16  # a shared point from the cache, or one trained, at least
    assert (sweep / "adaptive_plan.json").is_file()  # declared before the first run
    with contextlib.chdir(ROOT):
        assert cli.main(["sweep", *SCREEN, *ADAPTIVE, f"out_root={out}"]) == 0
    after = records(sweep)
    assert len(after) == 16 and {k: after[k] for k in before} == before
    smoke = {(json.loads(b)["arm"], json.loads(b)["seed"]): json.loads(b)["metrics"]
             for b in records(out / "smoke").values()}
    mine = {(json.loads(b)["arm"], json.loads(b)["seed"]): json.loads(b)["metrics"]
            for b in after.values()}
    assert all(mine[key] == metrics for key, metrics in smoke.items())  # one run, shared
    report = json.loads((sweep / "report.json").read_text())
    assert report["kind"] == "screening" and report["runs_used"] == 16
    assert report["error"] in ("ols", "lenth"), "premise: the replicates give an error"
    assert report["adaptive"]["finished"] and report["adaptive"]["looks_taken"] == 1
    assert all(r["look"] == 1 and r["reason"] in ("equivalence", "identical", "efficacy")
               for r in report["effects"])  # settled at the first look: no seed 2 trained
    assert {r["name"].split(" = ")[0] for r in report["effects"] if r["kind"] == "main"} \
        == {"kl_off", "reward_clamp_task", "ema_0.9"}
    assert (sweep / "figures" / "screening_pareto.png").is_file() or \
        all(r["se"] == 0 for r in report["effects"])
    # The W&B summary run: the effects and design tables, and the figures drawn.
    from wandb_files import read_run

    with contextlib.chdir(ROOT):
        assert cli.main(["report", str(sweep), "--wandb", "offline"]) == 0
    (file,) = sorted((sweep / "wandb").glob("offline-run-*/run-*.wandb"))
    (row,) = read_run(file)["history"]
    assert row["effects/nrows"] == len(report["effects"]) and row["design/nrows"] == 8
    drawn = {p.stem for p in (sweep / "figures").glob("screening_*.png")}
    assert {k.split("/")[1] for k in row if k.startswith("figures/")} == drawn
    spec = (sweep / "wandb_report.json").read_text()  # the W&B report: the same panels
    assert '"effects"' in spec and '"design"' in spec
    assert all(f"figures/{name}" in spec for name in drawn)
    # confirm PATH: the recipe a screening recommends, against its baseline. The premise
    # planted: ema_0.9 kept (four steps of the tiny policy decide nothing).
    report["strata"][0]["recipe"] = {"keep": ["ema_0.9"], "safe_to_drop": []}
    (sweep / "report.json").write_text(json.dumps(report))
    with contextlib.chdir(ROOT):
        assert cli.main(["confirm", str(sweep)]) == 0
    confirmed = records(sweep / "confirm")
    arms = sorted(json.loads(b)["arm"] for b in confirmed.values())
    assert arms == ["baseline", "baseline", "recipe_screening", "recipe_screening"]
    assert not (sweep / "confirm" / "design.json").exists()


def test_a_fold_over_adds_the_mirror_image_and_separates_the_aliases(tmp_path):
    from grpo_ablate.launch.screening import screening_sweep

    line = ["sweep=screening", "factors=[kl_off,ema_0.9,grad_norm_off,temperature_0.6,"
            "group_size_8]", "resolution=3", f"out_root={tmp_path}"]
    with contextlib.chdir(ROOT):
        first, _ = screening_sweep(line, [])
        folded, _ = screening_sweep([*line[:1], line[-1], "design=foldover"], [])
        with pytest.raises(UserError, match="folded over already"):
            screening_sweep([*line[:1], line[-1], "design=foldover"], [])
        with pytest.raises(UserError, match="design is folded over; allowed: design=foldover"):
            screening_sweep(line, [])
    design = json.loads((tmp_path / "screening" / "design.json").read_text())
    assert len(design["design"]) == 16 and design["fractions"] == [0] * 8 + [1] * 8
    assert design["resolution"] >= 4 and set(first[-1].split(",")) < set(folded[-1].split(","))
    assert all(len(c) == 1 for c in design["chains"] if len(c[0]["term"]) == 1)
    # On planted data: the interaction the first fraction put on a main's column is its own.
    rng = np.random.default_rng(6)
    names = [f["name"] for f in design["factors"]]
    levels = np.asarray(design["design"])
    rows = []
    for seed in range(2):
        y = 2.0 * levels[:, 0] * levels[:, 1] + rng.normal(0, 0.3, len(levels))
        rows += [{"arm": p, "seed": seed, "status": "completed", "score": float(v)}
                 for p, v in zip(design["points"], y, strict=True)]
    rep = screening_report(pd.DataFrame(rows), design, "score", 0.05, 0.1, None, "higher")
    called = [r["name"] for r in rep["effects"] if r["verdict"] not in ("inconclusive",
                                                                       "no_effect")]
    assert len(called) == 1 and f"{names[0]} x {names[1]}" in called[0], called


def test_a_screenings_recipe_keeps_what_improves_and_drops_what_does_nothing():
    from grpo_ablate.report.recipe import recipe_of

    names = ["kl_off", "ema_0.9", "grad_norm_off", "temperature_0.6", "group_size_8"]
    fs = [Factor(name=n, family=n, settings={}) for n in names]
    matrix, res, how = draw(5, 4)
    design = design_record(fs, matrix, res, how)
    rng = np.random.default_rng(7)
    df = planted(design, 3, lambda x: 0.5 * x[:, 1] - 0.5 * x[:, 3], rng, noise=0.01)
    rep = screening_report(df, design, "score", 0.05, 0.1, None, "higher")
    verdicts = {a["arm"]: a["verdict"] for a in rep["strata"][0]["arms"]}
    assert verdicts["ema_0.9"] == "improves" and verdicts["temperature_0.6"] == "harms"
    assert verdicts["kl_off"] == verdicts["grad_norm_off"] == "no_effect"
    recipe = recipe_of(rep, "recipe_screening")
    assert set(recipe.tricks) == {"ema_0.9", "kl_off", "grad_norm_off"}


def test_a_design_on_hydras_own_road_is_one_line_exit_2_before_anything_runs(tmp_path):
    """`python -m grpo_ablate.app -m sweep=<design>` cannot draw the design's arms: refused
    in one line, with or without the design's own keys, and nothing is written."""
    from grpo_ablate.launch.sweeper import DESIGN_SWEEPS

    env = {**os.environ, "WANDB_MODE": "offline"}
    for design, own in zip(DESIGN_SWEEPS, ("", "factors=[kl_off,grad_norm_off,ema_0.9]",
                                           "tricks=[kl_off,ema_0.9]", ""), strict=True):
        args = [f"sweep={design}", f"out_root={tmp_path}", "trainer.max_steps=1"] + \
            ([own] if own else [])
        got = subprocess.run([sys.executable, "-m", "grpo_ablate.app", "-m", *args], cwd=ROOT,
                             capture_output=True, text=True, env=env, timeout=120)
        assert got.returncode == 2, (design, got.stderr)
        lines = got.stderr.strip().splitlines()
        assert len(lines) == 1 and f"grpo-ablate sweep sweep={design}" in lines[0], lines
    assert not any(tmp_path.iterdir())
