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


def shaping_in_reward_units(hooks: dict, rewards: list[float]) -> dict:
    """Hooks set as quantiles of the SFT policy's `rewards` (task.shaping.scale=sft_quantiles),
    in reward units: the clip bounds and the filter threshold are those quantiles, and the
    length penalty's coefficient is that fraction of the rewards' 5-95% spread."""
    r = torch.tensor(rewards, dtype=torch.float64)

    def q(level: float) -> float:
        return float(torch.quantile(r, level))

    out = dict(hooks)
    if hooks.get("reward_clip") is not None:
        out["reward_clip"] = {"low": q(hooks["reward_clip"]["low"]),
                              "high": q(hooks["reward_clip"]["high"])}
    if hooks.get("length_penalty"):
        out["length_penalty"] = hooks["length_penalty"] * (q(0.95) - q(0.05))
    if hooks.get("filter_low_reward") is not None:
        window = hooks["filter_low_reward"]
        out["filter_low_reward"] = {**window, "threshold": q(window["threshold"])}
    return out


def shaping_values(hooks: dict) -> dict[str, float]:
    """The reward tricks' values as the trainer used them, in reward units (for the record)."""
    out: dict[str, float] = {}
    if hooks.get("reward_clip") is not None:
        out["reward_clip_low"] = float(hooks["reward_clip"]["low"])
        out["reward_clip_high"] = float(hooks["reward_clip"]["high"])
    if hooks.get("length_penalty"):
        out["length_penalty"] = float(hooks["length_penalty"])
    if hooks.get("filter_low_reward") is not None:
        out["filter_threshold"] = float(hooks["filter_low_reward"]["threshold"])
    return out
