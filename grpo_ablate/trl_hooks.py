"""The one module that touches TRL internals.

`AblationGRPOTrainer` is TRL's real `GRPOTrainer` plus the tricks TRL lacks, wired in at two
private override points (and two public ones for fault injection). With every hook off it
computes exactly what the bare trainer computes (tests/test_fidelity.py). TRL is pinned in
pyproject.toml; tests/test_trl_hooks.py fails loudly when these methods or their behaviour
move, which is the signal to re-check this file before widening the pin.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from accelerate.utils import gather
from trl import GRPOTrainer

from grpo_ablate.tricks import (
    apply_global_adv_norm,
    filter_active,
    low_reward_keep_mask,
    shape_rewards,
)

TESTED_TRL = (1, 16)
# The private methods overridden below, with the parameters this module relies on.
HOOKED = {
    "_calculate_rewards": ["self", "inputs", "prompts", "completions", "completion_ids_list"],
    "_generate_and_score_completions": ["self", "inputs"],
}


def check_trl_compat() -> None:
    """Fail loudly if the GRPOTrainer internals this module overrides have moved."""
    for name, params in HOOKED.items():
        method = getattr(GRPOTrainer, name, None)
        if method is None:
            raise RuntimeError(f"trl.GRPOTrainer.{name} is gone: re-check grpo_ablate/trl_hooks.py")
        got = list(inspect.signature(method).parameters)
        if got != params:
            raise RuntimeError(f"trl.GRPOTrainer.{name}{got} changed from {params}: "
                               "re-check grpo_ablate/trl_hooks.py")


class AblationGRPOTrainer(GRPOTrainer):
    """GRPOTrainer + reward clip, length penalty, low-reward filter, global advantage norm."""

    def __init__(self, *args: Any, hooks: dict | None = None, faults: dict | None = None,
                 **kwargs: Any) -> None:
        check_trl_compat()
        self.ablation_hooks = hooks or {}
        self.faults = faults or {}
        self._shaped_rewards: torch.Tensor | None = None
        super().__init__(*args, **kwargs)

    # -- rewards: shaped before TRL subtracts the group mean ------------------------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions,
                                                      completion_ids_list)
        hooks = self.ablation_hooks
        mode = "train" if self.model.training else "eval"
        lengths = torch.tensor([len(ids) for ids in completion_ids_list],
                               device=rewards_per_func.device)
        lengths = gather(lengths)  # rewards are gathered across processes; match them
        if hooks.get("reward_clip") is not None or hooks.get("length_penalty"):
            shaped = shape_rewards(rewards_per_func, lengths, hooks.get("reward_clip"),
                                   hooks.get("length_penalty") or 0.0, self.max_completion_length)
            raw = (rewards_per_func * self.reward_weights.to(rewards_per_func.device)).nansum(1)
            self._metrics[mode]["reward_unshaped"].append(torch.nanmean(raw).item())
            rewards_per_func = shaped
        self._shaped_rewards = (
            rewards_per_func * self.reward_weights.to(rewards_per_func.device)).nansum(1)
        return rewards_per_func

    # -- advantages and loss mask: after TRL's group z-score ------------------------------
    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        hooks = self.ablation_hooks
        mode = "train" if self.model.training else "eval"
        if hooks.get("global_adv_norm"):
            # Over this process's batch; multi-process runs would gather first.
            out["advantages"] = apply_global_adv_norm(out["advantages"])
        window = hooks.get("filter_low_reward")
        if window is not None and mode == "train":
            active = filter_active(self.state.global_step, self.state.max_steps,
                                   window["start"], window["end"])
            dropped = 0.0
            if active:
                n = out["completion_mask"].size(0)
                start = self.accelerator.process_index * n
                rewards = self._shaped_rewards[start:start + n]
                keep = low_reward_keep_mask(rewards, window["threshold"]).to(
                    out["completion_mask"].device)
                # Dropped samples get no gradient and leave the token normaliser.
                out["completion_mask"] = out["completion_mask"] * keep[:, None]
                out["num_items_in_batch"] = self.accelerator.gather(
                    out["completion_mask"].sum()).sum()
                dropped = 1.0 - keep.float().mean().item()
            self._metrics[mode]["filter/frac_dropped"].append(dropped)
        return out

    # -- fault injection for the reliability tests (off unless `faults.*` is set) ----------
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        at = self.faults.get("nan_loss_at_step")
        if at is not None and self.state.global_step + 1 >= at:
            loss = loss * float("nan")
        return loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        at = self.faults.get("kl_blowup_at_step")
        kl = self._metrics["train"].get("kl")
        if at is not None and kl and self.state.global_step >= at:
            self._metrics["train"]["kl"] = [1.0e4] * len(kl)
        super().log(logs, start_time)
