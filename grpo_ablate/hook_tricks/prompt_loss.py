"""Prompt-level loss aggregation (ScaleRL, arXiv 2510.13786, section 3.2, the best of its
sample-, prompt- and token-level averages): every prompt weighs the same in the loss, its
group's tokens averaged together,

    L = 1/P sum_p 1/T_p sum_{t in p} l_t

against the token-level average of DAPO (1/T sum_t l_t, TRL's loss_type=dapo). With the
token-level loss, each completion's advantage times T / (P T_p), T the kept tokens of the
batch and T_p those of its prompt's group, gives exactly this average of the policy term:
the clipped surrogate is linear in a positive factor of its advantage. The KL term stays
token-level. Needs trainer.loss_type=dapo; at the advantages point, after every estimator
and clip (order 95)."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, StepBatch, register


def prompt_weights(lengths: Any, group_size: int, keep: Any | None = None) -> Any:
    """[completions] T / (P T_p): the factor that turns a token-level average into a
    prompt-level one. Prompts with no kept token take no part (P counts the others)."""
    import torch

    tokens = lengths.to(torch.float64) * (1.0 if keep is None else keep.to(torch.float64))
    per_group = tokens.view(-1, group_size).sum(1)
    prompts = (per_group > 0).sum().clamp(min=1)
    weight = torch.where(per_group > 0, tokens.sum() / (prompts * per_group.clamp(min=1)), 0.0)
    return weight.repeat_interleave(group_size)


def _at_advantages(batch: StepBatch, on: bool) -> Any:
    weight = prompt_weights(batch.lengths, batch.group_size, batch.in_loss)
    return (batch.advantages * weight.to(batch.advantages.device)).to(batch.advantages.dtype)


def _check(on: bool, cfg: dict) -> str | None:
    loss = cfg["trainer"]["loss_type"]
    if loss != "dapo":
        return (f"hooks.prompt_loss: reweights the token-level loss into a prompt-level one; "
                f"allowed: trainer.loss_type=dapo, not {loss}")
    return None


register(HookTrick(
    "prompt_loss", "each prompt weighs the same in the loss (its group's tokens averaged)",
    rule=(lambda x: isinstance(x, bool), "true or false"),
    advantages=_at_advantages, check=_check, order=95))
