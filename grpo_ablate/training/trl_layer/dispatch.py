"""The hook dispatcher, up to the loss: at the rewards, drop_samples, generation and
advantages points (grpo_ablate/hook_tricks) the functions of the hook tricks a run turns
on, in their declared order, and the counts of what each changed (the record's activity).
A sampled batch's values travel with its rows (rows.py). The loss point: loss_point.py."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import torch
from accelerate.utils import gather

from grpo_ablate.hook_tricks import (
    DropBatch,
    Generation,
    RewardBatch,
    StepBatch,
    hooks_at,
)
from grpo_ablate.hook_tricks.shared import on_whole_batch
from grpo_ablate.training.trl_layer.loss_point import KEPT_ROWS, ROW_REWARDS, LossPoint
from grpo_ablate.training.trl_layer.rows import (
    ScoredRows,
    merge_groups,
    merge_scored,
    report_scored,
    scoring,
)


class HookDispatch(LossPoint):
    """The hook points before the loss, and the loss point. Needs `ablation_hooks`,
    `run_state`, `activity` and `_loss_calls` (AblationGRPOTrainer sets them), and
    `record_pass_rates` and `prompts_in_play` (prompt_filter.PromptFiltering)."""

    ablation_hooks: dict
    run_state: Any
    activity: Counter

    # -- rewards: shaped (and filtered) before TRL subtracts the group mean ---------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions,
                                                      completion_ids_list)
        mode = "train" if self.model.training else "eval"
        weights = self.reward_weights.to(rewards_per_func.device)
        lengths = torch.tensor([len(ids) for ids in completion_ids_list],
                               device=rewards_per_func.device)
        lengths = gather(lengths)  # rewards are gathered across processes; match them
        task = rewards_per_func[:, 0].clone()  # the task's reward function comes first
        rewards_per_func = self._reward_hooks(rewards_per_func, lengths, weights, mode)
        shaped = (rewards_per_func * weights).nansum(1)
        keeps, before = [], set()
        if mode == "train":
            for hook, value in hooks_at("drop_samples", self.ablation_hooks):
                keep = hook.drop_samples(DropBatch(shaped, self.state.global_step,
                                                   self.state.max_steps, self.num_generations),
                                         value)
                if keep is not None:
                    keeps.append((hook.name, keep))
                    if hook.drops_from_advantage(value):
                        before.add(hook.name)
        scored = ScoredRows(rewards=shaped, keeps=tuple(keeps), task_rewards=task,
                            from_advantage=frozenset(before))
        report_scored(scored)  # to the sampling call of these rows (_sampled)
        if scored.advantage_keep is not None:
            # All-NaN rows take no part in TRL's group mean/std and get advantage 0; the rows
            # of a dropper that acts after the advantage keep their rewards here and leave
            # the loss alone (_generate_and_score_completions).
            rewards_per_func = rewards_per_func.masked_fill(~scored.advantage_keep[:, None],
                                                            float("nan"))
        return rewards_per_func

    def _reward_hooks(self, rewards: torch.Tensor, lengths: torch.Tensor,
                      weights: torch.Tensor, mode: str) -> torch.Tensor:
        """The hooks at the rewards point, in their order; the batch's reward before them is
        logged as `reward_unshaped`."""
        on = hooks_at("shape_rewards", self.ablation_hooks)
        if not on:
            return rewards
        raw = (rewards * weights).nansum(1)
        self._metrics[mode]["reward_unshaped"].append(torch.nanmean(raw).item())
        for hook, value in on:
            rewards, changed = hook.shape_rewards(
                RewardBatch(rewards, lengths, self.num_generations, self.max_completion_length),
                value)
            if mode == "train":
                self._count(hook.name, rewards.size(0), int(changed.sum()))
        return rewards

    def _sampled(self, inputs) -> tuple[dict, ScoredRows]:
        """TRL's sampling and scoring of one batch, with the values its scoring made; its
        prompt tokens counted (the completion tokens are counted by the reward, train.py),
        each completion's prompt once, as verl counts its throughput."""
        with scoring() as found:
            out = super()._generate_and_score_completions(inputs)
        if len(found) != 1:
            raise RuntimeError(f"trl scored one sampled batch {len(found)} times, not once: "
                               "re-check grpo_ablate/training/trl_layer/rows.py")
        self.record_pass_rates(inputs, found[0].rewards)  # a prompt filter's history
        if self.model.training:
            cost = self.run_state.cost
            cost["prompt_tokens"] = cost.get("prompt_tokens", 0) + int(out["prompt_mask"].sum())
        return out, found[0]

    # -- the step's batch: more rounds, advantages and loss mask after TRL's z-score ------
    def _generate_and_score_completions(self, inputs):
        start = time.perf_counter()
        out, scored = self._sampled(inputs)
        mode = "train" if self.model.training else "eval"
        if mode == "train":
            out, scored = self._generation_hooks(inputs, out, scored)
        self.run_state.generation_seconds += time.perf_counter() - start  # and its rewards
        if mode == "train":  # what each dropping hook dropped of the rows the step trains on
            for name, keep in scored.keeps:
                self._count(name, keep.numel(), int((~keep).sum()))
        self._advantage_hooks(out, scored, mode)
        if mode == "train" and hooks_at("loss_term", self.ablation_hooks):
            n = out["completion_mask"].size(0)  # each row's reward travels with the row
            rank = self.accelerator.process_index
            out[ROW_REWARDS] = scored.task_rewards[rank * n:(rank + 1) * n].to(
                out["completion_mask"].device)
        droppers = hooks_at("drop_samples", self.ablation_hooks) if mode == "train" else []
        if droppers:
            dropped = 0.0
            if scored.keep is not None:
                n = out["completion_mask"].size(0)
                rank = self.accelerator.process_index
                keep = scored.keep[rank * n:(rank + 1) * n].to(out["completion_mask"].device)
                # Dropped samples get no gradient (their KL term included) and leave every
                # normaliser: the token count (dapo) and the per-sequence mean (grpo).
                out["completion_mask"] = out["completion_mask"] * keep[:, None]
                out["num_items_in_batch"] = self.accelerator.gather(
                    out["completion_mask"].sum()).sum()
                out[KEPT_ROWS] = keep
                dropped = 1.0 - scored.keep.float().mean().item()
                # TRL logs the reward over kept rows only; the run's reward is over all of them.
                self._metrics[mode]["reward"][-1] = scored.rewards.mean().item()
                self._metrics[mode]["reward_std"][-1] = scored.rewards.std().item()
            for hook, _ in droppers:
                self._metrics[mode][hook.dropped_metric or f"{hook.name}/frac_dropped"].append(dropped)
        return out

    def _generation_hooks(self, inputs: list[dict], out: dict,
                          scored: ScoredRows) -> tuple[dict, ScoredRows]:
        """The hooks at the generation point choose the batch the step trains on; its rows'
        values are merged with its rows (a round's values stay with that round's rows)."""
        for hook, value in hooks_at("generation", self.ablation_hooks):
            out, scored = self._generation_hook(hook, value, len(inputs), out, scored)
        return out, scored

    def _generation_hook(self, hook, value: Any, rows_asked: int, out: dict,
                         scored: ScoredRows) -> tuple[dict, ScoredRows]:
        values_of = {id(out): scored}  # each round's rows -> its values
        merged: list[ScoredRows] = []
        in_play = self.prompts_in_play()  # what the sampler draws from (a prompt filter's)

        def sample(rows: list[int]) -> tuple[dict, torch.Tensor]:
            group = [self.train_dataset[in_play[i]] for i in rows
                     for _ in range(self.num_generations)]
            more, more_scored = self._sampled(group)
            values_of[id(more)] = more_scored
            return more, more_scored.rewards.detach().cpu()

        def merge(outs: list[dict], kept: list[tuple[int, int]]) -> dict:
            merged.append(merge_scored([values_of[id(o)] for o in outs], kept,
                                       self.num_generations))
            return merge_groups(outs, kept, self.num_generations,
                                self.processing_class.pad_token_id)

        given = out
        out, _ = hook.generation(Generation(
            out=out, rewards=scored.rewards.detach().cpu(),
            prompts=rows_asked // self.num_generations, group_size=self.num_generations,
            step=self.state.global_step, seed=self.args.seed,
            dataset_size=len(in_play), sample=sample, merge=merge,
            counts=self.activity), value)
        if merged:
            return out, merged[-1]
        if out is not given:  # rows without their values: no later hook could read them right
            raise RuntimeError(f"hooks.{hook.name}: a generation hook's batch is the one it was "
                               "given or one that Generation.merge made")
        return out, scored

    def _advantage_hooks(self, out: dict, scored: ScoredRows, mode: str) -> None:
        """The hooks at the advantages point, on the whole step's batch (every process's
        share, gathered as the rewards are); this process keeps its own share. Training
        batches count what each changed."""
        on = hooks_at("advantages", self.ablation_hooks)
        if not on:
            return

        lengths = self.accelerator.gather(out["completion_mask"].sum(1))
        kl = self.accelerator.gather(self._kl_to_ref(out)) \
            if any(hook.kl_from_loss for hook, _ in on) else None

        def run(full: torch.Tensor) -> torch.Tensor:
            def here(mask):
                return None if mask is None else mask.to(full.device)

            batch = StepBatch(advantages=full, rewards=scored.rewards.to(full.device),
                              group_size=self.num_generations, step=self.state.global_step,
                              scale_rewards=self.scale_rewards, lengths=lengths.to(full.device),
                              keep=here(scored.advantage_keep), in_loss=here(scored.keep),
                              kl_to_ref=None if kl is None else kl.to(full.device))
            for hook, value in on:
                new = hook.advantages(batch, value)
                if mode == "train":
                    self._count(hook.name, new.numel(), int((new != batch.advantages).sum()))
                batch.advantages = new
            return batch.advantages

        out["advantages"] = on_whole_batch(out["advantages"], self.accelerator.gather,
                                           self.accelerator.process_index, run)

    def _kl_to_ref(self, out: dict) -> torch.Tensor:
        """[this process's completions] sum over completion tokens of log pi_sample - log
        pi_ref (k1), from TRL's reference log-probs (trainer.beta > 0 computes them) and the
        sampling policy's: vLLM's, TRL's old ones, or, on policy, the policy's now (the
        weights that sampled the batch)."""
        ref = out.get("ref_per_token_logps")
        if ref is None:
            raise RuntimeError("trl computed no reference log-probs (trainer.beta is 0?): the KL "
                               "in the reward needs them")
        sample = out.get("sampling_per_token_logps", out.get("old_per_token_logps"))
        if sample is None:
            ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
            mask = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
            with torch.no_grad():
                sample, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, ids, mask, out["completion_ids"].size(1),
                    batch_size=self.args.per_device_train_batch_size)
        mask = out["completion_mask"] * out.get("tool_mask", 1)
        return ((sample - ref) * mask).sum(1)
