"""The length penalty: reward -= coef x completion_length / max_completion_length, charged
once, on the first reward function's column, after the clip (a cost on top, never clipped
away). A penalty equal for every member of a group is removed by the group mean: it acts
only where lengths differ within a group, which is what its activity counts."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, RewardBatch, counted_share, register
from grpo_ablate.values import is_number


def apply_length_penalty(rewards: Any, lengths: Any, coef: float, max_length: int) -> Any:
    """reward - coef * length / max_length: longer completions lose up to `coef`."""
    return rewards - coef * lengths.to(rewards.dtype) / float(max_length)


def _at_rewards(batch: RewardBatch, coef: float) -> tuple[Any, Any]:
    out = batch.rewards.clone()
    column = out if out.dim() == 1 else out[:, 0]
    column.copy_(apply_length_penalty(column, batch.lengths, coef, batch.max_length))
    per_group = batch.lengths.view(-1, batch.group_size).float()
    varied = per_group.max(1).values > per_group.min(1).values
    return out, varied.repeat_interleave(batch.group_size)  # every member of a varied group


register(HookTrick(
    "length_penalty", "reward -= coef * completion_length / max_completion_length",
    rule=(lambda x: is_number(x) and x >= 0, "a number >= 0"),
    measure=("length_penalty_groups", "groups whose advantages the length penalty changed"),
    shape_rewards=_at_rewards, order=20,
    details=lambda counts: {"length_penalty_groups": counted_share(counts, "length_penalty")},
    # As a quantile setting: that fraction of the SFT policy's 5-95% reward spread.
    in_reward_units=lambda coef, q: coef * (q(0.95) - q(0.05)),
    reward_values=lambda coef: {"length_penalty": float(coef)}))
