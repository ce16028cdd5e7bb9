"""Advantage-side tricks: global re-normalisation and low-reward filtering."""

from __future__ import annotations

import torch


def apply_global_adv_norm(advantages: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """Re-standardise advantages over the whole batch, after TRL's per-group z-score."""
    std = advantages.std() if advantages.numel() > 1 else torch.zeros(())
    return (advantages - advantages.mean()) / (std + eps)


def filter_active(step: int, max_steps: int, start: float, end: float) -> bool:
    """Whether filtering applies at this optimizer step: in [start, end) of training."""
    progress = step / max(1, max_steps)
    return start <= progress < end


def low_reward_keep_mask(rewards: torch.Tensor, threshold: float) -> torch.Tensor:
    """1 for samples kept, 0 for samples whose reward is under the threshold."""
    return (rewards >= threshold).to(torch.long)
