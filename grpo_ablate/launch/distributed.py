"""One run on several processes, and runs pinned to their own GPUs.

`launch.processes=N` starts the run under `accelerate launch` (DDP, or DeepSpeed ZeRO-2/3 per
`launch.accelerate`, from the configs in conf/accelerate/). The sweep machinery (skip, lock,
record) stays in the launching process: the N processes train, the first one writes the
result to a private folder, and the launching process turns it into the run's record. A
process that fails writes its error there and exits; accelerate's launcher (torchrun) then
ends the others, and the run is recorded `failed` with that error: the sweep goes on.

`launch.gpus_per_job=K` gives each run K GPUs of its own (CUDA_VISIBLE_DEVICES), taken from
machine-wide lock files, so a parallel sweep (launcher=joblib) runs one arm per GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path

from grpo_ablate.config import RunSpec
from grpo_ablate.config.layout import gpus_for
from grpo_ablate.config.paths import ACCELERATE_DIR
from grpo_ablate.errors import UserError
from grpo_ablate.models import resolve_model_path
from grpo_ablate.records import RunRecord, atomic_write_text, try_lock
from grpo_ablate.runtime import apply_thread_share, quiet_libraries, visible_gpus
from grpo_ablate.tasks import get_task
from grpo_ablate.training.checkpoint import announce_resume
from grpo_ablate.training.outcome import make_record

RESULT, ERRORS, LOG = "result.json", "error-rank*.txt", "processes.log"
GPU_LOCKS = Path(tempfile.gettempdir()) / "grpo-ablate-gpu-locks"


# ---------------------------------------------------------------------------- placement
@contextmanager
def reserve_gpus(count: int, gpus: list[str], lock_dir: Path = GPU_LOCKS,
                 wait_s: float = 0.5) -> Iterator[list[str]]:
    """Hold `count` of `gpus` for the duration (one lock file per GPU, machine-wide, so
    concurrent sweeps share them too); waits until that many are free."""
    if count > len(gpus):
        raise UserError(f"launch.gpus_per_job={count}: only {len(gpus)} GPU(s) visible "
                        f"({','.join(gpus) or 'none'}); allowed: at most {len(gpus)}")
    lock_dir.mkdir(parents=True, exist_ok=True)
    while True:
        with ExitStack() as held:
            mine: list[str] = []
            for gpu in gpus:
                lock = try_lock(lock_dir / f"gpu-{gpu}.lock")
                if lock is None:
                    continue
                held.callback(lock.release)
                mine.append(gpu)
                if len(mine) == count:
                    yield mine
                    return
        time.sleep(wait_s)


def needs_processes(config: dict) -> bool:
    """Whether the run trains in child processes (several, or pinned to its own GPUs)."""
    pinned = config["launch"].get("gpus_per_job") is not None and gpus_for(config) > 0
    return config["launch"]["processes"] > 1 or pinned


# ---------------------------------------------------------------------------- launching
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def threads_per_process(processes: int) -> int:
    """Each of a run's processes gets its share of the cores the run was given (a parallel
    launcher's worker share, GRPO_ABLATE_THREADS, or the machine's)."""
    return max(1, int(os.environ.get("GRPO_ABLATE_THREADS") or os.cpu_count() or 1) // processes)


# Runs a command tied to the process that starts it (Linux's parent-death signal, armed
# before the exec and kept through it): `accelerate launch` then ends with the sweep process
# that holds the run's lock, however that process ends, and its ranks end with it.
TIED = ("import ctypes, os, signal, sys\n"
        "if sys.platform.startswith('linux'):\n"
        "    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG\n"
        "    if os.getppid() != int(sys.argv[1]):\n"
        "        os._exit(1)  # the parent died before the signal was armed\n"
        "os.execv(sys.argv[2], sys.argv[2:])\n")


def tied_to_this_process(command: list[str]) -> list[str]:
    """`command` (its first word an executable's path), ended when this process ends."""
    return [sys.executable, "-I", "-c", TIED, str(os.getpid()), *command]


def launch_command(config: dict, spec_file: Path, work: Path) -> list[str]:
    """`accelerate launch` with the shipped config, N processes, this module as the script."""
    launch = config["launch"]
    procs = launch["processes"]
    threads = threads_per_process(procs)
    return [sys.executable, "-m", "accelerate.commands.launch",
            "--config_file", str(ACCELERATE_DIR / f"{launch['accelerate']}.yaml"),
            "--num_processes", str(procs), "--num_machines", "1",
            "--main_process_port", str(launch.get("port") or free_port()),
            "--num_cpu_threads_per_process", str(threads),
            "-m", "grpo_ablate.launch.distributed", str(spec_file), str(work)]


def train_in_processes(spec: RunSpec) -> tuple[RunRecord, list[dict]]:
    """Train `spec` in child processes; never raises for what happens in them."""
    cfg = spec.config
    start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="grpo-ablate-processes-"))
    try:
        # Built (or found in the cache) once, here, not raced for by N processes.
        resolve_model_path(cfg, get_task(cfg["task"]))
        announce_resume(spec)  # the processes' own output goes to their log
        spec_file = work / "spec.json"
        spec_file.write_text(json.dumps({"config": cfg, "run_id": spec.run_id}))
        gpus = gpus_for(cfg)
        with ExitStack() as stack:
            env = dict(os.environ)
            if gpus:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(
                    stack.enter_context(reserve_gpus(gpus, visible_gpus())))
            env["GRPO_ABLATE_THREADS"] = str(threads_per_process(cfg["launch"]["processes"]))
            with open(work / LOG, "wb") as log:
                code = subprocess.run(tied_to_this_process(launch_command(cfg, spec_file, work)),
                                      env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        if code == 0 and (work / RESULT).is_file():
            data = json.loads((work / RESULT).read_text())
            data["record"].pop("checksum", None)
            # The run's cost includes starting its processes.
            data["record"]["wall_seconds"] = round(time.perf_counter() - start, 3)
            return RunRecord(**data["record"]), data["history"]
        error = first_error(work, code)
    except Exception as exc:  # noqa: BLE001 - a run that cannot start is recorded, not raised
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if os.environ.get("GRPO_ABLATE_KEEP_PROCESS_LOGS"):
            print(f"process logs kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return make_record(spec, "failed", error, time.perf_counter() - start), []


def first_error(work: Path, code: int) -> str:
    """The error of the process that failed first, else the end of the processes' log."""
    errors = sorted(work.glob(ERRORS), key=lambda p: p.stat().st_mtime)
    if errors:
        return errors[0].read_text().strip()
    tail = (work / LOG).read_text(errors="replace").strip().splitlines()[-5:] \
        if (work / LOG).is_file() else []
    return f"the run's processes exited with code {code}: " + " | ".join(tail)


# ---------------------------------------------------------------------------- one process
def die_with_launcher() -> None:
    """A rank process ends when the launcher that started it does, however it ended: torchrun
    starts the ranks in their own session, so a SIGKILL of the run's process group (a user's
    kill, a timeout) would leave them training, holding their GPUs, and writing into the run
    folder the resumed run now owns. Linux's parent-death signal; elsewhere nothing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the launcher died before the signal was armed
        os._exit(1)


def main(argv: list[str]) -> int:
    """One of the N processes (started by `accelerate launch`)."""
    die_with_launcher()
    spec_file, work = Path(argv[0]), Path(argv[1])
    data = json.loads(spec_file.read_text())
    spec = RunSpec(config=data["config"], run_id=data["run_id"])
    rank = int(os.environ.get("RANK", "0"))
    quiet_libraries()
    apply_thread_share()
    try:
        # heavy (torch, transformers, TRL): this is a process that trains
        from grpo_ablate.training.train import train_one

        record, history = train_one(spec, raise_errors=True)
    except BaseException as exc:  # noqa: BLE001 - reported to the launching process
        (work / f"error-rank{rank}.txt").write_text(f"rank {rank}: {type(exc).__name__}: {exc}")
        traceback.print_exc()
        return 1
    if rank == 0:
        atomic_write_text(work / RESULT, json.dumps({"record": asdict(record),
                                                     "history": history}))
    import torch.distributed as dist  # heavy: already loaded by the training above

    if dist.is_initialized():  # every process done writing, then a clean gloo/NCCL exit
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
