"""Execute one job of a run or sweep: skip it if its record exists, lock it, reuse it from
the run cache or train it, write its record. And plan a sweep: which of its runs still need
training. The folder of records is the single source of truth."""

from __future__ import annotations

import gc
from collections.abc import Callable

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from grpo_ablate.config import RunSpec, check_trainable, validate
from grpo_ablate.config.compose import resolved_spec
from grpo_ablate.config.early_stop import paused_there
from grpo_ablate.launch import run_cache
from grpo_ablate.launch.progress import progress_from_disk
from grpo_ablate.launch.slurm import explain_failure
from grpo_ablate.models import checkpoint_ready, resolve_model_path
from grpo_ablate.pausepoints import pause_point
from grpo_ablate.records import (
    PAUSE_NAME,
    clean_partials,
    drop_checkpoints,
    record_exists,
    run_lock,
    write_pause,
    write_record,
)
from grpo_ablate.runtime import apply_thread_share, quiet_libraries, say
from grpo_ablate.tasks import check_task_configs, get_task, policy_data_key

# The hydra.job.env_set key a launched job carries: the run id its pre-flight validated.
CHECKED_KEY = "GRPO_ABLATE_CHECKED_RUN"


def checked_override(spec: RunSpec) -> str:
    """The Hydra override that tells a job its config was validated before launch."""
    return f"++hydra.job.env_set.{CHECKED_KEY}={spec.run_id}"


def launcher_jobs(specs: list[RunSpec]) -> list[list[str]]:
    """The jobs a Hydra launcher runs for these validated specs."""
    return [[*spec.job, checked_override(spec)] for spec in specs]


def job_spec(cfg: DictConfig) -> tuple[RunSpec, bool]:
    """A Hydra job's RunSpec, and whether it was validated before launch: a job that carries
    its run id (a sweeper's or `grpo-ablate run`'s) and resolves to that id here is resolved
    only; any other (e.g. under Hydra's basic sweeper) is validated, and its task's data
    checked, in the job."""
    checked = HydraConfig.get().job.env_set.get(CHECKED_KEY) if HydraConfig.initialized() \
        else None
    if checked:
        spec = resolved_spec(cfg)
        if spec.run_id == checked:
            return spec, True
    spec = validate(cfg)
    check_task_configs([spec.config["task"]])
    return spec, False


def pause_at(spec: RunSpec) -> float | None:
    """The early-stop look this job trains its run to (None: to its end)."""
    return (spec.config.get("early_stop") or {}).get("pause_at")


def reached(spec: RunSpec) -> bool:
    """The run has trained as far as this job asks: a final record, or (a job that pauses
    at a look) a pause at that look or a later one."""
    return record_exists(spec.run_dir) or paused_there(spec.run_dir, spec.config) is not None


def execute(spec: RunSpec, checked: bool = False) -> str:
    """Run one spec to a record (or to its early-stop look). Returns what happened: trained,
    paused, skipped, or busy. `checked`: TRL's checks ran before launch."""
    run_dir = spec.run_dir
    if reached(spec):  # before any model is loaded: a finished sweep re-runs in seconds
        drop_spent_checkpoints(spec)
        return "skipped (record exists)" if record_exists(run_dir) else \
            "skipped (paused at its look)"
    with run_lock(spec.sweep_dir, spec.run_id) as held:
        if not held:
            return "busy (another sweep is training it)"
        if reached(spec):  # finished by another sweep while we waited
            drop_spent_checkpoints(spec)
            return "skipped (record exists)"
        clean_partials(run_dir)
        if run_cache.adopt(spec):
            drop_checkpoints(run_dir)  # an interrupted attempt's: the cache had it whole
            (run_dir / PAUSE_NAME).unlink(missing_ok=True)
            return "reused (run cache)"
        say(f"training arm={spec.arm} seed={spec.seed} ({spec.run_id})"
            + (f" to its look at {pause_at(spec):g} of its steps" if pause_at(spec) else ""))
        record, history = train(spec, checked)
        record.error = explain_failure(record.error)
        if record.status == "paused":  # its checkpoint stays: the run goes on from there
            write_pause(run_dir, record, history)
            return "paused"
        write_record(run_dir, record, history)
        (run_dir / PAUSE_NAME).unlink(missing_ok=True)
        pause_point("record_written")  # kill tests: the record is there, its checkpoints too
        # A failed run keeps them: its re-run resumes (the failure may be transient).
        if record.status != "failed":
            drop_spent_checkpoints(spec)
        run_cache.store(spec, record, history)
        return record.status


