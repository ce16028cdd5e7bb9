"""The adaptive seed ladder: boundaries against published O'Brien-Fleming tables and an
independent Monte-Carlo, the look rules one at a time, the family-wise error rate of the
whole procedure, and a real adaptive sweep killed and resumed from the records on disk."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from grpo_ablate import cli, command_line
from grpo_ablate.config import specs_for
from grpo_ablate.errors import UserError
from grpo_ablate.records import read_record, write_record
from grpo_ablate.results import plan_file as adaptive_plan
from grpo_ablate.stats.sequential import (
    Design,
    Ladder,
    efficacy_bounds,
    nominal_p,
    obf_spent,
    take_look,
)
from grpo_ablate.stats.significance import Comparison, paired_compare
from grpo_ablate.training.outcome import make_record

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
for var in ("GRPO_ABLATE_PAUSE_AT", "GRPO_ABLATE_PAUSE_MARKER"):
    ENV.pop(var, None)


# ---------------------------------------------------------------------------- boundaries
@pytest.mark.parametrize("looks, published", [
    # Lan-DeMets O'Brien-Fleming-type spending, equally spaced looks, two-sided alpha 0.05
    # (e.g. gsDesign's sfLDOF; Jennison & Turnbull 2000, table 7.6 ff.).
    (5, (4.877, 3.357, 2.680, 2.290, 2.031)),
    (3, (3.710, 2.511, 1.993)),
])
def test_boundaries_match_the_published_obrien_fleming_table(looks, published):
    fractions = tuple((k + 1) / looks for k in range(looks))
    assert efficacy_bounds(fractions, 0.05) == pytest.approx(published, abs=0.0015)


def test_boundaries_spend_alpha_as_declared_by_independent_monte_carlo():
    """Brownian paths at the default ladder's fractions: the first crossing at each look
    happens with the probability the spending function assigns it, at a Holm level too."""
    design = Design()
    t = np.asarray(design.fractions)
    rng = np.random.default_rng(7)
    paths = np.cumsum(rng.normal(size=(1_000_000, len(t))) * np.sqrt(np.diff(t, prepend=0)), 1)
    z = np.abs(paths / np.sqrt(t))
    for level in (0.05, 0.2):
        c = np.asarray(efficacy_bounds(design.fractions, level))
        crossed = z >= c
        first = crossed & (np.cumsum(crossed, 1) == 1)
        spent = [obf_spent(x, level) for x in t]
        want = np.diff(spent, prepend=0)
        got = first.mean(0)
        se = np.sqrt(want * (1 - want) / len(z))
        assert np.all(np.abs(got - want) < 4 * se + 1e-6), (level, got, want)
        assert spent[-1] == pytest.approx(level)


def test_one_look_is_the_fixed_n_test():
    assert efficacy_bounds((1.0,), 0.05)[0] == pytest.approx(1.959964, abs=1e-5)


# ---------------------------------------------------------------------------- the look rules
def comp(p: float, diff: float = 0.05, tost: float = 0.9, exact: bool = False,
         sd: float = 0.01) -> Comparison:
    return Comparison("paired_t", 3, diff, diff - 0.01, diff + 0.01, p, 1.0, tost, sd,
                      exact=exact)


def test_holm_across_arms_frees_alpha_after_each_rejection():
    """At the last look, the boundary at alpha/2 is above one arm's p and below at alpha/1:
    it is rejected only because the other arm was rejected first (Holm's step-down)."""
    design = Design(rungs=(3,), arms=("a", "b"))
    at_half, at_full = design.boundary_p(0, 0.025), design.boundary_p(0, 0.05)
    p_b = (at_half + at_full) / 2
    ladder = take_look(Ladder(design, ["a", "b"]), {"a": comp(at_half / 10), "b": comp(p_b)})
    assert {a: s.reason for a, s in ladder.settled.items()} == {"a": "efficacy", "b": "efficacy"}
    # without a's rejection, b stays below significance
    ladder = take_look(Ladder(design, ["a", "b"]), {"a": comp(0.9, tost=0.9), "b": comp(p_b)})
    assert ladder.settled["b"].reason == "final"
    assert ladder.settled["b"].verdict == "inconclusive"


def test_early_look_uses_the_stricter_spending_boundary():
    design = Design(rungs=(3, 6, 10), arms=("a",))
    p = nominal_p(3.0)  # crosses 1.96 but not the first O'Brien-Fleming boundary (3.71 at 1/3)
    ladder = take_look(Ladder(design, ["a"]), {"a": comp(p)})
    assert "a" in ladder.open and ladder.looks_done == 1
    assert design.boundary_p(0, 0.05) < p < design.boundary_p(2, 0.05)


def test_futility_stops_a_flat_arm_and_spares_a_promising_one():
    design = Design(rungs=(3, 6, 10), arms=("flat", "promising"))
    ladder = take_look(Ladder(design, ["flat", "promising"]),
                       {"flat": comp(0.9, diff=0.001), "promising": comp(0.02)})
    assert ladder.settled["flat"].reason == "futility"
    assert ladder.settled["flat"].conditional_power < design.futility
    assert "promising" in ladder.open


def test_equivalence_and_identical_settle_as_no_effect_and_direction_sets_the_sign():
    design = Design(rungs=(3, 6), arms=("eq", "same", "worse"))
    ladder = take_look(Ladder(design, ["eq", "same", "worse"]), {
        "eq": comp(0.9, diff=0.0, tost=1e-9, sd=0.001),
        "same": comp(math.nan, diff=0.0, exact=True),
        "worse": comp(1e-12, diff=-0.2)})
    assert {a: (s.reason, s.verdict) for a, s in ladder.settled.items()} == {
        "eq": ("equivalence", "no_effect"), "same": ("identical", "no_effect"),
        "worse": ("efficacy", "harms")}
    lower = take_look(Ladder(design, ["worse"]), {"worse": comp(1e-12, diff=-0.2)}, "lower")
    assert lower.settled["worse"].verdict == "improves"


def test_an_equivalence_at_a_look_needs_what_its_row_will_show():
    """TOST under the boundary is not enough: the row's 95% CI must lie inside the margin and
    its MDE be at most it (the fixed-n rule); else the arm stays open for more seeds."""
    design = Design(rungs=(3, 6), arms=("wide", "noisy"))
    ladder = take_look(Ladder(design, ["wide", "noisy"]), {
        "wide": Comparison("paired_t", 3, 0.0, -0.02, 0.02, 0.9, 0.0, 1e-9, 0.001),
        "noisy": comp(0.9, diff=0.0, tost=1e-9, sd=0.01)})  # MDE about 0.07 > 0.01
    assert not any(s.verdict == "no_effect" for s in ladder.settled.values())
    eq = take_look(Ladder(design, ["eq"]), {"eq": comp(0.9, diff=0.0, tost=1e-9, sd=0.001)})
    assert eq.settled["eq"].reason == "equivalence"  # the same TOST with both shown: settled


def test_the_ladder_keeps_the_family_wise_error_rate_under_the_global_null():
    """Six null arms, matched seeds, 600 simulated sweeps: rejecting any arm is a family-wise
    error; the rate stays at alpha within Monte-Carlo error (peeking at p < 0.05 after every
    rung would give about 2-3x alpha)."""
    design = Design(arms=tuple("abcdef"))
    rng = np.random.default_rng(11)
    errors, naive = 0, 0
    for _ in range(600):
        seed_effect = rng.normal(0, 0.03, 10)
        base = seed_effect + rng.normal(0, 0.03, 10)
        arms = seed_effect + rng.normal(0, 0.03, (6, 10))
        ladder = Ladder(design, list(design.arms))
        for n in design.rungs:
            if ladder.finished:
                break
            take_look(ladder, {a: paired_compare(arms[i][:n], base[:n], 0.01, robust=False)
                               for i, a in enumerate(design.arms) if a in ladder.open})
        errors += any(s.reason == "efficacy" for s in ladder.settled.values())
        naive += any(min(paired_compare(arms[i][:n], base[:n], 0.01, robust=False).p_value
                         for n in design.rungs) < 0.05 / 6 for i in range(6))
    assert errors / 600 <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 600)
    assert naive > errors  # peeking at a fixed level is the mistake the ladder avoids


