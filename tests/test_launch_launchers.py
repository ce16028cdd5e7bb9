"""Sweeps under Hydra's parallel launchers keep the interface: every record lands, progress
comes from the records on disk, library chatter stays out, and a finished sweep re-runs
without starting a worker."""

import json
import os
import subprocess
import sys

import pytest

from grpo_ablate import cli

pytestmark = pytest.mark.slow
ENV = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
NOISE = ("Loading weights", "FutureWarning", "UserWarning", "Running in WANDB")


def sweep(*args):
    return subprocess.run([sys.executable, "-m", "grpo_ablate.cli", "sweep", "sweep=smoke", *args],
                          capture_output=True, text=True, env=ENV, timeout=900)


def results(sweep_dir) -> dict:
    """run_id -> (status, metrics) of a sweep's records."""
    recs = (json.loads(p.read_text()) for p in sweep_dir.glob("runs/*/record.json"))
    return {r["run_id"]: (r["status"], r["metrics"]) for r in recs}


# Two runs at a time either way. The local launcher starts a process per run (each imports
# TRL), so it gets one run per worker; joblib's two workers take two runs each, and the
# report (two seeds of an arm) is checked there.
@pytest.mark.parametrize("launcher,extra", [("joblib", ["trick=baseline,kl_off"]),
                                            ("local", ["trick=baseline,kl_off", "seed=0"])])
def test_parallel_launcher_records_progress_and_quiet(tmp_path, smoke_sweep, launcher, extra,
                                                      capfd):
    res = sweep(f"launcher={launcher}", f"out_root={tmp_path}", *extra)
    assert res.returncode == 0, res.stderr[-3000:]
    n = 2 if "seed=0" in extra else 4
    records = list((tmp_path / "smoke" / "runs").glob("*/record.json"))
    assert len(records) == n
    assert all(json.loads(p.read_text())["status"] == "completed" for p in records)
    assert f"{n}/{n} runs" in res.stderr and "ETA" in res.stderr
    assert not [w for w in NOISE if w in res.stderr + res.stdout], res.stderr[-3000:]
    assert (tmp_path / "smoke" / "report.json").is_file() == (n == 4)
    # The serial sweep's runs: byte-identical metrics, whatever launcher ran them (the same
    # machine: docs/determinism.md).
    _, serial = smoke_sweep
    mine, theirs = results(tmp_path / "smoke"), results(serial / "smoke")
    assert len(mine) == n and mine == {k: theirs[k] for k in mine}
    # Again, in this process (its output read from the file descriptors): nothing to train,
    # and no record is touched.
    before = {p: p.read_bytes() for p in records}
    capfd.readouterr()
    assert cli.main(["sweep", "sweep=smoke", f"launcher={launcher}", f"out_root={tmp_path}",
                     *extra]) == 0
    err = capfd.readouterr().err
    assert f"{n} runs" in err and "0 to train" in err, err[-3000:]
    assert {p: p.read_bytes() for p in records} == before


