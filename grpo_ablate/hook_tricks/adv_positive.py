"""W-REINFORCE ("The Surprising Effectiveness of Negative Reinforcement in LLM Reasoning",
arXiv 2506.01347, section 5): the positive samples' share of the gradient weighted by
lambda = 0.1, the negative samples' kept whole. After TRL's group advantage a positive
sample is one with a positive advantage (better than its group's mean): its advantage is
multiplied by `hooks.adv_positive.weight`. Acts at the advantages point."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, StepBatch, register
from grpo_ablate.values import is_number


def weight_positive(advantages: Any, weight: float) -> Any:
    """Positive advantages times `weight`; zero and negative ones as they are."""
    return advantages.where(advantages <= 0, advantages * weight)


def _at_advantages(batch: StepBatch, value: dict) -> Any:
    return weight_positive(batch.advantages, value["weight"])


register(HookTrick(
    "adv_positive", "W-REINFORCE: positive advantages x weight (negative ones whole)",
    fields={"weight": (lambda x: is_number(x) and 0 <= x < 1, "a number in [0, 1)")},
    advantages=_at_advantages))
