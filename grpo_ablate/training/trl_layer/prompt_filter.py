"""The prompt-level sampler's history (a hook trick's PromptFilter, grpo_ablate/hook_tricks):
each training prompt's latest pass rate, from the groups TRL scores, and the prompts each
epoch leaves out, fixed in the run state as the epoch begins, so a run resumed inside an
epoch samples it as the uninterrupted run did (the sampler: resumable.py)."""

from __future__ import annotations

from typing import Any

import torch
from trl import GRPOTrainer

from grpo_ablate.hook_tricks import hooks_at

PROMPT_INDEX = "grpo_ablate_prompt_index"  # the training rows' column: each row's index


def prompt_filters(hooks: dict) -> list[tuple[Any, Any]]:
    """The hooks a run turns on that filter prompts (at most one: they replace the sampler)."""
    return hooks_at("prompt_filter", hooks)


def with_prompt_index(rows: list[dict], hooks: dict) -> list[dict]:
    """The training rows, each with its index where a prompt filter needs to know them."""
    if not prompt_filters(hooks):
        return rows
    return [{**row, PROMPT_INDEX: i} for i, row in enumerate(rows)]


class PromptFiltering(GRPOTrainer):
    """Needs `ablation_hooks`, `run_state` and `activity` (AblationGRPOTrainer sets them)."""

    ablation_hooks: dict
    run_state: Any

    def record_pass_rates(self, inputs: list[dict], rewards: torch.Tensor) -> None:
        """Each scored group's pass rate, as its prompt's latest (training batches only).
        `rewards`: every process's, gathered; the prompts' indices are gathered alike."""
        on = prompt_filters(self.ablation_hooks)
        if not on or not self.model.training:
            return
        local = torch.tensor([row[PROMPT_INDEX] for row in inputs], device=rewards.device)
        prompts = self.accelerator.gather(local).view(-1, self.num_generations)[:, 0]
        hook, value = on[0]
        rates = hook.prompt_filter.pass_rates(rewards.view(-1, self.num_generations), value)
        for prompt, rate in zip(prompts.tolist(), rates.tolist(), strict=True):
            self.run_state.pass_rates[int(prompt)] = float(rate)

    def prompts_left_out(self, epoch: int) -> list[int]:
        on = prompt_filters(self.ablation_hooks)
        if not on:
            return []
        if epoch not in self.run_state.left_out:
            hook, value = on[0]
            out = sorted(int(p) for p in hook.prompt_filter.left_out(self.run_state.pass_rates,
                                                                      value))
            if len(out) >= len(self.train_dataset):  # none left: the epoch trains on them all
                self.run_state.notes.append(f"hooks.{hook.name}: every prompt reached the "
                                            f"filter by epoch {epoch}; none was left out of it")
                out = []
            self.run_state.left_out[epoch] = out
            # The last epoch's, set (not added) as it begins: a resumed run sets them alike.
            self.activity[f"{hook.name}_prompts"] = len(self.train_dataset)
            self.activity[f"{hook.name}_left_out"] = len(out)
        return self.run_state.left_out[epoch]

    def prompts_in_play(self) -> list[int]:
        """The dataset rows the sampler draws from now: all of them, less those the current
        epoch leaves out (where a prompt filter is on); more rounds of sampling (dynamic
        sampling) draw from these too."""
        left = self.run_state.left_out
        out = set(left[max(left)]) if left else set()
        return [i for i in range(len(self.train_dataset)) if i not in out]
