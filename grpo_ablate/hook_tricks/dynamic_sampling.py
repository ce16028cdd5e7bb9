"""DAPO's dynamic sampling (section 3.2), which TRL lacks: over-sample prompts and keep the
groups whose rewards are not all equal (a group of equal rewards has zero advantage, so no
gradient), until the step holds as many groups as it asked for, at most `max_rounds`
generation rounds. Where the cap is reached, the step goes on with what it has: the valid
groups first, then as many of the equal-reward groups as fill the batch (they carry no
gradient), and the run counts how often that happened. The generations of every round are
counted in the run's budget by the reward function, so "budget vs baseline" shows the cost.

`keep_groups` is the selection, a pure function of the rounds' rewards; the trainer calls
`_at_generation` at its generation point, which samples through TRL's own generation."""

from __future__ import annotations

from typing import Any

from grpo_ablate.hook_tricks import Generation, HookTrick, register
from grpo_ablate.values import is_int


def valid_groups(rewards: Any, group_size: int) -> Any:
    """Per group of `group_size` consecutive completions: True when its rewards differ."""
    grouped = rewards.view(-1, group_size)
    return grouped.max(1).values > grouped.min(1).values


def keep_groups(rounds: list[Any], group_size: int, needed: int
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


def _at_generation(g: Generation, value: dict) -> tuple[dict, Any]:
    """Over-sample prompts (seeded by the run's seed and the step) until the step holds as
    many groups with varied rewards as it asked for, or max_rounds rounds ran; then the
    batch of the kept groups, and its rewards."""
    import torch

    outs, rewards = [g.out], [g.rewards]
    gen = torch.Generator().manual_seed(g.seed * 1_000_003 + g.step)
    while sum(int(valid_groups(r, g.group_size).sum()) for r in rewards) < g.prompts \
            and len(outs) < value["max_rounds"]:
        more, more_rewards = g.sample(torch.randint(g.dataset_size, (g.prompts,),
                                                    generator=gen).tolist())
        outs.append(more)
        rewards.append(more_rewards)
    kept, capped = keep_groups(rewards, g.group_size, g.prompts)
    g.counts["dynamic_steps"] += 1
    g.counts["dynamic_rounds"] += len(outs)
    g.counts["dynamic_groups"] += sum(r.numel() // g.group_size for r in rewards)
    g.counts["dynamic_filtered"] += sum(int((~valid_groups(r, g.group_size)).sum())
                                        for r in rewards)
    g.counts["dynamic_cap_hit"] += int(capped)
    size = g.group_size
    return g.merge(outs, kept), torch.cat([rewards[r][k * size:(k + 1) * size] for r, k in kept])


def _details(counts: dict) -> dict:
    steps = counts.get("dynamic_steps", 0)
    if not counts.get("dynamic_groups"):
        return {}
    return {"dynamic_filtered_groups": counts["dynamic_filtered"] / counts["dynamic_groups"],
            "dynamic_cap_steps": counts.get("dynamic_cap_hit", 0) / steps if steps else None,
            "dynamic_rounds_per_step": counts.get("dynamic_rounds", 0) / steps if steps else None}


def _check(value: dict, cfg: dict) -> str | None:
    processes = cfg["launch"]["processes"]
    if processes > 1:
        return ("hooks.dynamic_sampling: one process per run only (its extra rounds are drawn "
                f"per process); allowed: launch.processes=1, not {processes}")
    return None


register(HookTrick(
    "dynamic_sampling", "DAPO's dynamic sampling: keep groups whose rewards differ",
    fields={"max_rounds": (lambda x: is_int(x) and 1 <= x <= 100,
                           "an integer in [1, 100] (generation rounds a step)")},
    measure=("dynamic_filtered_groups", "groups filtered out (all rewards equal)"),
    generation=_at_generation, details=_details, check=_check, added_later=True))
