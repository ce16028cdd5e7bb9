"""Reward clipping (the review: worth it only for pathological outliers): every reward,
each reward function's column, clamped to [low, high] before TRL's group advantage. At the
rewards point, first of the built-in shaping (the length penalty is charged after it, never
clipped away)."""

from __future__ import annotations

import json
from typing import Any

from grpo_ablate.hook_tricks import HookTrick, RewardBatch, counted_share, register
from grpo_ablate.hook_tricks.shared import shaping_quantiles
from grpo_ablate.values import is_number


def apply_reward_clip(rewards: Any, low: float, high: float) -> Any:
    """Clamp rewards to [low, high]."""
    return rewards.clamp(min=low, max=high)


def _at_rewards(batch: RewardBatch, value: dict) -> tuple[Any, Any]:
    clipped = (batch.rewards < value["low"]) | (batch.rewards > value["high"])
    changed = clipped.any(1) if clipped.dim() > 1 else clipped
    return apply_reward_clip(batch.rewards, value["low"], value["high"]), changed


def _check(value: dict, cfg: dict) -> str | None:
    if not value["low"] < value["high"]:
        return f"hooks.reward_clip={json.dumps(value)}: must have low < high"
    return (shaping_quantiles(cfg, "hooks.reward_clip.low", value["low"])
            or shaping_quantiles(cfg, "hooks.reward_clip.high", value["high"]))


register(HookTrick(
    "reward_clip", "clamp rewards to [low, high] before the group advantage",
    fields={"low": (is_number, "a number below hooks.reward_clip.high"),
            "high": (is_number, "a number above hooks.reward_clip.low")},
    measure=("reward_clip_samples", "samples whose reward the clip changed"),
    shape_rewards=_at_rewards, check=_check, order=10,
    details=lambda counts: {"reward_clip_samples": counted_share(counts, "reward_clip")},
    in_reward_units=lambda v, q: {"low": q(v["low"]), "high": q(v["high"])},
    reward_values=lambda v: {"reward_clip_low": float(v["low"]),
                             "reward_clip_high": float(v["high"])}))

