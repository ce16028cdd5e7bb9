"""The MaxRL advantage ("Maximum Likelihood Reinforcement Learning", Tajwar et al. 2026,
arXiv 2602.02710): each completion's reward minus its group's mean, divided by that mean,

    A_i = (r_i - mean) / mean

the 1/p(x) weight of maximum likelihood for a prompt solved with probability p = mean: hard
prompts (few right) weigh more than GRPO gives them. It is defined for rewards in [0, 1] (a
success probability): a group whose mean reward is not positive (none right) has advantage
0. The kept rows of a group (drop_samples) make its mean. It replaces TRL's group advantage
at the advantages point (TRL's std scaling does not apply)."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, StepBatch, register
from grpo_ablate.hook_tricks.groups import kept_rewards, zero_where_dropped


def maxrl_advantages(rewards: Any, group_size: int, keep: Any | None = None) -> Any:
    """Every completion's MaxRL advantage, groups of `group_size` consecutive completions."""
    import torch

    grouped = kept_rewards(rewards, keep).view(-1, group_size)
    mean = grouped.nanmean(1, keepdim=True)
    out = torch.where(mean > 0, (grouped - mean) / mean, torch.zeros_like(grouped))
    return out.masked_fill(grouped.isnan(), float("nan")).reshape(-1)


def _applies_to(on: bool, kind: str) -> str | None:
    if kind == "score":
        return ("MaxRL weighs a prompt by 1 / its success probability (the group's mean "
                "reward in [0, 1]), and a reward model's score is no probability")
    return None


def _at_advantages(batch: StepBatch, on: bool) -> Any:
    new = maxrl_advantages(batch.rewards, batch.group_size, batch.keep)
    return zero_where_dropped(new, batch.advantages.dtype)


register(HookTrick(
    "maxrl", "MaxRL: (r - group mean) / group mean in place of the group z-score",
    rule=(lambda x: isinstance(x, bool), "true or false"),
    replaces="the group advantage (one advantage estimator at a time)",
    advantages=_at_advantages, applies_to=_applies_to, order=5))