def drop_spent_checkpoints(spec: RunSpec) -> None:
    """A finished run's checkpoints, unless checkpoint.keep; also where an attempt was
    killed between writing its record and dropping them. A paused run keeps them."""
    if not spec.config["checkpoint"]["keep"] and record_exists(spec.run_dir):
        drop_checkpoints(spec.run_dir)


def train(spec: RunSpec, checked: bool = False):
    """Train one run, in this process or in its own processes (launch.processes > 1, or
    pinned GPUs)."""
    quiet_libraries()
    apply_thread_share()  # a parallel launcher's worker share of the cores
    if not checked:  # TRL's own checks, unless they ran before launch
        check_trainable([spec])
    # heavy (torch, transformers, TRL): the training layer loads only where a run trains
    from grpo_ablate.launch.distributed import needs_processes, train_in_processes
    from grpo_ablate.training.train import train_one

    freeze_loaded_objects()
    return train_in_processes(spec) if needs_processes(spec.config) else train_one(spec)


_FROZEN = False


def freeze_loaded_objects() -> None:
    """Once per process, after the training stack is loaded: move what is alive now out of
    the garbage collector's reach. Its collections then skip the libraries' millions of
    objects (a 40-step tiny run: 15-20% faster here). Later runs' garbage is collected as
    usual."""
    global _FROZEN
    if not _FROZEN:
        gc.collect()
        gc.freeze()
        _FROZEN = True


def prepare_checkpoints(specs: list[RunSpec]) -> None:
    """Build or fetch what the runs start from, once, here, before any worker starts: the
    embedded policy's SFT (a minute or more) or a packaged checkpoint's conversion would
    otherwise hold one worker while the others wait on its lock."""
    seen: set[str] = set()
    for spec in specs:
        cfg = spec.config
        key = repr((cfg["model"], policy_data_key(cfg["task"])))
        if key in seen or checkpoint_ready(cfg, policy_data_key(cfg["task"])):
            seen.add(key)
            continue
        seen.add(key)
        quiet_libraries()  # heavy (torch, transformers): a checkpoint is about to be built
        resolve_model_path(cfg, get_task(cfg["task"]))


def starting_checkpoint(spec: RunSpec) -> str:
    """`grpo-ablate fetch`: the run's starting checkpoint, built or fetched now; its folder."""
    prepare_checkpoints([spec])
    return str(resolve_model_path(spec.config, get_task(spec.config["task"])))


def unfinished(specs: list[RunSpec]) -> list[RunSpec]:
    """The runs without a final record (completed or diverged), or short of their look."""
    return [s for s in specs if not reached(s)]


def plan(specs: list[RunSpec]) -> tuple[list[RunSpec], int]:
    """The runs of a sweep that still need training (no completed or diverged record), after
    copying in what the run cache holds; and how many were copied."""
    todo, reused = [], 0
    for spec in specs:
        if reached(spec):
            drop_spent_checkpoints(spec)
            continue
        with run_lock(spec.sweep_dir, spec.run_id) as held:
            if held and not record_exists(spec.run_dir) and run_cache.adopt(spec):
                drop_checkpoints(spec.run_dir)  # an interrupted attempt's: the cache had it whole
                (spec.run_dir / PAUSE_NAME).unlink(missing_ok=True)
                reused += 1
                continue
        todo.append(spec)
    return todo, reused


def launch_unfinished(specs: list[RunSpec], launch: Callable[[list[list[str]]], object],
                      describe: Callable[[int, int], str]) -> int:
    """Launch the runs of a set that have no record: TRL's checks on them, the run cache,
    their starting checkpoints, then `launch(jobs)` of those still to train (one Hydra
    launch), with progress read from disk. `describe(to_train, reused)` is the line said
    first. Returns how many were to train."""
    check_trainable(unfinished(specs))
    todo, reused = plan(specs)
    prepare_checkpoints(todo)
    say(describe(len(todo), reused))
    if todo:  # a finished set starts no launcher, no worker, no model
        with progress_from_disk(specs):
            launch(launcher_jobs(todo))
    return len(todo)
