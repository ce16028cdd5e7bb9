"""Advantage-side tricks: global re-normalisation and low-reward filtering.

In a multi-process run each process holds a share of the batch; `gather` (accelerate's, or
the identity alone) joins the shares, so these compute over the whole batch either way."""

from __future__ import annotations

from collections.abc import Callable

import torch

Gather = Callable[[torch.Tensor], torch.Tensor]


def apply_global_adv_norm(advantages: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """Re-standardise advantages over the whole batch, after TRL's per-group z-score."""
    std = advantages.std() if advantages.numel() > 1 else torch.zeros(())
    return (advantages - advantages.mean()) / (std + eps)


def global_adv_norm_share(local: torch.Tensor, gather: Gather, rank: int) -> torch.Tensor:
    """This process's advantages, re-standardised over every process's share of the batch
    (not over its own share alone: with two processes that would be two different norms)."""
    n = local.size(0)
    return apply_global_adv_norm(gather(local))[rank * n:(rank + 1) * n]


def kept_loss_scale(keep: torch.Tensor, gather: Gather, processes: int) -> torch.Tensor:
    """The factor that turns a per-sequence loss averaged over this process's micro-batch
    (which DDP then averages over processes) into an average over the sequences kept by
    the filter on every process: n_local * processes / kept everywhere."""
    kept = gather(keep.sum().reshape(1)).sum()
    return keep.numel() * processes / kept.clamp(min=1)


def filter_active(step: int, max_steps: int, start: float, end: float) -> bool:
    """Whether filtering applies at this optimizer step: in [start, end) of training."""
    progress = step / max(1, max_steps)
    return start <= progress < end


def low_reward_keep_mask(rewards: torch.Tensor, threshold: float) -> torch.Tensor:
    """1 for samples kept, 0 for samples whose reward is under the threshold."""
    return (rewards >= threshold).to(torch.long)
