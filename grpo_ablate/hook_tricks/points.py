"""What each hook point hands a hook trick's function: one batch type a point (the drawing
of the points is in the registry's docstring, grpo_ablate/hook_tricks/__init__.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class RewardBatch:
    """What the `shape_rewards` point sees: one batch's rewards, every process's share."""

    rewards: Any      # [completions x reward functions] (TRL's matrix, after earlier hooks)
    lengths: Any      # [completions] completion tokens
    group_size: int
    max_length: int   # trainer.max_completion_length


@dataclass
class DropBatch:
    """What the `drop_samples` point sees: a training batch's weighted rewards (after the
    rewards point, every process's share) and where training is."""

    rewards: Any      # [completions]
    step: int
    max_steps: int
    group_size: int = 1  # completions per prompt: groups are consecutive


@dataclass
class Generation:
    """What the `generation` point sees: the step's sampled batch, and how to sample more."""

    out: dict         # TRL's sampled and scored batch for the step's prompts (its format)
    rewards: Any      # [completions] its weighted rewards, after the rewards point
    prompts: int      # the step's prompts (groups)
    group_size: int
    step: int
    seed: int
    dataset_size: int  # the prompts in play: all, less those a prompt filter leaves out now
    sample: Callable[[list[int]], tuple[dict, Any]]  # prompts in play -> (batch, its rewards)
    # (round, group) rows -> batch: the one way to build a new batch from the rounds (the
    # trainer merges each row's values, such as a filter's keep-mask, with it)
    merge: Callable[[list[dict], list[tuple[int, int]]], dict]
    counts: Counter   # the run's activity counters


@dataclass
class StepBatch:
    """What the `advantages` point sees: one training step's batch, every process's share
    (tensors on the trainer's device)."""

    advantages: Any   # [completions] TRL's group advantages (after any earlier hook)
    rewards: Any      # [completions] the weighted rewards the advantage saw
    group_size: int
    step: int
    scale_rewards: str = "group"  # TRL's scaling: group | batch | none
    lengths: Any = None  # [completions] completion tokens the loss counts
    keep: Any = None     # [completions] bool, the rows in the group statistics (drop_samples
    #                      took the others out before the advantage); None: all of them
    in_loss: Any = None  # [completions] bool, the rows the loss keeps (every drop); None: all
    # [completions] sum over the completion's tokens of log pi_sample - log pi_ref (k1), the
    # KL to the reference at sampling time; only for a hook with `kl_from_loss` (else None)
    kl_to_ref: Any = None


@dataclass
class TokenBatch:
    """What the `token_advantages` and `loss_term` points see: one micro-batch inside TRL's
    loss."""

    advantages: Any   # [rows, tokens] per token (TRL's per-sequence ones, broadcast)
    logps: Any        # [rows, tokens] the policy's log-probs now (they carry the gradient)
    old_logps: Any    # [rows, tokens] the sampling policy's (TRL's old_per_token_logps)
    mask: Any         # [rows, tokens] 1 for a completion token the loss counts
    epsilon_low: float
    epsilon_high: float
    generator: Any    # a torch.Generator seeded by the run's seed, step and micro-batch
    rewards: Any = None  # [rows] each completion's task reward, before any shaping (for a
    #                      `loss_term` hook: whether a completion is correct)


@dataclass(frozen=True)
class PromptFilter:
    """A prompt-level sampler's rule (the `prompt_filter` point): each training prompt's pass
    rate, kept per prompt (its latest group's; in the checkpoint), and the prompts an epoch
    leaves out, decided as the epoch begins from the history so far."""

    # (rewards [groups x group_size], value) -> [groups] each group's pass rate
    pass_rates: Callable[[Any, Any], Any]
    # ({prompt: latest pass rate}, value) -> the prompts the coming epochs leave out
    left_out: Callable[[dict[int, float], Any], list[int]]
