"""Clip-Cov ("The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models",
arXiv 2505.22617, section 5; verl's `loss_mode=clip_cov`, `compute_policy_loss_clip_cov`):
in each micro-batch, per token, the centred advantage times the centred log-probability
(their covariance term); of the tokens the ratio clip did not already clip whose term lies in
(lb, ub), `ratio` of the micro-batch's tokens (at least one) are drawn at random and leave
the policy gradient. verl's defaults: ratio 0.0002, lb 1, ub 5. At the loss point a dropped
token's advantage is set to 0, which is verl's `corr = 0`: its clipped surrogate is 0, and the
KL term and the normaliser are as before."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, TokenBatch, register
from grpo_ablate.hook_tricks.shared import token_ratio_loss
from grpo_ablate.values import is_number


def covariance(advantages: Any, logps: Any, mask: Any) -> Any:
    """Per token: (A - mean A)(log p - mean log p), the means over the mask's tokens."""
    valid = mask.bool()
    logps = logps.detach()
    return (advantages - advantages[valid].mean()) * (logps - logps[valid].mean())


def clip_cov_keep(batch: TokenBatch, ratio: float, lb: float, ub: float) -> Any:
    """1 for a token that keeps its gradient, 0 for one Clip-Cov drops."""
    import torch

    valid = batch.mask.bool()
    coef = torch.exp(batch.logps.detach() - batch.old_logps)
    unclipped = -batch.advantages * coef
    clipped = -batch.advantages * coef.clamp(1 - batch.epsilon_low, 1 + batch.epsilon_high)
    cov = covariance(batch.advantages, batch.logps, batch.mask)
    candidates = torch.nonzero((cov > lb) & (cov < ub) & valid & ~(clipped > unclipped))
    count = max(int(ratio * int(valid.sum())), 1)
    picked = candidates[torch.randperm(len(candidates), generator=batch.generator)[:count]]
    keep = torch.ones_like(batch.advantages)
    keep[picked[:, 0], picked[:, 1]] = 0
    return keep


def _at_loss(batch: TokenBatch, value: dict) -> Any:
    return batch.advantages * clip_cov_keep(batch, value["ratio"], value["lb"], value["ub"])


def _check(value: dict, cfg: dict) -> str | None:
    if not value["lb"] < value["ub"]:
        return f"hooks.clip_cov: lb={value['lb']}, ub={value['ub']}: must have lb < ub"
    return token_ratio_loss("hooks.clip_cov", cfg)


register(HookTrick(
    "clip_cov", "Clip-Cov: drawn high-covariance tokens leave the policy gradient",
    replaces="the policy loss (verl's loss modes are one at a time)",
    fields={"ratio": (lambda x: is_number(x) and 0 < x <= 1, "a fraction in (0, 1]"),
            "lb": (is_number, "a number below hooks.clip_cov.ub"),
            "ub": (is_number, "a number above hooks.clip_cov.lb")},
    token_advantages=_at_loss, check=_check))
