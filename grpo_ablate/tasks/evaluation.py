"""What every task's held-out evaluation shares: it must never change the training run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def isolated_rng(seed: int) -> Iterator[None]:
    """Seed the evaluation's sampling, and restore every RNG the seeding touches afterwards:
    the CPU generator and every CUDA device's. (`fork_rng(devices=[])` alone restores only
    the CPU, while `manual_seed` reseeds CUDA too: evaluations would perturb GPU training.)"""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices, device_type="cuda"):
        torch.manual_seed(seed)
        yield
