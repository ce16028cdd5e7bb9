"""The loss point: inside TRL's `_compute_loss`, the micro-batch's advantages rewritten per
token from the policy's log-probs now (the token_advantages hooks), before TRL reads them;
the loss of a batch with dropped rows averaged over the kept ones; terms added to the loss
(the loss_term hooks); and counters in two of TRL's loss helpers, for how often those
variants acted. The micro-batch being computed is
handed to the log-prob call inside it for that call only, not left on the trainer."""

from __future__ import annotations

from collections import Counter
from contextvars import ContextVar
from typing import Any

import torch
from trl import GRPOTrainer

from grpo_ablate.hook_tricks import TokenBatch, hooks_at
from grpo_ablate.hook_tricks.shared import kept_loss_scale
from grpo_ablate.training.outcome import WEIGHT_MOVED

# Loss types that average per sequence over the batch: a filtered-out sequence would still
# count in that average, so the loss is rescaled to average over the kept ones.
PER_SEQUENCE_LOSSES = ("grpo", "sapo", "luspo", "dr_grpo")
KEPT_ROWS = "kept_rows"  # the batch's entry for the rows drop_samples kept (the loss rescales)
RATIO_CLIP_OFF = 1e6  # epsilon_low and epsilon_high that leave TRL's ratio clip no effect
ROW_REWARDS = "grpo_ablate_task_rewards"  # the batch's entry for each row's task reward
# The micro-batch inside TRL's `_compute_loss`, until its policy log-probs are computed.
# With it, the list the loss point puts the micro-batch in, as its hooks saw it.
_LOSS_INPUTS: ContextVar[tuple[dict, list] | None] = ContextVar("grpo_ablate_loss_inputs",
                                                                default=None)


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
        # What a hook takes out of TRL's loss, read from the trainer inside this call only
        # and put back after: the KL term when the KL is in the reward (beta built the
        # reference), the ratio clip when a trust region replaces it.
        inside = {}
        if any(hook.kl_from_loss for hook, _ in hooks_at("advantages", self.ablation_hooks)):
            inside["beta"] = 0.0
        if any(hook.ratio_clip_off
               for hook, _ in hooks_at("token_advantages", self.ablation_hooks)):
            inside.update(epsilon_low=RATIO_CLIP_OFF, epsilon_high=RATIO_CLIP_OFF)
        saved = {name: getattr(self, name) for name in inside}
        for name, value in inside.items():
            setattr(self, name, value)
        try:
            return self._loss_with_hooks(model, inputs)
        finally:
            for name, value in saved.items():
                setattr(self, name, value)

    def _loss_with_hooks(self, model, inputs):
        terms = hooks_at("loss_term", self.ablation_hooks) if self.model.training else []
        if not (terms or self.model.training and hooks_at("token_advantages",
                                                          self.ablation_hooks)):
            return self._kept_rows_mean(super()._compute_loss(model, inputs), inputs)
        batch = dict(inputs)  # a copy: a batch used for several updates keeps its advantages
        seen: list[TokenBatch] = []  # the micro-batch as the loss-point hooks saw it
        token = _LOSS_INPUTS.set((batch, seen))
        try:
            loss = super()._compute_loss(model, batch)
        finally:
            _LOSS_INPUTS.reset(token)
        loss = self._kept_rows_mean(loss, inputs)
        if terms:  # after the rescale: a term is a mean over its own (kept) tokens
            loss = loss + self._loss_terms(seen[0], terms)
        return loss

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask,
                                           logits_to_keep, *args: Any, **kwargs: Any):
        out = super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask,
                                                         logits_to_keep, *args, **kwargs)
        inside = _LOSS_INPUTS.get()
        if inside is not None:  # the first call inside _compute_loss: the policy's log-probs
            _LOSS_INPUTS.set(None)
            batch, seen = inside
            seen.append(self._token_advantage_hooks(batch, out[0]))
        return out

    def _token_advantage_hooks(self, inputs: dict, logps: torch.Tensor) -> TokenBatch:
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
                           generator=torch.Generator().manual_seed(seed),
                           rewards=inputs.get(ROW_REWARDS))
        for hook, value in hooks_at("token_advantages", self.ablation_hooks):
            new = hook.token_advantages(batch, value)
            changed = (new != batch.advantages) & mask.bool()
            self._count(hook.name, int(mask.sum()), int(changed.sum()))
            batch.advantages = new
        inputs["advantages"] = batch.advantages
        return batch

    def _loss_terms(self, batch: TokenBatch, terms: list) -> torch.Tensor:
        """The loss terms of the hooks that add one: each a token mean over its tokens of
        the micro-batch, per accumulation step (TRL's loss is per step already)."""
        total = torch.zeros((), device=batch.logps.device)
        counted = batch.mask.bool()
        for hook, value in terms:
            term, tokens = hook.loss_term(batch, value)
            tokens = tokens.bool() & counted
            self._count(hook.name, int(counted.sum()), int(((term != 0) & tokens).sum()))
            total = total + (term * tokens).sum() / tokens.sum().clamp(min=1)
        return total / self.current_gradient_accumulation_steps

    # -- the loss: per-sequence averages over kept samples ----------------------------------
    def _kept_rows_mean(self, loss: torch.Tensor, inputs: dict) -> torch.Tensor:
        keep = inputs.get(KEPT_ROWS)
        if keep is not None and self.loss_type in PER_SEQUENCE_LOSSES:
            # Over the kept sequences of every process's micro-batch, not this one's alone.
            loss = loss * kept_loss_scale(keep, self.accelerator.gather,
                                          self.accelerator.num_processes)
        return loss
