"""DPPO-Binary-TV ("Rethinking the Trust Region in LLM Reinforcement Learning", arXiv
2602.04879; verl's `loss_mode=dppo_tv`, prime-rl's default loss): the trust region is a bound
on the token's probability change, not on its probability ratio. A token whose update would
leave it, p - p_old > high for a positive advantage or p - p_old < -low for a negative one,
leaves the policy gradient; every other token keeps the unclipped surrogate -A r, whose
gradient -A r grad log p is verl's -A sg(r) log p and prime-rl's -A r. prime-rl's defaults:
low 0.2, high 0.2.

At the loss point a masked token's advantage is set to 0, and TRL's ratio clip, which the
mask replaces, is off inside the loss (`ratio_clip_off`; trainer.epsilon keeps its value for
the arms it is compared with). On-policy p = p_old and the mask keeps every token: it acts
on reused batches (against reuse_2x, the ratio clip under the same reuse)."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, TokenBatch, register
from grpo_ablate.hook_tricks.shared import token_ratio_loss
from grpo_ablate.values import is_number


def tv_trust_region(batch: TokenBatch, low: float, high: float) -> Any:
    """[rows, tokens] bool: the tokens DPPO-Binary-TV keeps in the policy gradient."""
    import torch

    change = torch.exp(batch.logps.detach()) - torch.exp(batch.old_logps)
    return torch.where(batch.advantages > 0, change <= high, change >= -low)


def _at_loss(batch: TokenBatch, value: dict) -> Any:
    keep = tv_trust_region(batch, value["low"], value["high"])
    return batch.advantages.where(keep, batch.advantages.new_zeros(()))


def _check(value: dict, cfg: dict) -> str | None:
    if cfg["trainer"].get("delta") is not None:
        return ("hooks.dppo_tv: its trust region replaces the ratio clip, two-sided clipping "
                f"included; allowed: trainer.delta null, not {cfg['trainer']['delta']}")
    return token_ratio_loss("hooks.dppo_tv", cfg)


register(HookTrick(
    "dppo_tv", "DPPO-Binary-TV: tokens whose probability moved past the bound leave the "
    "policy gradient, in place of the ratio clip",
    replaces="the policy loss (verl's loss modes are one at a time)",
    fields={"low": (lambda x: is_number(x) and 0 < x <= 1, "a probability change in (0, 1]"),
            "high": (lambda x: is_number(x) and 0 < x <= 1, "a probability change in (0, 1]")},
    token_advantages=_at_loss, check=_check, ratio_clip_off=True))
