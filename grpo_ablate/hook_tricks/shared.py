"""Rules and arithmetic the hook tricks share, none of which needs the registry: the loss
types a token-level hook acts on, the rule of a value set as a reward quantile, and how a
point computes over every process's share of a batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# TRL's clipped-ratio surrogates, -min(r A, clip(r) A), at token level: where a hook at the
# loss point that rewrites a token's advantage changes exactly that token's term.
RATIO_LOSSES = ("grpo", "bnpo", "dr_grpo", "dapo")


def token_ratio_loss(key: str, cfg: dict) -> str | None:
    """A loss-point hook's common rule: the run's loss is a token-level clipped ratio."""
    tr = cfg["trainer"]
    if tr["loss_type"] not in RATIO_LOSSES or tr["importance_sampling_level"] != "token":
        return (f"{key}: acts on the token-level clipped-ratio surrogate; allowed: trainer.loss_type in "
                f"{list(RATIO_LOSSES)} with trainer.importance_sampling_level=token, not "
                f"{tr['loss_type']} at {tr['importance_sampling_level']} level")
    return None


def shaping_quantiles(cfg: dict, key: str, level: float) -> str | None:
    """The rule of a value set as a quantile of the SFT policy's rewards: a level in [0, 1]."""
    scale = ((cfg.get("task") or {}).get("shaping") or {}).get("scale")
    if scale == "sft_quantiles" and not 0.0 <= level <= 1.0:
        return (f"{key}={level}: task.shaping.scale=sft_quantiles makes it a quantile of the "
                "SFT policy's rewards; allowed: a number in [0, 1]")
    return None


def on_whole_batch(local: Any, gather: Callable[[Any], Any], rank: int,
                   fn: Callable[[Any], Any]) -> Any:
    """`fn` of the whole batch (every process's share, gathered), and this process's share
    of the result: the advantages point, where one process alone would see a part."""
    n = local.size(0)
    return fn(gather(local))[rank * n:(rank + 1) * n]


def kept_loss_scale(keep: Any, gather: Callable[[Any], Any], processes: int) -> Any:
    """The factor that turns a per-sequence loss averaged over this process's micro-batch
    (which DDP then averages over processes) into an average over the sequences kept on
    every process (drop_samples): n_local * processes / kept everywhere."""
    kept = gather(keep.sum().reshape(1)).sum()
    return keep.numel() * processes / kept.clamp(min=1)


def needs_right_answers(method: str):
    """An `applies_to` rule for a method that splits completions into right and wrong by a
    full-credit reward: a reward model's score (kind `score`) has no right answer."""
    def applies_to(value: Any, kind: str) -> str | None:
        if kind == "score":
            return (f"{method} needs right and wrong completions (a reward that reaches full "
                    "credit), and a reward model's score has none")
        return None
    return applies_to
