"""Advantage clipping (ROLL's `advantage_clip`, 2.0 in its documented PPO config; NeMo-RL's
`advantage_clip_low/high`, off by default): every advantage clamped to [-c, c] after the advantage estimator,
so that one right answer in a group of wrong ones (a z-score near sqrt(G-1)) cannot dominate
the step. At the advantages point, after every estimator."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, StepBatch, register
from grpo_ablate.values import is_number


def clip_advantages(advantages: Any, bound: float) -> Any:
    """Advantages clamped to [-bound, bound]."""
    return advantages.clamp(min=-bound, max=bound)


def _at_advantages(batch: StepBatch, bound: float) -> Any:
    return clip_advantages(batch.advantages, bound)


register(HookTrick(
    "adv_clip", "advantages clamped to [-c, c] after the estimator",
    rule=(lambda x: x is None or (is_number(x) and x > 0), "a number > 0, or null (off)"),
    advantages=_at_advantages, order=90))
