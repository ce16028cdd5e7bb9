"""The bottom layer: what a process needs to know about the machine it runs on and how to
behave there. Quiet libraries, torch threads, the GPUs it may hand out, whether a CUDA device
can exist at all (asked without importing torch), the cache folder, and the
machine's identity for the records (where a run's numbers were computed).

torch, transformers and TRL are imported inside the functions that need them: importing
this module (every command does) must stay cheap."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import io
import json
import os
import platform
import subprocess
import sys
import threading
import warnings
from functools import cache
from pathlib import Path
from typing import Any

# CPU features that change which numeric kernels torch runs (so a run's last digits).
NUMERIC_CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile",
                     "asimd", "sve")


_SAY = threading.Lock()


def stable_hash(obj: Any, length: int = 16) -> str:
    """The first `length` hex digits of the sha256 of `obj` as sorted-key JSON (values JSON
    cannot hold are written by their str)."""
    blob = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def duration(seconds: float) -> str:
    """A length of time as a person reads it: 4.2 s, 40 s, 12.5 min, 3.5 h."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def say(line: str, stream=None) -> None:
    """One whole line to stderr: progress watchers (threads) and runs print at once, and
    print() writes the text and its newline separately, so lines could interleave."""
    with _SAY:
        out = stream or sys.stderr
        out.write(line + "\n")
        out.flush()


def cache_root() -> Path:
    """Built policies, converted checkpoints, cached start evaluations: $GRPO_ABLATE_CACHE,
    else ~/.cache/grpo-ablate."""
    return Path(os.environ.get("GRPO_ABLATE_CACHE", Path.home() / ".cache" / "grpo-ablate"))


def quiet_libraries() -> None:
    """Library chatter (deprecations, weight-loading bars, W&B banners) is not for our users;
    called where training starts, in every process that trains."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="transformers|trl|torch")
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # heavy (transformers, datasets): loaded here because the process is about to train
    with contextlib.redirect_stdout(io.StringIO()):  # "[INFO] Running in WANDB offline mode"
        import transformers.integrations.integration_utils  # noqa: F401
    import datasets
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def apply_thread_share() -> None:
    """Torch threads for this process: a parallel launcher's worker share
    (GRPO_ABLATE_THREADS, set per worker), else torch's default."""
    threads = os.environ.get("GRPO_ABLATE_THREADS")
    if threads:
        import torch  # heavy: only in a process about to train

        torch.set_num_threads(int(threads))


def process_rank() -> int:
    """This process's rank in a multi-process run (set by `accelerate launch`); 0 alone."""
    return int(os.environ.get("RANK", "0"))


def cuda_may_exist() -> bool:
    """False when this machine has no GPU driver at all (no NVIDIA or ROCm device nodes):
    then no CUDA device can be visible, and torch need not be imported to know it."""
    nodes = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/kfd", "/dev/dxg")
    return any(os.path.exists(p) for p in nodes)


def cuda_available() -> bool:
    if not cuda_may_exist():
        return False
    import torch  # heavy: only on a machine with a GPU driver

    return torch.cuda.is_available()


def visible_gpus() -> list[str]:
    """The GPUs this process may hand out: CUDA_VISIBLE_DEVICES if set, else every device."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip() and d.strip() != "-1"]
    if not cuda_may_exist():
        return []
    import torch  # heavy: only on a machine with a GPU driver

    return [str(i) for i in range(torch.cuda.device_count())]


def package_version(name: str) -> str | None:
    """An installed package's version, without importing it."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@cache
def _cpu() -> tuple[str, tuple[str, ...]]:
    """The CPU's model name and its numeric-kernel flags (Linux /proc/cpuinfo; else what
    the platform module says)."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "Model name") and model in ("", platform.machine(),
                                                                  platform.processor()):
                model = value.strip()
            elif key in ("flags", "Features"):
                flags |= set(value.split())
    except OSError:
        pass
    return model, tuple(f for f in NUMERIC_CPU_FLAGS if f in flags)


def machine(device: str = "cpu", threads: int | None = None) -> dict:
    """Where a run's numbers were computed: CPU model and numeric flags, the device
    (`cpu`, or the GPU's name and compute capability), the library versions that pick the
    kernels, torch's threads, and `numeric_id`: a hash of all of these but the threads
    (measured here: the same machine gives bitwise-identical runs at any thread count and
    under any launcher, another CPU model or a GPU does not)."""
    model, flags = _cpu()
    out = {"cpu": model, "cpu_flags": list(flags), "device": device,
           "torch": package_version("torch"), "transformers": package_version("transformers"),
           "trl": package_version("trl"), "threads": threads}
    ident = {k: v for k, v in out.items() if k != "threads"}
    out["numeric_id"] = stable_hash(ident, 12)
    return out


def describe_machine(m: dict) -> str:
    """`Intel(R) Xeon(R) Processor (avx2, avx512_bf16), cpu` for notes and the README."""
    flags = ", ".join(m.get("cpu_flags") or []) or "no AVX-512/AMX"
    return f"{m.get('cpu') or '?'} ({flags}), {m.get('device') or '?'}"


@cache
def device_label(use_cpu: bool) -> str:
    """The device a run computes on, as records name it: `cpu`, or the CUDA device's name,
    compute capability and CUDA version (torch is imported only for a GPU run)."""
    if use_cpu or not cuda_may_exist():
        return "cpu"
    import torch  # heavy: only for a run on a GPU

    if not torch.cuda.is_available():
        return "cpu"
    major, minor = torch.cuda.get_device_capability()
    return f"cuda: {torch.cuda.get_device_name()} (sm_{major}{minor}, CUDA {torch.version.cuda})"


def numeric_id(use_cpu: bool) -> str:
    """The numeric identity of this machine for a run on the CPU or on its GPU."""
    return machine(device_label(use_cpu))["numeric_id"]


def wandb_run_id(run_id: str, sweep_dir: str) -> str:
    """A run's W&B id: unique per sweep folder (two sweeps of the same runs must not collide
    when synced); the run's identity (run_id) stays what it is and is in the config and name."""
    where = str(Path(sweep_dir).resolve())
    return f"{run_id}-{hashlib.sha256(where.encode()).hexdigest()[:8]}"


@cache
def git_sha() -> str | None:
    """The checkout's commit; None for an installed wheel (no .git beside the package)."""
    checkout = Path(__file__).resolve().parent.parent
    if not (checkout / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
