"""DAPO's dynamic sampling (section 3.2), which TRL lacks: over-sample prompts and keep the
groups whose rewards are not all equal (a group of equal rewards has zero advantage, so no
gradient), until the step holds as many groups as it asked for, at most `max_rounds`
generation rounds. Where the cap is reached, the step goes on with what it has: the valid
groups first, then as many of the equal-reward groups as fill the batch (they carry no
gradient), and the run counts how often that happened. The generations of every round are
counted in the run's budget by the reward function, so "budget vs baseline" shows the cost.

`keep_groups` is the selection, a pure function of the rounds' rewards; trl_hooks.py wires
it into TRL's generation."""

from __future__ import annotations

import torch


def valid_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Per group of `group_size` consecutive completions: True when its rewards differ."""
    grouped = rewards.view(-1, group_size)
    return grouped.max(1).values > grouped.min(1).values


def keep_groups(rounds: list[torch.Tensor], group_size: int, needed: int
                ) -> tuple[list[tuple[int, int]], bool]:
    """The (round, group) pairs that make the step, in generation order: the first `needed`
    valid groups over the rounds; if fewer exist (the cap was reached), every valid group
    and then the earliest equal-reward groups up to `needed`. Also whether the cap was hit."""
    valid, filler = [], []
    for r, rewards in enumerate(rounds):
        for g, ok in enumerate(valid_groups(rewards, group_size).tolist()):
            (valid if ok else filler).append((r, g))
    if len(valid) >= needed:
        return valid[:needed], False
    chosen = set(valid) | set(filler[:needed - len(valid)])
    return [p for rr, rewards in enumerate(rounds)
            for p in ((rr, g) for g in range(rewards.numel() // group_size)) if p in chosen], True
