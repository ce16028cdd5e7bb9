"""Zero-variance filtering (ScaleRL, "The Art of Scaling Reinforcement Learning Compute for
LLMs", arXiv 2510.13786, section 3.2; prime-rl's default): groups whose rewards are all equal
are dropped from the step, with no resampling (DAPO's dynamic sampling resamples them). Such
a group already has advantage 0 under GRPO; dropping it takes its tokens out of the loss's
normaliser and its sequences out of the per-sequence average, so the groups that carry a
gradient weigh more. At the drop_samples point."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import DropBatch, HookTrick, register


def varied_groups_keep(rewards: Any, group_size: int) -> Any:
    """[completions] bool: True for the rows of groups whose rewards are not all equal."""
    grouped = rewards.view(-1, group_size)
    varied = grouped.amax(1) > grouped.amin(1)
    return varied.repeat_interleave(group_size)


def _at_drop(batch: DropBatch, on: bool) -> Any:
    return varied_groups_keep(batch.rewards, batch.group_size)


register(HookTrick(
    "zero_variance_filter", "drop groups whose rewards are all equal (no resampling)",
    rule=(lambda x: isinstance(x, bool), "true or false"),
    excludes=(("dynamic_sampling", "dynamic sampling resamples the groups this filter drops: "
               "ScaleRL's filter is the no-resampling alternative to it"),),
    drop_samples=_at_drop, dropped_metric="zero_variance/frac_dropped"))