@pytest.mark.parametrize("sweeper", ["ladder", "basic"])
def test_a_plain_hydra_multirun_ends_with_the_report(tmp_path, tiny_policy, sweeper):
    """Started as a Hydra app, not through `grpo-ablate sweep`, under a parallel launcher:
    grpo-ablate's sweeper hands the sweep to the one driver, which reports once; under
    another sweeper (Hydra's basic one here) the callback at the end of the multirun does."""
    res = subprocess.run(
        [sys.executable, "-m", "grpo_ablate.app", "-m", "launcher=joblib", "trick=baseline,kl_off",
         "seed=0,1", "trainer.max_steps=2", "eval.every_steps=0", f"out_root={tmp_path}",
         "sweep_name=plain", f"hydra/sweeper={sweeper}"],
        capture_output=True, text=True, env=ENV, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(list((tmp_path / "plain" / "runs").glob("*/record.json"))) == 4
    assert res.stdout.count("\nreport: ") == 1, res.stdout[-2000:]
    report = json.loads((tmp_path / "plain" / "report.json").read_text())
    (stratum,) = report["strata"]
    assert stratum["baseline"]["n"] == 2 and [a["arm"] for a in stratum["arms"]] == ["kl_off"]


def test_a_plain_hydra_multirun_refuses_bad_input_in_one_line(tmp_path):
    """The sweeper validates every job before anything is written, as `grpo-ablate sweep`."""
    res = subprocess.run(
        [sys.executable, "-m", "grpo_ablate.app", "-m", "trick=baseline,kl_off",
         "trainer.learning_rate=-1", f"out_root={tmp_path}", "sweep_name=bad"],
        capture_output=True, text=True, env=ENV, timeout=300)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines() == [
        "grpo-ablate: error: trainer.learning_rate=-1: must be a number > 0"]
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("bad,message", [
    ("seed=-1", "seed=-1: must be an integer >= 0"),
    ("task.dataset.eval=./no_such_rows.jsonl",
     "task.dataset.eval=./no_such_rows.jsonl: no such file"),
], ids=["a rule", "the task's own data check"])
def test_a_plain_hydra_run_refuses_bad_input_in_one_line(tmp_path, bad, message):
    """One job of the plain app (no sweeper in between): the same one line and exit 2, and
    no run is trained or recorded."""
    res = subprocess.run(
        [sys.executable, "-m", "grpo_ablate.app", "task=math", bad, f"out_root={tmp_path}"],
        capture_output=True, text=True, env=ENV, timeout=300, cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("grpo-ablate: error: ") and message in line, line
    assert not list(tmp_path.rglob("record.json")) and not list(tmp_path.rglob("runs"))


def test_a_sweep_job_is_composed_and_validated_once_and_a_rerun_launches_only_the_rest(
        tmp_path, tiny_policy, monkeypatch):
    """One road: `grpo-ablate sweep` hands a Hydra multirun to grpo-ablate's sweeper, which
    composes and validates each job once (the serial launcher runs the jobs in this process,
    so a check repeated inside a job would be counted too), TRL's checks too, and the task's
    data check once per task section. Run again with one record gone, only that job is
    launched."""
    import importlib
    from collections import Counter

    from grpo_ablate import app
    from grpo_ablate.tasks import TASKS

    composing = importlib.import_module("grpo_ablate.config.compose")  # config.compose: a function
    counts = Counter()

    def counting(name, fn):
        def counted(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)
        return counted

    monkeypatch.setattr(composing.Composer, "__call__",
                        counting("composed", composing.Composer.__call__))
    monkeypatch.setattr(composing, "check_written", counting("validated", composing.check_written))
    monkeypatch.setattr(composing, "check_with_trl", counting("trl", composing.check_with_trl))
    task = TASKS["arithmetic"]
    monkeypatch.setattr(task, "check_config", counting("task", task.check_config))
    monkeypatch.setattr(app, "execute", counting("launched", app.execute))
    args = ["sweep", "trick=baseline,kl_off", "seed=0,1", "trainer.max_steps=1",
            "eval.every_steps=0", f"out_root={tmp_path}", "sweep_name=once", "run_cache=null"]
    assert cli.main(args) == 0
    # each job's trainer section is its own (trainer.seed): TRL's checks once per job
    assert counts == {"composed": 4, "validated": 4, "trl": 4, "task": 1, "launched": 4}
    records = sorted((tmp_path / "once" / "runs").glob("*/record.json"))
    assert len(records) == 4
    gone = json.loads(records[0].read_text())
    records[0].unlink()
    counts.clear()
    assert cli.main(args) == 0
    assert counts == {"composed": 4, "validated": 4, "trl": 1, "task": 1, "launched": 1}
    assert json.loads(records[0].read_text())["run_id"] == gone["run_id"]
