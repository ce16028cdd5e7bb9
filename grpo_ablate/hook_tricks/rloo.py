"""The leave-one-out baseline (RLOO: "Back to Basics: Revisiting REINFORCE Style Optimization
for Learning from Human Feedback in LLMs", Ahmadian et al. 2024, arXiv 2402.14740, Eq. 4):
each completion's baseline is the mean reward of the other completions of its prompt,

    A_i = (r_i - 1/(n-1) sum_{j != i} r_j) / s

with s what TRL divides by (trainer.scale_rewards: the group's std + 1e-4, the batch's, or
1). n counts the group's kept rows; a group with one kept row has no baseline (advantage 0).
Since r_i - mean_{-i} = n/(n-1) (r_i - mean), under group-std scaling RLOO is GRPO's
advantage times G/(G-1): with Adam, which is nearly blind to a constant gradient scale, a
near-null arm, kept as the catalog's control of the false-positive rate (docs/verdicts.md).
It replaces TRL's group advantage at the advantages point."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, StepBatch, register
from grpo_ablate.hook_tricks.groups import kept_rewards, trl_scale, zero_where_dropped


def leave_one_out_advantages(rewards: Any, group_size: int, scale_rewards: str,
                             keep: Any | None = None) -> Any:
    """Every completion's RLOO advantage, groups of `group_size` consecutive completions."""
    r = kept_rewards(rewards, keep)
    grouped = r.view(-1, group_size)
    n = (~grouped.isnan()).sum(1, keepdim=True)
    others = (grouped.nansum(1, keepdim=True) - grouped) / (n - 1)
    centred = (grouped - others).reshape(-1)
    return centred / trl_scale(r, group_size, scale_rewards)


def _at_advantages(batch: StepBatch, on: bool) -> Any:
    new = leave_one_out_advantages(batch.rewards, batch.group_size, batch.scale_rewards,
                                   batch.keep)
    return zero_where_dropped(new, batch.advantages.dtype)


register(HookTrick(
    "rloo", "the leave-one-out baseline (RLOO) in place of the group mean",
    rule=(lambda x: isinstance(x, bool), "true or false"),
    replaces="the group advantage (one advantage estimator at a time)",
    advantages=_at_advantages, order=5))