# ---------------------------------------------------------------------------- plan and CLI
def test_plan_is_fixed_once_declared(tmp_path):
    design = Design(rungs=(3, 6, 10), arms=("kl_off", "ema_0.9"))
    adaptive_plan.write_plan(tmp_path, design)
    plan = json.loads((tmp_path / adaptive_plan.PLAN_NAME).read_text())
    assert [r["seeds"] for r in plan["looks"]] == [3, 6, 10]
    assert sum(r["alpha_spent_this_look"] for r in plan["looks"]) == pytest.approx(0.025)
    assert adaptive_plan.read_plan(tmp_path) == design
    adaptive_plan.write_plan(tmp_path, design)  # the same plan again: fine
    with pytest.raises(UserError, match="declares rungs \\[3, 6, 10\\].*allowed: the declared"):
        adaptive_plan.write_plan(tmp_path, Design(rungs=(2, 4), arms=("kl_off", "ema_0.9")))


def test_adaptive_true_is_short_for_the_enabled_key():
    assert command_line.parse_hydra_line(["adaptive=true", "adaptive.rungs=[2,4]"]).overrides == \
        ["adaptive.enabled=true", "adaptive.rungs=[2,4]"]


@pytest.mark.parametrize("args, message", [
    (["adaptive.rungs=[3,2]"], "adaptive.rungs=[3, 2]: must be a list of increasing"),
    (["adaptive.futility=1.5"], "adaptive.futility=1.5: must be a conditional power"),
    (["adaptive=true", "trick=kl_off"], "which it does not run; allowed: add trick=...,baseline"),
])
def test_bad_adaptive_input_is_one_line_exit_2(tmp_path, capsys, args, message):
    assert cli.main(["sweep", "sweep=smoke", f"out_root={tmp_path}", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not list(tmp_path.rglob("*.json"))


# ---------------------------------------------------------------------------- end to end
ADAPTIVE = ["sweep=smoke", "trick=baseline,kl_off,lr_schedule_cosine", "adaptive=true",
            "adaptive.rungs=[2,3]", "adaptive.futility=0.0",  # no futility stop: two looks
            "trainer.max_steps=3", "eval.every_steps=0", "run_cache=null"]


def adaptive_sweep(out: Path, *extra: str, pause: str | None = None,
                   marker: Path | None = None) -> subprocess.Popen:
    env = dict(ENV)
    if pause:
        env.update(GRPO_ABLATE_PAUSE_AT=pause, GRPO_ABLATE_PAUSE_MARKER=str(marker))
    return subprocess.Popen([sys.executable, "-m", "grpo_ablate.cli", "sweep", *ADAPTIVE,
                             f"out_root={out}", *extra], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def adaptive_part(sweep: Path) -> dict:
    rep = json.loads((sweep / "report.json").read_text())
    (st,) = rep["strata"]
    return {"plan": st["adaptive"], "arms": {a["arm"]: (a["verdict"], a["adaptive"])
                                             for a in st["arms"]}}


# Look 1 is planted: records of seeds 0 and 1 whose accuracies leave both arms open by
# construction, on any CPU (kl_off: differences +0.05 and -0.02, p 0.74; lr_schedule_cosine: -0.10 and
# -0.11, p 0.03: neither crosses look 1's boundary p 0.0044, neither is equivalent within
# 0.01 at 2 seeds). Look 2 (seed 2) is trained for real. Real training decides look 2 only,
# and the test compares it between the killed sweep and a clean one, never with a fixed outcome.
PLANTED = {("baseline", 0): 0.50, ("baseline", 1): 0.52, ("kl_off", 0): 0.55,
           ("kl_off", 1): 0.50, ("lr_schedule_cosine", 0): 0.40, ("lr_schedule_cosine", 1): 0.41}
ONE_RUN = [a.replace("adaptive=true", "adaptive.enabled=true") for a in ADAPTIVE
           if not a.startswith("trick=")]


def plant_look_one(out: Path) -> None:
    for (arm, seed), accuracy in PLANTED.items():
        (spec,) = specs_for([*ONE_RUN, f"trick={arm}", f"seed={seed}", f"out_root={out}"],
                            multirun=False)
        write_record(spec.run_dir, make_record(spec, "completed", None, 0.0,
                                               metrics={"eval/accuracy": accuracy}), [])


def test_a_fixed_and_an_adaptive_sweep_of_one_recipe_report_together(tmp_path, capsys):
    """The ladder decides which runs happen, not what a run computes: the baseline's runs of a
    fixed and an adaptive sweep of one recipe are the same runs (one run id, one computation
    key), so one report reads both folders (each run once, with a note), and the plan
    finds either as a cost reference."""
    from grpo_ablate.config import computation_key

    fixed_args = [a for a in ONE_RUN if not a.startswith("adaptive")]
    for folder, args in (("fixed", fixed_args), ("adaptive", ONE_RUN)):
        for (arm, seed), accuracy in PLANTED.items():
            (spec,) = specs_for([*args, f"trick={arm}", f"seed={seed}",
                                 f"out_root={tmp_path / folder}"], multirun=False)
            write_record(spec.run_dir, make_record(spec, "completed", None, 0.0,
                                                   metrics={"eval/accuracy": accuracy}), [])
    (fixed,) = specs_for([*fixed_args, "trick=baseline", "seed=0"], multirun=False)
    (adaptive,) = specs_for([*ONE_RUN, "trick=baseline", "seed=0"], multirun=False)
    assert fixed.config["adaptive"] != adaptive.config["adaptive"]
    assert fixed.run_id == adaptive.run_id
    assert computation_key(fixed.config) == computation_key(adaptive.config)
    assert cli.main(["report", str(tmp_path / "fixed" / "smoke"), str(tmp_path / "adaptive" / "smoke"),
                     "--no-figures", "--out", str(tmp_path / "both")]) == 0
    report = json.loads((tmp_path / "both" / "report.json").read_text())
    (stratum,) = report["strata"]
    assert {a["arm"]: a["n"] for a in stratum["arms"]} == {"kl_off": 2, "lr_schedule_cosine": 2}


def wait_for(marker: Path, proc: subprocess.Popen) -> None:
    deadline = time.time() + 600
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.time() < deadline
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    marker.unlink()


@pytest.mark.slow
def test_killed_adaptive_sweep_resumes_from_the_records(tmp_path, tiny_policy, capfd):
    out, marker = tmp_path / "killed", tmp_path / "marker"
    sweep = out / "smoke"
    plant_look_one(out)
    planted = {p: p.read_bytes() for p in sweep.glob("runs/*/record.json")}
    assert len(planted) == 6
    wait_for(marker, adaptive_sweep(out, pause="model_load:2", marker=marker))  # mid look 2
    done_before = {p: p.read_bytes() for p in sweep.glob("runs/*/record.json")}
    assert len(done_before) == 7
    assert {p: done_before[p] for p in planted} == planted
    # The plan was declared before its first run began (the run's record, back by its wall
    # time) and not rewritten since.
    (first,) = set(done_before) - set(planted)
    started = first.stat().st_mtime - json.loads(first.read_text())["wall_seconds"]
    assert (sweep / adaptive_plan.PLAN_NAME).stat().st_mtime < started
    # The same command, never killed, in this process (its output read from the descriptors).
    capfd.readouterr()
    assert cli.main(["sweep", *ADAPTIVE, f"out_root={out}"]) == 0
    err = capfd.readouterr().err
    assert "adaptive look 2/2: 2 open arms + baseline, seeds < 3: 2 to train" in err
    assert {p: p.read_bytes() for p in done_before} == done_before  # not re-trained
    assert len(list(sweep.glob("runs/*/record.json"))) == 9
    # A run a look already used, recorded failed (as the Slurm launcher records a cancelled
    # job): the same command retries it, and the looks are replayed with it.
    decided = adaptive_part(sweep)
    (spec,) = specs_for([*ONE_RUN, "trick=baseline", "seed=2", f"out_root={out}"], multirun=False)
    write_record(spec.run_dir, make_record(spec, "failed", "Slurm job 7_0 ended CANCELLED", 0.0),
                 [])
    assert cli.main(["sweep", *ADAPTIVE, f"out_root={out}"]) == 0
    err = capfd.readouterr().err
    assert "retrying the failed runs of baseline, seeds [2]: 1 to train" in err
    assert read_record(spec.run_dir / "record.json").status == "completed"
    assert adaptive_part(sweep) == decided
    # A different plan for the same folder is refused, nothing trained.
    assert cli.main(["sweep", *ADAPTIVE, f"out_root={out}", "adaptive.rungs=[2,4]"]) == 2
    # The same sweep, never killed, as a plain Hydra app (its sweeper runs the ladder; the
    # ladder under a parallel launcher: tests/test_launch_launchers.py): the same plan, the same
    # looks, the same decisions.
    plant_look_one(tmp_path / "clean")
    hydra_args = [a.replace("adaptive=true", "adaptive.enabled=true") for a in ADAPTIVE]
    clean = subprocess.run([sys.executable, "-m", "grpo_ablate.app", "-m", *hydra_args,
                            f"out_root={tmp_path / 'clean'}"], env=ENV,
                           cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert clean.returncode == 0, clean.stderr[-2000:]
    assert "adaptive look 2/2" in clean.stderr and "\nreport: " in clean.stdout
    assert adaptive_part(sweep) == adaptive_part(tmp_path / "clean" / "smoke")
    part = adaptive_part(sweep)
    assert part["plan"]["runs_used"] == 9 and part["plan"]["runs_fixed_n"] == 9
    for _, settled in part["arms"].values():  # both open after look 1, so settled at look 2
        assert settled["look"] == 2 and settled["reason"] != "open"


def test_demo_runs_one_worker_per_core_unless_a_launcher_is_chosen():
    assert command_line.demo_launcher(["launcher=serial"]) == []
    expected = ["launcher=joblib"] if (os.cpu_count() or 1) > 1 else []
    assert command_line.demo_launcher([]) == expected
