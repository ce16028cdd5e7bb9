"""KL-Cov ("The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models",
arXiv 2505.22617, section 5; verl's `loss_mode=kl_cov`, `compute_policy_loss_kl_cov`): the
unclipped surrogate -A r, and on the `ratio` share of a micro-batch's tokens (at least one)
with the largest covariance term (A - mean A)(log p - mean log p), a penalty
coef |log r| (r: the policy's probability over the sampler's). verl's defaults: ratio 0.0002,
coef 0.1. Its trick file turns the ratio clip off (verl's kl_cov has none).

At the loss point the penalty is carried by the advantage: A' = A - coef sign(log r) / r (r
held constant) gives -A' r the gradient of -A r + coef |log r|, TRL's loss and normaliser
unchanged. On-policy r = 1 and the penalty has no gradient: it acts on reused batches."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, TokenBatch, register
from grpo_ablate.hook_tricks.shared import token_ratio_loss
from grpo_ablate.values import is_number


def kl_cov_tokens(batch: TokenBatch, ratio: float) -> Any:
    """A [rows, tokens] bool mask of the tokens KL-Cov penalises."""
    import torch

    valid = batch.mask.bool()
    advantages, logps = batch.advantages[valid], batch.logps.detach()[valid]
    cov = (advantages - advantages.mean()) * (logps - logps.mean())
    count = max(1, int(cov.numel() * ratio))
    chosen = torch.zeros(int(valid.sum()), dtype=torch.bool, device=cov.device)
    chosen[torch.topk(cov, min(count, cov.numel())).indices] = True
    out = torch.zeros_like(valid)
    out[valid] = chosen
    return out


def _at_loss(batch: TokenBatch, value: dict) -> Any:
    import torch

    log_ratio = batch.logps.detach() - batch.old_logps
    shift = value["coef"] * torch.sign(log_ratio) / torch.exp(log_ratio)
    return torch.where(kl_cov_tokens(batch, value["ratio"]), batch.advantages - shift,
                       batch.advantages)


register(HookTrick(
    "kl_cov", "KL-Cov: a |log ratio| penalty on the highest-covariance tokens",
    replaces="the policy loss (verl's loss modes are one at a time)",
    fields={"ratio": (lambda x: is_number(x) and 0 < x <= 1, "a fraction in (0, 1]"),
            "coef": (lambda x: is_number(x) and x >= 0, "a number >= 0")},
    token_advantages=_at_loss, check=lambda value, cfg: token_ratio_loss("hooks.kl_cov", cfg)))
