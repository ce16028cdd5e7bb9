"""Batch-level advantage normalisation (REINFORCE++'s, and "Tricks or Traps? A Deep Dive into
RL for LLM Reasoning", arXiv 2508.08221, section 4.1's batch-level): each completion's
reward standardised over the whole step's batch, every prompt's completions together,

    A_i = (r_i - mean_batch) / (std_batch + 1e-4)

instead of over its own group (TRL's scale_rewards=batch keeps the group mean and divides
by the batch std; this arm takes the batch mean too). Dropped rows are left out of both.
It replaces TRL's group advantage at the advantages point."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, StepBatch, register
from grpo_ablate.hook_tricks.groups import (
    TRL_EPSILON,
    kept_rewards,
    nan_std,
    zero_where_dropped,
)


def batch_advantages(rewards: Any, keep: Any | None = None) -> Any:
    """Every completion's reward standardised over the batch's kept rows."""
    r = kept_rewards(rewards, keep)
    return (r - r.nanmean()) / (nan_std(r) + TRL_EPSILON)


def _at_advantages(batch: StepBatch, on: bool) -> Any:
    return zero_where_dropped(batch_advantages(batch.rewards, batch.keep),
                              batch.advantages.dtype)


register(HookTrick(
    "batch_advantage", "advantages standardised over the batch (batch mean and batch std)",
    rule=(lambda x: isinstance(x, bool), "true or false"),
    replaces="the group advantage (one advantage estimator at a time)",
    excludes=(("global_adv_norm", "both standardise over the batch; global_adv_norm after the "
               "group z-score"),),
    advantages=_at_advantages, order=5))
