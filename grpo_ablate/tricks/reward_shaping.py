"""Reward clipping and length penalty: applied to each completion's reward before TRL
computes the group advantage, so they change what the advantage sees."""

from __future__ import annotations

import torch


def apply_reward_clip(rewards: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Clamp rewards to [low, high] (the review: only worth it for pathological outliers)."""
    return rewards.clamp(min=low, max=high)


def apply_length_penalty(
    rewards: torch.Tensor, lengths: torch.Tensor, coef: float, max_length: int
) -> torch.Tensor:
    """reward - coef * length / max_length: longer completions lose up to `coef`."""
    return rewards - coef * lengths.to(rewards.dtype) / float(max_length)


def shape_rewards(
    rewards: torch.Tensor,
    lengths: torch.Tensor,
    clip: dict | None,
    length_coef: float,
    max_length: int,
) -> torch.Tensor:
    """The rewards the advantage sees, from TRL's (completions, reward functions) matrix or
    a 1-D vector: every column clipped first (clipping bounds the task reward), then the
    length penalty charged once, on the first column (a cost on top, never clipped away)."""
    out = rewards.clone()
    if clip is not None:
        out = apply_reward_clip(out, clip["low"], clip["high"])
    if length_coef:
        column = out if out.dim() == 1 else out[:, 0]
        column.copy_(apply_length_penalty(column, lengths, length_coef, max_length))
    return out
