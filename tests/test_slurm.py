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
    if "idle" not in up.stdout and "mix" not in up.stdout:
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
    args = ["trick=baseline,no_kl", "seed=0,1", "trainer.max_steps=4", "faults.sleep_per_step=1",
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
