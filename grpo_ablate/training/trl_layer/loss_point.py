"""The loss point: inside TRL's `_compute_loss`, the micro-batch's advantages rewritten per
token from the policy's log-probs now (the token_advantages hooks), before TRL reads them;
the loss of a batch with dropped rows averaged over the kept ones; and counters in two of
TRL's loss helpers, for how often those variants acted. The micro-batch being computed is
handed to the log-prob call inside it for that call only, not left on the trainer."""

from __future__ import annotations

from collections import Counter
from contextvars import ContextVar
from typing import Any

import torch
from trl import GRPOTrainer

from grpo_ablate.hook_tricks import TokenBatch, hooks_at, kept_loss_scale
from grpo_ablate.training.outcome import WEIGHT_MOVED

# Loss types that average per sequence over the batch: a filtered-out sequence would still
# count in that average, so the loss is rescaled to average over the kept ones.
PER_SEQUENCE_LOSSES = ("grpo", "sapo", "luspo", "dr_grpo")
KEPT_ROWS = "kept_rows"  # the batch's entry for the rows drop_samples kept (the loss rescales)
# The micro-batch inside TRL's `_compute_loss`, until its policy log-probs are computed.
_LOSS_INPUTS: ContextVar[dict | None] = ContextVar("grpo_ablate_loss_inputs", default=None)


class LossPoint(GRPOTrainer):
    """Needs `ablation_hooks`, `activity` and `_loss_calls` (AblationGRPOTrainer sets them)."""

    ablation_hooks: dict
    activity: Counter
    _loss_calls: tuple[int, int]

    def _count(self, name: str, units: int, changed: int) -> None:
        """A point function's counters (the record's activity reads them)."""
        self.activity[f"{name}_units"] += units
        self.activity[f"{name}_changed"] += changed

    # -- TRL's own variants that log nothing of how often they acted: counted -------------
    def get_off_policy_mask(self, advantages, per_token_logps, sampling_per_token_logps, mask,
                            off_policy_threshold):
        keep = GRPOTrainer.get_off_policy_mask(advantages, per_token_logps,
                                               sampling_per_token_logps, mask,
                                               off_policy_threshold)
        if self.model.training:
            self.activity["off_policy_sequences"] += keep.numel()
            self.activity["off_policy_masked"] += int((keep == 0).sum())
        return keep

    def get_gamma_weights(self, advantages, log_ratio_per_token, mask,
                          importance_sampling_ratio, k_pos=2.0, lambda_pos=3.0, k_neg=3.0,
                          lambda_neg=2.0):
        phi = GRPOTrainer.get_gamma_weights(advantages, log_ratio_per_token, mask,
                                            importance_sampling_ratio, k_pos, lambda_pos,
                                            k_neg, lambda_neg)
        if self.model.training:
            self.activity["vespo_sequences"] += phi.size(0)
            self.activity["vespo_reweighted"] += int(((phi - 1).abs() > WEIGHT_MOVED).sum())
        return phi

    # -- the loss point: advantages per token, from the policy's log-probs now ------------
    def _compute_loss(self, model, inputs):
        if not (self.model.training and hooks_at("token_advantages", self.ablation_hooks)):
            return super()._compute_loss(model, inputs)
        batch = dict(inputs)  # a copy: a batch used for several updates keeps its advantages
        token = _LOSS_INPUTS.set(batch)
        try:
            return super()._compute_loss(model, batch)
        finally:
            _LOSS_INPUTS.reset(token)

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask,
                                           logits_to_keep, *args: Any, **kwargs: Any):
        out = super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask,
                                                         logits_to_keep, *args, **kwargs)
        batch = _LOSS_INPUTS.get()
        if batch is not None:  # the first call inside _compute_loss: the policy's log-probs
            _LOSS_INPUTS.set(None)
            self._token_advantage_hooks(batch, out[0])
        return out

    def _token_advantage_hooks(self, inputs: dict, logps: torch.Tensor) -> None:
        """The hooks at the loss point rewrite the micro-batch's advantages per token; TRL's
        loss then reads them. A hook that draws tokens at random draws from a generator
        seeded by the run's seed, the step and the micro-batch (a resumed run draws alike)."""
        mask = inputs["completion_mask"]
        if "tool_mask" in inputs:
            mask = mask * inputs["tool_mask"]
        advantages = inputs["advantages"]
        if advantages.dim() == 1:
            advantages = advantages.unsqueeze(1).expand_as(logps).clone()
        old = inputs.get("old_per_token_logps")
        step, micro = self._loss_calls
        step, micro = self.state.global_step, micro + 1 if step == self.state.global_step else 0
        self._loss_calls = (step, micro)
        seed = ((self.args.seed * 1_000_003 + step) * 1009 + micro) % 2**63
        batch = TokenBatch(advantages=advantages, logps=logps,
                           old_logps=logps.detach() if old is None else old, mask=mask,
                           epsilon_low=self.epsilon_low, epsilon_high=self.epsilon_high,
                           generator=torch.Generator().manual_seed(seed))
        for hook, value in hooks_at("token_advantages", self.ablation_hooks):
            new = hook.token_advantages(batch, value)
            changed = (new != batch.advantages) & mask.bool()
            self._count(hook.name, int(mask.sum()), int(changed.sum()))
            batch.advantages = new
        inputs["advantages"] = batch.advantages

    # -- the loss: per-sequence averages over kept samples ----------------------------------
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        keep = inputs.get(KEPT_ROWS)
        if keep is not None and self.loss_type in PER_SEQUENCE_LOSSES:
            # Over the kept sequences of every process's micro-batch, not this one's alone.
            loss = loss * kept_loss_scale(keep, self.accelerator.gather,
                                          self.accelerator.num_processes)
        return loss
