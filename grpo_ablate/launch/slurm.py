"""Slurm through hydra-submitit-launcher (`launcher=slurm`, conf/launcher/slurm.yaml; the
launcher class is hydra_plugins/grpo_ablate_slurm, where Hydra requires plugins to live), with
one change: a run whose Slurm job ends without a record (scancel, node failure, out of
memory, time limits beyond hydra.launcher.max_num_timeout) is recorded `failed` with the
job's id and state, and the sweep goes on. A job that reaches its time limit or is preempted
is requeued by submitit (the plugin's `checkpoint` resubmits the same job), and its run
resumes from its newest mid-run checkpoint (training/checkpoint.py).

The plugin's launcher waits on the jobs in order and raises at the first one that did not
finish, which ends the whole multirun while later jobs still run. Here every job is waited
for; the ones that did not finish get a failed record, so a re-submitted sweep trains exactly
those again (a failed record is retried; completed and diverged ones are kept).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

from grpo_ablate.config import validate
from grpo_ablate.records import record_exists, run_lock, write_record
from grpo_ablate.training.outcome import make_record

log = logging.getLogger(__name__)
TIMED_OUT = ("reached its time limit more often than hydra.launcher.max_num_timeout "
             "requeues allow; a re-run resumes from its newest checkpoint")


def explain_failure(error: str | None) -> str | None:
    """A failed run's error, where submitit's words for a run that timed out once too often
    (raised inside the run by its requeue signal) are given in the sweep's own."""
    if error and error.startswith("UncompletedJobError") and "timed-out too many times" in error:
        return f"Slurm job {TIMED_OUT}"
    return error


def record_unfinished(launcher: Any, job: Any, overrides: list[str],
                      exc: BaseException) -> JobReturn:
    """The run of a job that ended without finishing: a failed record, unless the run has a
    record already (it finished, and the job died after) or another sweep holds it."""
    state = getattr(job, "state", "UNKNOWN")
    error = f"Slurm job {job.job_id} ended {state} without a record ({type(exc).__name__})"
    if state == "TIMEOUT":
        error += f": it {TIMED_OUT}"
    spec = validate(launcher.hydra_context.config_loader.load_sweep_config(launcher.config,
                                                                           list(overrides)))
    with run_lock(spec.sweep_dir, spec.run_id) as held:
        if held and not record_exists(spec.run_dir):
            write_record(spec.run_dir, make_record(spec, "failed", error, 0.0), [])
    log.warning("run %s (%s seed %s): %s", spec.run_id, spec.arm, spec.seed, error)
    ret = JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED)
    ret.return_value = f"failed ({error})"
    return ret


class _SettledJob:
    """A submitit job whose `results()` waits for the job and never raises."""

    def __init__(self, job: Any, overrides: list[str], on_unfinished) -> None:
        self.job, self.overrides, self.on_unfinished = job, overrides, on_unfinished

    def results(self) -> list[Any]:
        try:
            return self.job.results()
        except Exception as exc:  # noqa: BLE001 - submitit's UncompletedJobError and kin
            return [self.on_unfinished(self.job, self.overrides, exc)]


@contextmanager
def settled_jobs(on_unfinished) -> Iterator[None]:
    """While the plugin launches, its executor hands back settled jobs. The plugin calls
    `executor.map_array(launcher, overrides, ...)` once per launch; the overrides come
    first."""
    import submitit  # an optional extra ([launchers]): only where launcher=slurm runs

    original = submitit.AutoExecutor.map_array

    def map_array(executor, fn, *iterables):
        jobs = original(executor, fn, *iterables)
        return [_SettledJob(j, list(o), on_unfinished) for j, o in zip(jobs, iterables[0],
                                                                         strict=True)]

    submitit.AutoExecutor.map_array = map_array
    try:
        yield
    finally:
        submitit.AutoExecutor.map_array = original
