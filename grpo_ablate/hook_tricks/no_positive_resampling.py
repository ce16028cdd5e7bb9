"""No-positive-resampling (Polaris, adopted by ScaleRL, "The Art of Scaling Reinforcement
Learning Compute for LLMs", arXiv 2510.13786, section 3; prime-rl and ROLL ship it): a
prompt whose pass rate reached `pass_rate` (its latest group: the share of its completions
whose reward reached `correct_at`) is left out of every later epoch; the prompts it was
sampled with go on. An epoch keeps its length (its other prompts are cycled), so the arm
trains the baseline's steps on fewer, harder prompts. It acts from the second epoch on: the
history is the first epoch's groups and after (kept in the checkpoint, so a resumed run
leaves the same prompts out). A prompt filter (PromptFilter) at the sampler."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import HookTrick, PromptFilter, register
from grpo_ablate.hook_tricks.shared import needs_right_answers
from grpo_ablate.values import is_number


def group_pass_rates(rewards: Any, value: dict) -> Any:
    """[groups] the share of each group's completions whose reward reached `correct_at`."""
    import torch

    return (rewards >= value["correct_at"]).to(torch.float64).mean(1)


def prompts_solved(pass_rates: dict[int, float], value: dict) -> list[int]:
    """The prompts whose latest pass rate reached `pass_rate`."""
    return [p for p, rate in pass_rates.items() if rate >= value["pass_rate"]]


def _details(counts: dict) -> dict:
    prompts = counts.get("no_positive_resampling_prompts", 0)
    return {"prompts_left_out": counts.get("no_positive_resampling_left_out", 0) / prompts
            if prompts else 0.0}


register(HookTrick(
    "no_positive_resampling", "prompts whose pass rate reached pass_rate leave the later epochs",
    fields={"pass_rate": (lambda x: is_number(x) and 0 < x <= 1, "a fraction in (0, 1]"),
            "correct_at": (is_number, "a number (a completion whose reward reaches it passes)")},
    measure=("prompts_left_out", "training prompts the last epoch left out (solved before it)"),
    prompt_filter=PromptFilter(pass_rates=group_pass_rates, left_out=prompts_solved),
    replaces="the prompt sampler (one prompt filter at a time)",
    applies_to=needs_right_answers("no-positive-resampling's pass rate"), details=_details))
