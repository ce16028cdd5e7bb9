"""W-REINFORCE ("The Surprising Effectiveness of Negative Reinforcement in LLM Reasoning", Zhu
et al. 2025, arXiv 2506.01347, section 5): REINFORCE on rewards +1 (right) and -1 (wrong),
no group baseline and no std, with the positive samples' term weighted by lambda = 0.1,

    L = lambda L_PSR + L_NSR,   so each completion's advantage is  +lambda (right), -1 (wrong)

as the authors' code computes it (RLVR-Decomposed, `compute_psr_nsr_outcome_advantage`,
advantage=weighted: a right sample's return times `positive_advantage_weight`, a wrong one's
0 - 1). A completion is right when the reward the advantage sees reaches
`hooks.adv_positive.correct_at` (every task's full credit is 1); a task whose rewards have no
right answer (a reward model's score) is refused. It replaces TRL's group advantage at the
advantages point; a group whose samples are all right, or all wrong, keeps its gradient (no
baseline takes it away), as in the paper."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, StepBatch, register
from grpo_ablate.hook_tricks.shared import needs_right_answers
from grpo_ablate.values import is_number


def w_reinforce_advantages(rewards: Any, weight: float, correct_at: float) -> Any:
    """[completions] +weight where the reward reaches `correct_at`, -1 elsewhere."""
    import torch

    right = rewards >= correct_at
    return torch.where(right, torch.full_like(rewards, weight), torch.full_like(rewards, -1.0))


def _at_advantages(batch: StepBatch, value: dict) -> Any:
    new = w_reinforce_advantages(batch.rewards.to(batch.advantages.dtype), value["weight"],
                                 value["correct_at"])
    if batch.keep is not None:  # a row out of the group statistics is out of the step
        new = new.masked_fill(~batch.keep.bool(), 0.0)
    return new


register(HookTrick(
    "adv_positive", "W-REINFORCE: advantage +lambda for a right sample, -1 for a wrong one",
    fields={"weight": (lambda x: is_number(x) and 0 <= x < 1, "a number in [0, 1)"),
            "correct_at": (is_number, "a number (a completion whose reward reaches it is right)")},
    replaces="the group advantage (one advantage estimator at a time)",
    advantages=_at_advantages, applies_to=needs_right_answers("W-REINFORCE"), order=5))
