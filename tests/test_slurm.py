"""Sweeps on a real Slurm (scripts/slurm_local.sh sets one up on this machine; `make test`
runs it) through hydra-submitit-launcher: every record lands, a job killed with scancel is
recorded failed without hanging the sweep, and re-submitting trains only what is missing."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
# Time limits under 5 minutes get jobs killed at start by submitit's early-warning signal.
SLURM = ["launcher=slurm", "hydra.launcher.timeout_min=10", "eval.every_steps=0"]


@pytest.fixture(scope="module")
def slurm():
    if shutil.which("sinfo") is None:
        pytest.skip("Slurm is not installed: run scripts/slurm_local.sh (make test does)")
    up = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    # Up: idle, or busy with jobs (a job of the previous test may still be ending).
    if not any(state in up.stdout for state in ("idle", "mix", "alloc", "completing")):
        pytest.skip(f"Slurm is not up (sinfo: {up.stdout.strip() or up.stderr.strip()}): "
                    "run scripts/slurm_local.sh")


def sweep(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "grpo_ablate.cli", "sweep", "sweep=smoke",
                             *SLURM, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV, cwd=ROOT, **kw)


def records(sweep_dir: Path) -> dict[tuple, dict]:
    out = {}
    for path in (sweep_dir / "runs").glob("*/record.json"):
        rec = json.loads(path.read_text())
        out[rec["arm"], rec["seed"]] = rec
    return out


def test_slurm_sweep_cancelled_job_fails_only_its_run_and_resubmit_trains_only_it(
        tmp_path, slurm, tiny_policy):
    """Four runs as one job array; one running job is scancelled: its run is recorded failed
    (the sweep neither hangs nor stops), the other three land; the same command again trains
    only the cancelled run."""
    name = f"grpo-ablate-test-{os.getpid()}"  # this test's jobs, whatever else the cluster runs
    args = ["trick=baseline,kl_off", "seed=0,1", "trainer.max_steps=4", "faults.sleep_per_step=1",
            f"out_root={tmp_path}", f"hydra.launcher.name={name}"]
    t0 = time.perf_counter()
    proc = sweep(*args)
    cancelled = None
    while cancelled is None and time.perf_counter() - t0 < 300:
        time.sleep(1)
        running = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-n", name, "-o", "%i"],
                                 capture_output=True, text=True).stdout.split()
        if running:
            cancelled = running[0]
            subprocess.run(["scancel", cancelled], check=True)
    assert cancelled, "no job of the sweep ever ran"
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    assert list((tmp_path / "smoke" / ".submitit").iterdir())  # it went through Slurm
    recs = records(tmp_path / "smoke")
    assert len(recs) == 4
    failed = [r for r in recs.values() if r["status"] == "failed"]
    assert len(failed) == 1 and "CANCELLED" in failed[0]["error"], failed
    assert sum(r["status"] == "completed" for r in recs.values()) == 3
    assert "sweep finished" in err  # it returned (the report needs two seeds of each arm)
    # Re-submitted: only the cancelled run trains again; finished records are kept as they are.
    again = sweep(*args)
    _, err = again.communicate(timeout=600)
    assert again.returncode == 0 and "1 to train" in err, err[-3000:]
    after = records(tmp_path / "smoke")
    assert all(r["status"] == "completed" for r in after.values())
    kept = {k: r for k, r in recs.items() if r["status"] == "completed"}
    assert all(after[k]["checksum"] == r["checksum"] for k, r in kept.items())


def release_requeued(name: str) -> None:
    """Slurm holds a requeued job for about two minutes before it may start again; the test
    releases it at once, as a cluster's administrator can (`scontrol update StartTime=now`)."""
    held = subprocess.run(["squeue", "-h", "-n", name, "-t", "PENDING", "-o", "%i %r"],
                          capture_output=True, text=True).stdout.split("\n")
    for line in held:
        if line.endswith("BeginTime"):
            subprocess.run(["scontrol", "update", f"JobId={line.split()[0]}", "StartTime=now"],
                           capture_output=True)


def comparable(rec: dict) -> dict:
    rec = {k: v for k, v in rec.items() if k not in ("wall_seconds", "checksum", "notes",
                                                     "resumed_from", "sweep")}
    rec["cost"] = {k: v for k, v in rec["cost"].items()
                   if k not in ("eval_seconds", "generation_seconds")}
    rec["config"] = {k: v for k, v in rec["config"].items()
                     if k not in ("sweep_name", "sweep_dir", "out_root", "faults", "hydra")}
    return rec


def test_slurm_time_limit_requeues_and_the_run_resumes_to_the_uninterrupted_record(
        tmp_path, slurm, tiny_policy):
    """A run that needs more than twice what its job's one-minute limit leaves for steps
    (the signal comes 20 s early and each job loads the model first, so a job takes at most 7
    of its 5-s steps): Slurm signals the job before the limit, submitit requeues it, and each
    new job resumes from the newest checkpoint. The record equals the same run's in a job with
    time to spare. A second sweep, allowed one requeue, ends with a failed record that says
    why."""
    name = f"grpo-ablate-requeue-{os.getpid()}"
    run = ["trick=baseline", "seed=0", "checkpoint.every_steps=1", "run_cache=null",
           "eval.every_steps=0", "hydra.launcher.signal_delay_s=20"]

    def launch(out: str, limit: int, steps: int, requeues: int, sleep: float):
        return subprocess.Popen(
            [sys.executable, "-m", "grpo_ablate.cli", "sweep", "sweep=smoke", "launcher=slurm",
             *run, f"hydra.launcher.timeout_min={limit}", f"trainer.max_steps={steps}",
             f"hydra.launcher.max_num_timeout={requeues}", f"faults.sleep_per_step={sleep}",
             f"out_root={tmp_path / out}", f"hydra.launcher.name={name}-{out}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)

    cut = launch("cut", 1, 16, 20, 5)        # 80 s of steps, at most 35 s of them per job
    short = launch("short", 1, 60, 1, 5)     # 300 s, one requeue allowed
    t0 = time.perf_counter()
    while (cut.poll() is None or short.poll() is None) and time.perf_counter() - t0 < 900:
        release_requeued(f"{name}-cut")
        release_requeued(f"{name}-short")
        time.sleep(2)
    _, err = cut.communicate(timeout=60)
    assert cut.returncode == 0, err[-3000:]
    _, short_err = short.communicate(timeout=60)
    assert short.returncode == 0, short_err[-3000:]
    reference = launch("reference", 10, 16, 0, 0)
    _, ref_err = reference.communicate(timeout=600)
    assert reference.returncode == 0, ref_err[-3000:]

    (rec,) = records(tmp_path / "cut" / "smoke").values()
    (ref,) = records(tmp_path / "reference" / "smoke").values()
    assert rec["status"] == "completed", rec["error"]
    assert len(rec["resumed_from"]) >= 2, rec["resumed_from"]  # requeued at least twice
    assert comparable(rec) == comparable(ref)
    run_dir = next((tmp_path / "cut" / "smoke" / "runs").iterdir())
    ref_dir = next((tmp_path / "reference" / "smoke" / "runs").iterdir())
    assert (run_dir / "history.jsonl").read_text() == (ref_dir / "history.jsonl").read_text()

    (failed,) = records(tmp_path / "short" / "smoke").values()
    assert failed["status"] == "failed" and "max_num_timeout" in failed["error"], failed["error"]
