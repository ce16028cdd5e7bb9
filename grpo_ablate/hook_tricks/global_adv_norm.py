"""Global advantage normalisation: the advantages re-standardised over the whole step's batch
(every process's share) after TRL's per-group z-score. At the advantages point, first."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, StepBatch, register


def apply_global_adv_norm(advantages: Any, eps: float = 1e-4) -> Any:
    """Re-standardise advantages over the whole batch, after TRL's per-group z-score."""
    import torch

    std = advantages.std() if advantages.numel() > 1 else torch.zeros(())
    return (advantages - advantages.mean()) / (std + eps)


def _at_advantages(batch: StepBatch, on: bool) -> Any:
    return apply_global_adv_norm(batch.advantages)


register(HookTrick(
    "global_adv_norm", "re-standardise advantages over the batch after the group z-score",
    rule=(lambda x: isinstance(x, bool), "true or false"),
    measure=(None, "a config value: acts on every step"),
    advantages=_at_advantages, order=10))
