"""The KL penalty in the reward instead of in the loss (verl's `use_kl_in_reward`, NeMo-RL,
OpenRLHF, ROLL; "A Comedy of Estimators", arXiv 2512.21852). Each completion's reward loses
coef times its k1 estimate of the KL to the reference, summed over its tokens as verl sums
its token-level rewards into GRPO's outcome score,

    r'_i = r_i - coef * sum_t (log pi_sample(y_t) - log pi_ref(y_t))

and its group advantage is computed from r' with TRL's scaling (trainer.scale_rewards). The
KL term leaves TRL's loss: trainer.beta only builds the reference model (and is the usual
coefficient, `hooks.kl_in_reward: ${trainer.beta}`). The penalty is a constant of the
sample, so it carries no gradient of its own: it acts only through the advantage.
It replaces TRL's group advantage at the advantages point."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, StepBatch, register
from grpo_ablate.hook_tricks.groups import kept_rewards, trl_scale, zero_where_dropped


def kl_penalised_advantages(rewards: Any, kl_to_ref: Any, coef: float, group_size: int,
                            scale_rewards: str, keep: Any | None = None) -> Any:
    """Every completion's group advantage of r - coef * KL (groups of `group_size`)."""
    import torch

    r = kept_rewards(rewards, keep) - coef * kl_to_ref.to(torch.float64)
    grouped = r.view(-1, group_size)
    centred = (grouped - grouped.nanmean(1, keepdim=True)).reshape(-1)
    return centred / trl_scale(r, group_size, scale_rewards)


def kl_alike(kl_to_ref: Any, group_size: int) -> Any:
    """[groups] bool: the group's KLs are equal up to float32 rounding of their sums."""
    import torch

    grouped = kl_to_ref.view(-1, group_size)
    return torch.isclose(grouped, grouped[:, :1], rtol=1e-5, atol=1e-6).all(1)


def _at_advantages(batch: StepBatch, coef: float) -> Any:
    if batch.kl_to_ref is None:
        raise RuntimeError("hooks.kl_in_reward: no KL to the reference was handed to the "
                           "advantages point: re-check grpo_ablate/training/trl_layer/dispatch.py")
    kl = batch.kl_to_ref.to(batch.rewards.device)
    new = zero_where_dropped(kl_penalised_advantages(batch.rewards, kl, float(coef),
                                                     batch.group_size, batch.scale_rewards,
                                                     batch.keep), batch.advantages.dtype)
    if batch.scale_rewards == "batch":
        return new
    # A penalty equal across a group (none at all, say, on the reference's own weights; or
    # identical completions, whose sums differ by rounding alone) shifts its rewards alike
    # and leaves its advantages as TRL computed them: TRL's 1e-4 in a group of equal rewards
    # would otherwise turn the rounding into advantages.
    alike = kl_alike(kl, batch.group_size).repeat_interleave(batch.group_size)
    return new.where(~alike.to(new.device), batch.advantages)


def _check(coef: float, cfg: dict) -> str | None:
    if not cfg["trainer"]["beta"]:
        return ("hooks.kl_in_reward: needs the reference model, which trainer.beta > 0 builds; "
                "allowed: trainer.beta > 0 (its KL term leaves the loss), not 0")
    return None


register(HookTrick(
    "kl_in_reward", "the KL to the reference subtracted from the reward (k1 per token), not "
    "added to the loss",
    rule=(lambda x: isinstance(x, int | float) and not isinstance(x, bool) and x > 0,
          "a number > 0 (the KL coefficient; its trick file takes trainer.beta, "
          "which must be > 0 to build the reference)"),
    replaces="the group advantage (one advantage estimator at a time)",
    advantages=_at_advantages, check=_check, kl_from_loss=True, order=5))
