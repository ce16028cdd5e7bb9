"""Runs that stop early (opt-in): where a run pauses, the looks re-taken from planted values
against the published O'Brien-Fleming boundaries, one-line refusals, and (slow) a real
early-stop sweep: its runs, paused and continued, are the runs a full-length sweep makes,
and a sweep killed mid-look resumes with nothing lost."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from test_launch_adaptive import wait_for

from grpo_ablate import cli, command_line
from grpo_ablate.config import specs_for
from grpo_ablate.config.early_stop import pause_step
from grpo_ablate.errors import UserError
from grpo_ablate.records import read_history, read_record
from grpo_ablate.results import early_stop as plan_file
from grpo_ablate.stats.early_stop import (
    LOOK_COLUMN,
    REACHED_COLUMN,
    TRAINED_COLUMN,
    StopPlan,
    replay_stops,
    steps_used,
    stop_columns,
)
from grpo_ablate.stats.stratum import Stratum

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
for var in ("GRPO_ABLATE_PAUSE_AT", "GRPO_ABLATE_PAUSE_MARKER"):
    ENV.pop(var, None)


# ---------------------------------------------------------------------------- pause steps
def config(*overrides: str) -> dict:
    (spec,) = specs_for(["trainer.max_steps=40", "eval.every_steps=4", *overrides],
                        multirun=False)
    return spec.config


def test_a_run_pauses_where_it_is_evaluated_logged_and_at_a_generation_boundary():
    cfg = config()
    assert [pause_step(cfg, f) for f in (0.25, 0.5, 0.9)] == [12, 20, 36]
    assert pause_step(cfg, 0.99) is None  # no evaluation before the last step
    # Two optimizer steps per generation: a boundary every 2 steps, evaluations every 3.
    cfg = config("eval.every_steps=3", "trainer.steps_per_generation=2",
                 "trainer.gradient_accumulation_steps=1")
    assert pause_step(cfg, 0.25) == 12  # lcm(3, 2) = 6: the first multiple >= 10
    # A reuse arm on the baseline's completions trains twice the steps: its look at a quarter
    # is a quarter of its own.
    reuse = config("trick=reuse_2x", "budget.match=completions")
    assert reuse["trainer"]["max_steps"] == 80 and pause_step(reuse, 0.25) == 20


def test_early_stop_true_is_short_for_the_enabled_key():
    assert command_line.parse_hydra_line(["early_stop=true"]).overrides == \
        ["early_stop.enabled=true"]


@pytest.mark.parametrize("args, message", [
    (["early_stop=true", "adaptive=true"], "early_stop=true with adaptive=true"),
    (["early_stop=true", "eval.every_steps=0"], "allowed: eval.every_steps > 0"),
    (["early_stop=true", "early_stop.looks=[0.9]"], "early_stop.looks=[0.9]: the look at 0.9"),
    (["early_stop=true", "early_stop.looks=[0.5,0.3]"], "early_stop.looks=[0.5, 0.3]: must be"),
    (["early_stop=true", "early_stop.rule=guess"], "early_stop.rule=\"guess\": must be one of"),
    (["early_stop=true", "trick=kl_off"], "which it does not run; allowed: add trick=...,baseline"),
    (["early_stop=true", "seed=1,2"], "early_stop=true: seeds [1, 2]; allowed: seeds 0..n-1"),
    (["early_stop=true", "trainer.max_steps=4"], "two looks pause at the same step ([2, 2])"),
    (["early_stop.extend=true"], "allowed: with early_stop=true, on the sweep's own command"),
])
def test_bad_early_stop_input_is_one_line_exit_2(tmp_path, capsys, args, message):
    assert cli.main(["sweep", "sweep=smoke", f"out_root={tmp_path}", "trainer.max_steps=8",
                     *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not list(tmp_path.rglob("*.json")) and not list(tmp_path.rglob("*.pt"))


def test_the_plan_is_fixed_once_declared(tmp_path):
    plan = StopPlan(looks=(0.25, 0.5), seeds=5, arms=("kl_off", "ema_0.9"))
    plan_file.write_stop_plan(tmp_path, plan)
    assert plan_file.read_stop_plan(tmp_path) == plan
    plan_file.write_stop_plan(tmp_path, StopPlan(looks=(0.25, 0.5), seeds=5,
                                                 arms=("ema_0.9", "kl_off")))  # any order
    with pytest.raises(UserError, match="declares looks \\[0.25, 0.5\\].*allowed: the declared"):
        plan_file.write_stop_plan(tmp_path, StopPlan(looks=(0.5,), seeds=5, arms=plan.arms))


# ---------------------------------------------------------------------------- the looks
THIRDS = StopPlan(looks=(1 / 3, 2 / 3), seeds=5, arms=("big",))


def table(values: dict, reached: dict | None = None) -> Stratum:
    """A stratum of planted runs: values[arm] = (look 1, look 2, final) arrays over 5 seeds;
    reached[arm][k] = the seeds that reached early look k+1 (all by default)."""
    rows = []
    for arm, (one, two, final) in values.items():
        for seed in range(5):
            row = {"arm": arm, "seed": seed, "model": "m", "task": "t", "status": "completed",
                   "eval/accuracy": final[seed], TRAINED_COLUMN: 1.0}
            for k, vals in enumerate((one, two), start=1):
                there = seed in (reached or {}).get(arm, {}).get(k, range(5))
                row[REACHED_COLUMN.format(k=k)] = 1.0 if there else 0.0
                row[LOOK_COLUMN.format(k=k)] = vals[seed] if there else np.nan
            rows.append(row)
    df = pd.DataFrame(rows)
    return Stratum(df, "baseline", ["eval/accuracy", *stop_columns(THIRDS)])


RNG = np.random.default_rng(7)
BASE = [0.5 + RNG.normal(0, 0.01, 5) for _ in range(3)]


def test_a_clear_difference_stops_at_the_first_look_at_the_published_boundary():
    st = table({"baseline": BASE, "big": [b + 0.2 + RNG.normal(0, 1e-4, 5) for b in BASE]})
    ladder, pending = replay_stops(st, THIRDS, "higher")
    assert pending is None
    got = ladder.settled["big"]
    assert (got.look, got.reason, got.verdict) == (1, "efficacy", "improves")
    # Equally spaced looks, one arm, two-sided alpha 0.05: 3.710, 2.511, 1.993 (Jennison &
    # Turnbull 2000, table 2.3; gsDesign's sfLDOF).
    assert got.p_boundary == pytest.approx(2 * stats.norm.sf(3.710), rel=0.01)
    assert steps_used(ladder, THIRDS, st)["stopped_at"] == {"big": pytest.approx(1 / 3)}


def test_an_arm_identical_or_equivalent_at_a_look_is_not_stopped_before_the_end():
    same = [b.copy() for b in BASE[:2]] + [BASE[2] + 0.03 + RNG.normal(0, 1e-3, 5)]
    st = table({"baseline": BASE, "big": same})
    ladder, pending = replay_stops(st, THIRDS, "higher")
    got = ladder.settled["big"]
    assert pending is None and got.look == 3  # identical at both looks, decided at the end
    assert got.verdict == "improves" and got.p_boundary == pytest.approx(
        2 * stats.norm.sf(1.993), rel=0.01)


def test_a_curve_that_cannot_be_read_at_a_look_leaves_its_arm_untested_there():
    big = [b + 0.2 + RNG.normal(0, 1e-4, 5) for b in BASE]
    big[0][3] = np.nan  # extrapolated: one seed's curve does not show its ceiling yet
    ladder, _ = replay_stops(table({"baseline": BASE, "big": big}), THIRDS, "higher")
    assert ladder.settled["big"].look == 2


def test_a_look_waits_for_every_run_of_the_open_arms_and_the_baseline():
    big = [b + 0.2 + RNG.normal(0, 1e-4, 5) for b in BASE]
    # The baseline's seed 4 has not reached look 2; the arm stopped at look 1: its runs did
    # not go on, and look 2 needs only the baseline.
    st = table({"baseline": BASE, "big": big}, {"baseline": {2: range(4)},
                                                 "big": {2: range(0)}})
    ladder, pending = replay_stops(st, StopPlan(looks=(1 / 3, 2 / 3), seeds=5,
                                                arms=("big", "other")), "higher")
    assert pending == 0 and ladder.settled == {}  # "other" has no run: look 1 waits
    ladder, pending = replay_stops(st, THIRDS, "higher")
    assert pending is None and ladder.settled["big"].look == 1
    weak = [b + 0.005 + RNG.normal(0, 0.01, 5) for b in BASE]
    ladder, pending = replay_stops(table({"baseline": BASE, "big": weak},
                                         {"baseline": {2: range(4)}}), THIRDS, "higher")
    assert pending == 1 and ladder.open == ["big"]


# ---------------------------------------------------------------------------- end to end
EARLY = ["sweep=smoke", "trick=baseline,kl_off", "seed=0,1", "trainer.max_steps=8",
         "eval.every_steps=2", "run_cache=null"]
STOPS = ["early_stop=true", "early_stop.looks=[0.5]", "early_stop.rule=observed"]


def what_each_run_computed(sweep: Path) -> dict:
    """Per run id: its metrics, stability and history (not its timings or its notes)."""
    out = {}
    for path in sorted(sweep.glob("runs/*/record.json")):
        r = read_record(path)
        out[r.run_id] = (r.arm, r.seed, r.metrics, r.stability,
                         [{k: v for k, v in row.items() if "seconds" not in k}
                          for row in read_history(path.parent)])
    return out


@pytest.mark.slow
def test_a_killed_early_stop_sweep_resumes_to_the_runs_a_full_length_sweep_makes(
        tmp_path, tiny_policy, capfd):
    """Two seeds cannot cross an early look's boundary (p 0.0015 at alpha/2 needs t(1) over
    400), so every run pauses at its look and goes on: the premise that lets the records of
    the two sweeps be compared run by run, whatever the policy learns."""
    out, marker = tmp_path / "early", tmp_path / "marker"
    sweep = out / "smoke"
    env = {**ENV, "GRPO_ABLATE_PAUSE_AT": "model_load:6", "GRPO_ABLATE_PAUSE_MARKER": str(marker)}
    proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate.cli", "sweep", *EARLY, *STOPS,
                             f"out_root={out}"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    wait_for(marker, proc)  # killed while look 2 (the end) loads its second run
    assert len(list(sweep.glob("runs/*/record.json"))) == 1
    paused = list(sweep.glob("runs/*/pause.json"))
    assert len(paused) == 3 and all(json.loads(p.read_text())["step"] == 4 for p in paused)
    assert all(list((p.parent / "checkpoints").glob("step-4")) for p in paused)
    capfd.readouterr()
    assert cli.main(["sweep", *EARLY, *STOPS, f"out_root={out}"]) == 0
    err = capfd.readouterr().err
    assert "early-stop look 2/2: 1 open arms + baseline, to the end: 3 to train" in err
    assert not list(sweep.glob("runs/*/pause.json")) and not list(sweep.glob("runs/*/checkpoints"))
    for path in sweep.glob("runs/*/record.json"):
        record = read_record(path)
        assert record.resumed_from == [4]
        assert any(n.startswith("paused for the early-stop look(s) at step(s) 4")
                   for n in record.notes) and not any("interrupted" in n for n in record.notes)
    assert cli.main(["sweep", *EARLY, f"out_root={tmp_path / 'full'}"]) == 0
    early, full = what_each_run_computed(sweep), what_each_run_computed(tmp_path / "full" / "smoke")
    assert len(early) == 4 and early == full
    rep = json.loads((sweep / "report.json").read_text())
    (st,) = rep["strata"]
    assert st["adaptive"]["early_stop"]["steps_saved"] == 0.0
    (row,) = st["arms"]
    assert row["adaptive"]["look"] == 2 and row["decided_by"]["text"].startswith(
        "early-stop look 2 (the end, 2 seeds, final values)")


def plant(out: Path, arm: str, seed: int, evals: dict[int, float], paused: bool,
          status: str = "completed", steps: int | None = None) -> None:
    """A run of the early-stop sweep as if it had trained: a record to its end, or a pause
    at step 4, with these held-out evaluations."""
    from grpo_ablate.records import write_pause, write_record
    from grpo_ablate.training.outcome import make_record

    (spec,) = specs_for([a for a in EARLY if not a.startswith(("trick=", "seed="))]
                        + [a.replace("early_stop=true", "early_stop.enabled=true") for a in STOPS]
                        + [f"trick={arm}", f"seed={seed}", f"out_root={out}"], multirun=False)
    history = [{"step": s, "eval/accuracy": v} for s, v in sorted(evals.items())]
    final = {"eval/accuracy": evals[max(evals)]}
    record = make_record(spec, "paused" if paused else status, None, 0.0,
                         metrics={} if paused else final, steps=steps or max(evals))
    (write_pause if paused else write_record)(spec.run_dir, record, history)


@pytest.mark.slow
def test_an_arm_decided_at_a_look_stops_its_runs_and_extend_trains_them_to_their_end(
        tmp_path, tiny_policy, capfd):
    """Planted: the baseline's three runs recorded to their end, kl_off's paused at its look
    (step 4) a clear 0.3 above them on every seed: the look settles it, nothing trains, and
    the report counts the steps its runs did not take."""
    out = tmp_path / "planted"
    sweep = out / "smoke"
    base = {0: [0.50, 0.52, 0.55, 0.56, 0.57], 1: [0.48, 0.51, 0.53, 0.55, 0.56],
            2: [0.51, 0.53, 0.54, 0.58, 0.58]}
    for seed, values in base.items():
        plant(out, "baseline", seed, dict(zip((0, 2, 4, 6, 8), values, strict=True)), False)
        plant(out, "kl_off", seed, {0: values[0], 2: values[1] + 0.2,
                                    4: values[2] + 0.3 + 1e-4 * seed}, True)
    args = [*EARLY, *STOPS, "seed=0,1,2", f"out_root={out}"]
    capfd.readouterr()
    assert cli.main(["sweep", *args]) == 0
    err = capfd.readouterr().err
    assert "to train" not in err and "3 runs stopped at a look" in err
    rep = json.loads((sweep / "report.json").read_text())
    (st,) = rep["strata"]
    (row,) = st["arms"]
    assert (row["verdict"], row["adaptive"]["look"], row["n"]) == ("improves", 1, 3)
    assert row["diff"] == pytest.approx(0.3 + 1e-4, abs=1e-9)
    (p_look,) = st["adaptive"]["early_stop"]["p_at_looks"]["kl_off"]  # settled at look 1
    assert p_look == row["p_value"] < row["adaptive"]["p_boundary"]
    # kl_off's runs stopped at half their steps, the baseline's went on to the end (planted).
    assert st["adaptive"]["early_stop"]["steps_saved"] == pytest.approx(0.25)
    assert "Run-steps: 75% of running every run to its end" in (sweep / "report.md").read_text()
    assert cli.main(["sweep", *args, "early_stop.extend=true"]) == 0
    err = capfd.readouterr().err
    assert "early stop, extend: 3 stopped runs to their end" in err
    records = [read_record(p) for p in sweep.glob("runs/*/record.json")]
    assert sorted((r.arm, r.seed, r.status, r.steps) for r in records if r.arm == "kl_off") == \
        [("kl_off", s, "completed", 8) for s in range(3)]
    assert not list(sweep.glob("runs/*/pause.json"))


def test_a_run_that_diverged_before_a_look_counts_as_there_and_untested(tmp_path):
    """A diverged run stopped on its own: it has reached every look (the sweep must not wait
    for it), it has no value at a look after it stopped, so its arm is not tested there."""
    from grpo_ablate.launch.early_stop import next_look

    out = tmp_path / "planted"
    for seed in range(3):
        plant(out, "baseline", seed, {0: 0.5, 2: 0.52, 4: 0.55, 6: 0.56, 8: 0.57 + seed / 100},
              False)
        if seed < 2:
            plant(out, "kl_off", seed, {0: 0.5, 2: 0.8, 4: 0.85 + seed / 1000}, True)
    plant(out, "kl_off", 2, {0: 0.5, 2: 0.8}, False, status="diverged", steps=3)
    plan = StopPlan(looks=(0.5,), seeds=3, rule="observed", arms=("kl_off",))
    assert next_look(out / "smoke", plan, [("tiny", "arithmetic")], "higher") == \
        (1, ["kl_off"])
