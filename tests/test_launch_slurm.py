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

from grpo_ablate.records import TIMED_COST

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
    """Two runs as one job array; one running job is scancelled: its run is recorded failed
    (the sweep neither hangs nor stops), the other lands; the same command again trains only
    the cancelled run."""
    name = f"grpo-ablate-test-{os.getpid()}"  # this test's jobs, whatever else the cluster runs
    args = ["trick=baseline,kl_off", "seed=0", "trainer.max_steps=4", "faults.sleep_per_step=1",
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
    assert len(recs) == 2
    failed = [r for r in recs.values() if r["status"] == "failed"]
    assert len(failed) == 1 and "CANCELLED" in failed[0]["error"], failed
    assert sum(r["status"] == "completed" for r in recs.values()) == 1
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
                   if k not in TIMED_COST}
    rec["config"] = {k: v for k, v in rec["config"].items()
                     if k not in ("sweep_name", "sweep_dir", "out_root", "faults", "hydra")}
    return rec


def newest_checkpoint(sweep_dir: Path) -> int:
    """The newest mid-run checkpoint's step in a one-run sweep (0: none yet). A checkpoint
    folder appears whole (renamed into place), so one that is listed is complete."""
    steps = [int(p.name.removeprefix("step-"))
             for p in sweep_dir.glob("runs/*/checkpoints/step-*")]
    return max(steps, default=0)


def running_job(name: str) -> str | None:
    ids = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-n", name, "-o", "%i"],
                         capture_output=True, text=True).stdout.split()
    return ids[0] if ids else None


