"""The analytic Pass@k advantage ("Pass@k Training for Adaptively Balancing Exploration and
Exploitation of Large Reasoning Models", arXiv 2508.10751, section 4): each group of N
completions, N_neg of them wrong, is scored as if every k-subset were one sample whose reward
is 1 when any member is right. Its mean and standard deviation over the subsets, in closed form:

    R = 1 - C(N_neg, k) / C(N, k),   sigma = sqrt(R (1 - R))
    A_pos = (1 - R) / sigma,         A_neg = (1 - R - C(N_neg - 1, k - 1) / C(N - 1, k - 1)) / sigma

and a group whose subsets all agree (sigma = 0) has advantage 0. A completion is right when
the reward the advantage sees reaches `hooks.adv_passk.correct_at`. It replaces TRL's group
advantage at the advantages point."""

from __future__ import annotations

from math import comb
from typing import Any

from grpo_ablate.hook_tricks import HookTrick, StepBatch, register
from grpo_ablate.hook_tricks.shared import needs_right_answers
from grpo_ablate.values import is_int, is_number


def passk_group(n: int, wrong: int, k: int) -> tuple[float, float]:
    """(A_pos, A_neg) of a group of `n` completions, `wrong` of them wrong, for pass@k."""
    mean = 1.0 - comb(wrong, k) / comb(n, k)
    sigma = (mean * (1.0 - mean)) ** 0.5
    if sigma == 0.0:
        return 0.0, 0.0
    negative = 1.0 - mean - (comb(wrong - 1, k - 1) / comb(n - 1, k - 1) if wrong else 0.0)
    return (1.0 - mean) / sigma, negative / sigma


def passk_advantages(rewards: Any, group_size: int, k: int, correct_at: float) -> Any:
    """Every completion's pass@k advantage, groups of `group_size` consecutive completions."""
    import torch

    right = (rewards >= correct_at).view(-1, group_size)
    out = torch.empty(right.shape, dtype=torch.float32)
    for g, row in enumerate(right.tolist()):
        positive, negative = passk_group(group_size, row.count(False), k)
        out[g] = torch.tensor([positive if r else negative for r in row])
    return out.view(-1).to(rewards.device)


def _at_advantages(batch: StepBatch, value: dict) -> Any:
    new = passk_advantages(batch.rewards, batch.group_size, value["k"], value["correct_at"])
    return new.to(batch.advantages.dtype)


def _check(value: dict, cfg: dict) -> str | None:
    group = cfg["trainer"]["num_generations"]
    if not value["k"] < group:
        return (f"hooks.adv_passk.k={value['k']}: needs groups larger than k (with k = G every "
                f"group's subsets agree: no gradient); allowed: k < trainer.num_generations={group}")
    return None


register(HookTrick(
    "adv_passk", "the analytic Pass@k advantage in place of the group z-score",
    excludes=(("filter_low_reward", "Pass@k's advantage counts every sample of a group, and the "
               "filter takes samples out of it"),),
    replaces="the group advantage (one advantage estimator at a time)",
    fields={"k": (lambda x: is_int(x) and x >= 1, "an integer >= 1"),
            "correct_at": (is_number, "a number (a completion whose reward reaches it is right)")},
    advantages=_at_advantages, check=_check, applies_to=needs_right_answers("Pass@k"), order=5,
    # 1 (2026-12-07): Pass@k's advantage replaces the group's before the other advantage hooks
    # (order 5, as MaxRL's), so a clip at 90 now clips Pass@k's advantages, not the z-scores
    # Pass@k then replaced.
    revision=1))
