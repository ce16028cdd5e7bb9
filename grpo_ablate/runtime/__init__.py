"""The bottom layer: what a process needs to know about the machine it runs on and how to
behave there. One concept per module:

hashing.py   stable hashes of config data, and a run's W&B id from its identity and folder
output.py    whole lines to stderr, durations as a person reads them
process.py   this process: its cache folder, threads, rank, quiet libraries, the installed
             versions and the checkout's commit
machine.py   the machine: whether a GPU can exist (asked without importing torch), the GPUs
             a process may hand out, and its identity for the records (where a run's
             numbers were computed)

torch, transformers and TRL are imported inside the functions that need them: importing
this package (every command does) must stay cheap."""

from grpo_ablate.runtime.hashing import stable_hash, wandb_run_id
from grpo_ablate.runtime.machine import (
    NUMERIC_CPU_FLAGS,
    cuda_available,
    cuda_may_exist,
    describe_machine,
    device_label,
    machine,
    numeric_id,
    visible_gpus,
)
from grpo_ablate.runtime.output import duration, say
from grpo_ablate.runtime.process import (
    apply_thread_share,
    build_threads,
    cache_root,
    git_sha,
    package_version,
    process_rank,
    quiet_libraries,
)

__all__ = [
    "NUMERIC_CPU_FLAGS", "apply_thread_share", "build_threads", "cache_root", "cuda_available",
    "cuda_may_exist", "describe_machine", "device_label", "duration", "git_sha", "machine", "numeric_id",
    "package_version", "process_rank", "quiet_libraries", "say", "stable_hash", "visible_gpus",
    "wandb_run_id",
]
