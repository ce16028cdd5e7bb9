"""The reward's scale: the task's reward (the first reward function's column) mapped
affinely so that 0 becomes `low` and 1 becomes `high` ({0, 1} -> {-1, 1} with low=-1,
high=1), before TRL's group advantage ("Tricks or Traps? A Deep Dive into RL for LLM
Reasoning", arXiv 2508.08221, section 4.1, compares normalisations under both scales).

An affine map cancels in any advantage that subtracts a mean and divides by a std (the
group's or the batch's), up to TRL's 1e-4 epsilon: against a mean-and-std baseline this arm
is the test of whether the paper's reported difference survives that identity, and the
expected verdict is no_effect. Where the advantage is not std-scaled
(trainer.scale_rewards=none) it multiplies every advantage by high - low. At the rewards
point, after the clip (order 20)."""

from __future__ import annotations

import json
from typing import Any

from grpo_ablate.hook_tricks import HookTrick, RewardBatch, register
from grpo_ablate.values import is_number


def rescale_reward(rewards: Any, low: float, high: float) -> Any:
    """The task's reward column mapped 0 -> low, 1 -> high; the other columns as they are."""
    out = rewards.clone()
    out[:, 0] = low + (high - low) * rewards[:, 0]
    return out


def _at_rewards(batch: RewardBatch, value: dict) -> tuple[Any, Any]:
    new = rescale_reward(batch.rewards, value["low"], value["high"])
    return new, new[:, 0] != batch.rewards[:, 0]


def _check(value: dict, cfg: dict) -> str | None:
    if not value["low"] < value["high"]:
        return f"hooks.reward_scale={json.dumps(value)}: must have low < high (0 -> low, 1 -> high)"
    return None


register(HookTrick(
    "reward_scale", "the task's reward mapped affinely: 0 -> low, 1 -> high",
    fields={"low": (is_number, "a number below hooks.reward_scale.high"),
            "high": (is_number, "a number above hooks.reward_scale.low")},
    shape_rewards=_at_rewards, check=_check, order=20))
