"""This process: where its caches go, its torch threads, its rank in a multi-process run,
quiet libraries, the installed versions and the checkout's commit."""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import os
import subprocess
import warnings
from functools import cache
from pathlib import Path


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


@contextlib.contextmanager
def build_threads():
    """Torch threads while this process builds a checkpoint (the embedded policy's SFT): a
    parallel launcher's worker share (GRPO_ABLATE_THREADS), else one. A 2-layer model gains
    little from a second thread (5.5 s against 7.0 s for 150 steps alone on 2 cores) and loses
    much where another process holds a core (27 s against 6.5 s): threads that wait on each
    other. The weights are the same either way (bitwise, 1 or 2 threads)."""
    import torch  # heavy: only in a process about to build

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, int(os.environ.get("GRPO_ABLATE_THREADS") or 1)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def process_rank() -> int:
    """This process's rank in a multi-process run (set by `accelerate launch`); 0 alone."""
    return int(os.environ.get("RANK", "0"))


def package_version(name: str) -> str | None:
    """An installed package's version, without importing it."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@cache
def git_sha() -> str | None:
    """The checkout's commit; None for an installed wheel (no .git beside the package)."""
    checkout = Path(__file__).resolve().parents[2]  # runtime/process.py in the package
    if not (checkout / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None
