"""The positive-sample NLL (VAPO, arXiv 2504.05118, section 4.3; NeMo-RL, ROLL): coef times
the negative log-likelihood of the correct completions' tokens (the task's reward, before
any shaping, at least `correct_at`), averaged over those tokens, added to the policy loss,
to use the rare correct samples more. VAPO's coef: 0.1. A micro-batch with no correct
completion adds nothing. A loss term (the `loss_term` point); each completion's task reward
travels with its row."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, TokenBatch, register
from grpo_ablate.hook_tricks.shared import needs_right_answers
from grpo_ablate.values import is_number


def positive_nll(batch: TokenBatch, coef: float, correct_at: float) -> tuple[Any, Any]:
    """-coef log pi on the tokens of the completions whose reward reached `correct_at`."""
    if batch.rewards is None:
        raise RuntimeError("hooks.positive_nll: the micro-batch carries no rewards: re-check "
                           "grpo_ablate/training/trl_layer/dispatch.py")
    correct = (batch.rewards >= correct_at)[:, None].to(batch.mask.device)
    return -coef * batch.logps, batch.mask.bool() & correct


register(HookTrick(
    "positive_nll", "coef x the NLL of the correct completions, added to the loss",
    fields={"coef": (lambda x: is_number(x) and x > 0, "a number > 0 (VAPO's 0.1)"),
            "correct_at": (is_number, "a number (a completion whose reward reaches it is "
                                      "correct)")},
    loss_term=lambda batch, v: positive_nll(batch, float(v["coef"]), float(v["correct_at"])),
    applies_to=needs_right_answers("the positive-sample NLL")))
