"""What the reward point makes of one sampled batch, carried with its rows.

TRL scores a sampled batch inside its own `_generate_and_score_completions`, through
`_calculate_rewards`, and returns only the rows. The rewards after grpo-ablate's shaping
and the keep-mask of each hook that drops samples belong to exactly those rows: `scoring()`
opens a place for them around one sampling call, `_calculate_rewards` puts its `ScoredRows`
there, and the caller takes them with the rows it sampled. When a hook merges the groups of
several sampling rounds (dynamic sampling), `merge_groups` merges the rows and
`merge_scored` their values, group for group, so a later hook reads the values of the rows
the step trains on, never those of the last round sampled."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch

LEFT_PADDED = ("prompt_ids", "prompt_mask")  # TRL pads prompts on the left, the rest right


@dataclass(frozen=True)
class ScoredRows:
    """A sampled batch's values, every process's rows (as TRL gathers the rewards)."""

    rewards: torch.Tensor  # [completions] weighted, after the rewards point
    keeps: tuple[tuple[str, torch.Tensor], ...] = ()  # (hook, [completions] bool) per dropper
    task_rewards: torch.Tensor | None = None  # [completions] the task's own, before shaping
    # The droppers whose dropped rows also leave their group's advantage statistics.
    from_advantage: frozenset[str] = frozenset()

    @property
    def keep(self) -> torch.Tensor | None:
        """The rows every dropping hook kept (the loss's rows); None when none dropped any."""
        return _all_of([mask for _, mask in self.keeps])

    @property
    def advantage_keep(self) -> torch.Tensor | None:
        """The rows in the group statistics: those the droppers that act before the
        advantage kept; None when they dropped none."""
        return _all_of([mask for name, mask in self.keeps if name in self.from_advantage])


def _all_of(masks: list[torch.Tensor]) -> torch.Tensor | None:
    if not masks:
        return None
    keep = masks[0]
    for mask in masks[1:]:
        keep = keep & mask
    return keep


_SCORED: ContextVar[list | None] = ContextVar("grpo_ablate_scored_rows", default=None)


@contextmanager
def scoring() -> Iterator[list[ScoredRows]]:
    """A place for the ScoredRows of the batch sampled inside the block (and only it)."""
    found: list[ScoredRows] = []
    token = _SCORED.set(found)
    try:
        yield found
    finally:
        _SCORED.reset(token)


def report_scored(rows: ScoredRows) -> None:
    """Hand a batch's values to the sampling call that is scoring it."""
    found = _SCORED.get()
    if found is not None:
        found.append(rows)


def merge_scored(rounds: list[ScoredRows], kept: list[tuple[int, int]], group: int) -> ScoredRows:
    """The values of the kept (round, group) rows of several rounds, in that order: each
    dropping hook's mask from the round its rows were sampled in (all kept where a round's
    step had it drop nothing)."""
    def take(tensors: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat([tensors[r][g * group:(g + 1) * group] for r, g in kept])

    names = list(dict.fromkeys(name for rows in rounds for name, _ in rows.keeps))
    keeps = []
    for name in names:
        masks = [dict(rows.keeps).get(name) for rows in rounds]
        masks = [m if m is not None else torch.ones_like(rows.rewards, dtype=torch.bool)
                 for m, rows in zip(masks, rounds, strict=True)]
        keeps.append((name, take(masks)))
    task = [rows.task_rewards for rows in rounds]
    return ScoredRows(rewards=take([rows.rewards for rows in rounds]), keeps=tuple(keeps),
                      task_rewards=None if any(t is None for t in task) else take(task),
                      from_advantage=frozenset().union(*(r.from_advantage for r in rounds)))


def merge_groups(outs: list[dict], kept: list[tuple[int, int]], group: int,
                 pad_token_id: int) -> dict:
    """One generation batch of the kept (round, group) rows of several rounds of TRL's
    `_generate_and_score_completions` output: per-row tensors padded to a common width and
    stacked, the token count recomputed; every other entry as the first round has it."""
    merged = dict(outs[0])
    rows = outs[0]["completion_mask"].size(0)
    for key, first in outs[0].items():
        if not (isinstance(first, torch.Tensor) and first.dim() >= 1 and first.size(0) == rows):
            continue
        width = max(o[key].size(1) for o in outs) if first.dim() == 2 else None
        parts = []
        for r, g in kept:
            block = outs[r][key][g * group:(g + 1) * group]
            if width is not None and block.size(1) < width:
                fill = pad_token_id if key.endswith("_ids") else 0
                pad = block.new_full((block.size(0), width - block.size(1)), fill)
                block = torch.cat([pad, block] if key in LEFT_PADDED else [block, pad], 1)
            parts.append(block)
        merged[key] = torch.cat(parts, 0)
    merged["num_items_in_batch"] = merged["completion_mask"].sum()
    return merged
