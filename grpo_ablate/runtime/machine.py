"""The machine: whether a CUDA device can exist at all (asked without importing torch), the
GPUs a process may hand out, and the machine's identity for the records (where a run's
numbers were computed: a different CPU kind or GPU gives different last digits)."""

from __future__ import annotations

import os
import platform
from functools import cache
from pathlib import Path

from grpo_ablate.runtime.hashing import stable_hash
from grpo_ablate.runtime.process import package_version

# CPU features that change which numeric kernels torch runs (so a run's last digits).
NUMERIC_CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile",
                     "asimd", "sve")


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
