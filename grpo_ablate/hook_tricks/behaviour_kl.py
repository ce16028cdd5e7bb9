"""The squared log-ratio to the behaviour policy (prime-rl's default loss, `kl_tau`; Kimi
K2.5, arXiv 2602.02276): a term tau (log pi - log pi_old)^2 per token added to the loss, its
mean over the micro-batch's tokens, pulling the policy back toward the one that sampled the
batch. prime-rl's default tau: 1e-3. On-policy the log-ratio is 0 and the term has no
gradient: it acts on reused batches (its trick file uses each batch twice, against
reuse_2x). A loss term (the `loss_term` point)."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, TokenBatch, register
from grpo_ablate.values import is_number


def squared_log_ratio(batch: TokenBatch, tau: float) -> tuple[Any, Any]:
    """tau (log pi - log pi_old)^2 on every counted token."""
    return tau * (batch.logps - batch.old_logps) ** 2, batch.mask.bool()


register(HookTrick(
    "behaviour_kl", "tau x the squared log-ratio to the sampling policy, added to the loss",
    rule=(lambda x: is_number(x) and x > 0, "a number > 0 (tau; prime-rl's default 1e-3)"),
    loss_term=lambda batch, tau: squared_log_ratio(batch, float(tau))))