def test_slurm_requeue_signal_resumes_to_the_uninterrupted_record_and_a_time_limit_fails_it(
        tmp_path, slurm, tiny_policy):
    """A run's job gets Slurm's requeue signal (SIGUSR2, what Slurm sends signal_delay_s before
    a time limit; `scancel --signal` sends the same) while it waits at a pause point after its
    fifth step (the checkpoint of step 4 written): submitit requeues it and the new job resumes
    from the newest checkpoint; it has four steps left and no pause. (A run resumed twice:
    tests/test_training_resume.py.) The record and history equal the same run's in one job. A
    second sweep meets a
    real two-minute time limit (Slurm signals 20 s before it, at the earliest 60 s before that,
    by its own timing resolution: never before the job has installed its handler) with no
    requeue allowed, and ends with a failed record that says why."""
    name = f"grpo-ablate-requeue-{os.getpid()}"
    run = ["trick=baseline", "seed=0", "checkpoint.every_steps=1", "run_cache=null",
           "eval.every_steps=0", "hydra.launcher.signal_delay_s=20"]

    def launch(out: str, limit: int, steps: int, requeues: int, sleep: float, env=ENV):
        return subprocess.Popen(
            [sys.executable, "-m", "grpo_ablate.cli", "sweep", "sweep=smoke", "launcher=slurm",
             *run, f"hydra.launcher.timeout_min={limit}", f"trainer.max_steps={steps}",
             f"hydra.launcher.max_num_timeout={requeues}", f"faults.sleep_per_step={sleep}",
             f"out_root={tmp_path / out}", f"hydra.launcher.name={name}-{out}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)

    # The cut run's job waits after its fifth step until the test has signalled it: the moment
    # is built, not raced (the requeued job has four steps left, so no fifth and no pause).
    marker = tmp_path / "paused"
    short = launch("short", 2, 60, 0, 5)     # 300 s of steps against a 120 s limit
    cut = launch("cut", 10, 8, 5, 0, env={**ENV, "GRPO_ABLATE_PAUSE_AT": "after_step:5",
                                          "GRPO_ABLATE_PAUSE_MARKER": str(marker)})
    signalled: list[tuple[str, int]] = []
    reference = None                         # the same run in one job, once the cut one is done
    t0 = time.perf_counter()
    while (reference is None or reference.poll() is None or short.poll() is None) \
            and time.perf_counter() - t0 < 600:
        job = running_job(f"{name}-cut")
        if job and marker.exists():
            step = newest_checkpoint(tmp_path / "cut" / "smoke")
            subprocess.run(["scancel", "--signal=USR2", job], check=True)
            signalled.append((job, step))
            while running_job(f"{name}-cut") and time.perf_counter() - t0 < 600:
                time.sleep(0.5)  # until submitit has requeued it
            # Released within the second of its requeue, slurmd refuses the job's start ("Job
            # credential revoked": the credential's time is not after the revocation's).
            time.sleep(2)
            marker.unlink()
        if reference is None and cut.poll() is not None:
            reference = launch("reference", 10, 8, 0, 0)
        release_requeued(f"{name}-cut")
        release_requeued(f"{name}-short")
        time.sleep(0.5)
    _, err = cut.communicate(timeout=60)
    assert cut.returncode == 0, err[-3000:]
    _, ref_err = reference.communicate(timeout=60)
    assert reference.returncode == 0, ref_err[-3000:]
    _, short_err = short.communicate(timeout=60)
    assert short.returncode == 0, short_err[-3000:]

    assert [step for _, step in signalled] == [4], signalled
    (rec,) = records(tmp_path / "cut" / "smoke").values()
    (ref,) = records(tmp_path / "reference" / "smoke").values()
    assert rec["status"] == "completed", rec["error"]
    assert len(rec["resumed_from"]) == 1, rec["resumed_from"]  # requeued once, resumed once
    assert comparable(rec) == comparable(ref)
    run_dir = next((tmp_path / "cut" / "smoke" / "runs").iterdir())
    ref_dir = next((tmp_path / "reference" / "smoke" / "runs").iterdir())
    assert (run_dir / "history.jsonl").read_text() == (ref_dir / "history.jsonl").read_text()

    (failed,) = records(tmp_path / "short" / "smoke").values()
    assert failed["status"] == "failed" and "max_num_timeout" in failed["error"], failed["error"]


def test_plan_pilots_as_slurm_jobs_of_the_sweeps_launcher(tmp_path, slurm, tiny_policy):
    """`scripts/check_plan.py --launcher slurm --quick`: the plan's pilot goes to Slurm as
    two jobs (accounting lists them under the launcher's name), the plan prints its figures,
    the sweep runs on Slurm, and the script prints how far the prediction was. Nothing of the
    pilot is left in the output folder."""
    name = f"grpo-ablate-plan-{os.getpid()}"
    res = subprocess.run([sys.executable, "scripts/check_plan.py", "--launcher", "slurm",
                          "--quick", f"hydra.launcher.name={name}",
                          "hydra.launcher.timeout_min=10"],
                         capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "as two Slurm jobs of the sweep's launcher" in res.stderr
    figures = dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)
    assert figures["actual_runs"] == "2" and figures["runs_in_range"] == "True"
    assert float(figures["plan_per_run_seconds"]) > 0 and "plan_error" in figures
    jobs = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobName,State", "-S", "now-1hours"],
                          capture_output=True, text=True).stdout.splitlines()
    pilots = [j for j in jobs if j.startswith(f"{name}-pilot-")]
    assert len(pilots) == 2 and all(j.endswith("|COMPLETED") for j in pilots), jobs
    assert figures["plan_cost_from"].startswith(f"a pilot of the baseline as Slurm jobs {name}")


def test_a_plan_whose_slurm_pilot_fails_is_one_line(tmp_path, slurm, tiny_policy, capsys,
                                                    monkeypatch):
    """The pilot's Slurm jobs fail (a hub dataset on a machine without network): one line
    naming the cause and the ways out, exit 2, no pilot folder left."""
    from grpo_ablate import cli

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert cli.main(["plan", "sweep=smoke", "task=gsm8k", "launcher=slurm",
                     "hydra.launcher.timeout_min=10", f"out_root={tmp_path}",
                     f"hydra.launcher.name=grpo-ablate-plan-fail-{os.getpid()}"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("grpo-ablate: error: plan: the pilot jobs of the baseline on Slurm "
                            "failed (") and "--pilot-here" in error and "--from PATH" in error
    assert "could not load split 'train'" in error, error
    assert not any(tmp_path.iterdir())
