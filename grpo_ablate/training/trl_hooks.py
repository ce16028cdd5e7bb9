"""The one module that touches TRL internals.

`AblationGRPOTrainer` is TRL's real `GRPOTrainer` plus a dispatcher for the tricks TRL lacks:
at each hook point (grpo_ablate/hook_tricks.py) it calls the functions of the hook tricks a
run turns on, in their declared order. The points sit in TRL's private methods: the rewards,
the dropped samples and the extra generation rounds in `_calculate_rewards` and
`_generate_and_score_completions`, the advantages after TRL's group z-score, and the
per-token advantages inside the loss, between `_get_per_token_logps_and_entropies` and the
moment `_compute_loss` reads them; dropped rows leave the loss through the public
`compute_loss`. For mid-run checkpoints that resume bit for bit, three more overrides
(`_save_checkpoint`, `_get_train_sampler`, the Trainer's `_run_epoch`), and the run's seed for
TRL's colocated vLLM engine; the synced reference's weights beside each checkpoint (`train`
loads them on resume); and counters in two of TRL's loss helpers (`get_off_policy_mask`,
`get_gamma_weights`), for how often those variants acted. With every hook off it computes
exactly what the bare trainer computes (tests/test_runs.py). TRL is pinned in pyproject.toml;
tests/test_trl_hooks.py fails loudly when these methods or their behaviour move, which is
the signal to re-check this file before widening the pin.

TRL behaviour relied on (checked by tests/test_trl_hooks.py):
- `_calculate_rewards` returns the (completions x reward functions) matrix gathered over
  all processes, before the group mean is taken;
- a completion whose rewards are all NaN is left out of its group's mean and std and gets
  advantage 0 (TRL's "unscorable" rule): low-reward filtering uses it, so the kept samples'
  advantages are computed over the kept samples only, as the review defines the trick;
- `_compute_loss` computes the policy's log-probs before it reads `inputs["advantages"]`, and
  takes per-token [rows, tokens] advantages as they are (the loss point, check_trl_compat).
"""

from __future__ import annotations

import inspect
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import broadcast_object_list, gather
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

from grpo_ablate.hook_tricks import (
    DropBatch,
    Generation,
    HookTrick,
    RewardBatch,
    StepBatch,
    TokenBatch,
    hooks_at,
    kept_loss_scale,
    on_whole_batch,
)
from grpo_ablate.training.outcome import WEIGHT_MOVED
from grpo_ablate.training.run_state import RunState

TESTED_TRL = (1, 16)
# The private methods overridden below, with the parameters this module relies on.
HOOKED = {
    "_calculate_rewards": ["self", "inputs", "prompts", "completions", "completion_ids_list"],
    "_generate_and_score_completions": ["self", "inputs"],
    "_get_train_sampler": ["self", "dataset"],
    "_save_checkpoint": ["self", "model", "trial"],
    "_compute_loss": ["self", "model", "inputs"],
    "_get_per_token_logps_and_entropies": ["self", "model", "input_ids", "attention_mask",
                                           "logits_to_keep", "batch_size", "compute_entropy",
                                           "compute_aux_loss", "pixel_values", "image_grid_thw",
                                           "num_images", "pixel_attention_mask",
                                           "spatial_shapes", "num_tiles", "image_sizes",
                                           "token_type_ids", "mm_token_type_ids",
                                           "image_position_ids"],
    "_run_epoch": ["self", "model", "epoch", "train_dataloader", "steps_in_epoch",
                   "num_update_steps_per_epoch", "trial", "ignore_keys_for_eval", "start_time",
                   "resume_from_checkpoint", "epochs_trained", "steps_trained_in_current_epoch"],
    # static in TRL, called as self.<name>(...) from _compute_loss: counted here
    "get_off_policy_mask": ["advantages", "per_token_logps", "sampling_per_token_logps", "mask",
                            "off_policy_threshold"],
    "get_gamma_weights": ["advantages", "log_ratio_per_token", "mask",
                          "importance_sampling_ratio", "k_pos", "lambda_pos", "k_neg",
                          "lambda_neg"],
}
# The synced reference (trainer.sync_ref_model) is saved beside each mid-run checkpoint.
REFERENCE_FILE = "reference_model.pt"

# TRL seeds its colocated vLLM engine with the process index alone (TRL PR #7040); the
# engine is given a seed of the run's instead (seeded_vllm_engine).
VLLM_SEED_SOURCE = "seed=accelerator.process_index // self.tensor_parallel_size"
# What the held-out evaluation sets on TRL's vLLM engine (trl.generation.VLLMGeneration) for
# its own sampling, and puts back after.
VLLM_SAMPLING = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                 "max_completion_length", "generation_kwargs")
# Loss types that average per sequence over the batch: a filtered-out sequence would still
# count in that average, so the loss is rescaled to average over the kept ones.
PER_SEQUENCE_LOSSES = ("grpo", "sapo", "luspo", "dr_grpo")
KEPT_ROWS = "kept_rows"  # the batch's entry for the rows drop_samples kept (the loss rescales)


def gather_errors(trainer: GRPOTrainer, error: str | None) -> list[str | None]:
    """Every process's error (or None) from a step they all take."""
    if trainer.accelerator.num_processes == 1:
        return [error]
    from accelerate.utils import gather_object

    return gather_object([error])


def check_trl_compat() -> None:
    """Fail loudly if the GRPOTrainer internals this module overrides or reads have moved."""
    from trl.generation.vllm_generation import VLLMGeneration

    engine_init = inspect.getsource(VLLMGeneration.__init__)
    moved = [a for a in VLLM_SAMPLING if f"self.{a} =" not in engine_init]
    if moved or list(inspect.signature(VLLMGeneration.generate).parameters)[:4] != \
            ["self", "prompts", "images", "num_generations"] \
            or "_last_loaded_step" not in inspect.getsource(GRPOTrainer._generate_single_turn):
        raise RuntimeError(f"trl's VLLMGeneration or its weight sync changed ({moved or 'generate'})"
                           ": re-check AblationGRPOTrainer.vllm_texts in grpo_ablate/training/trl_hooks.py")
    from trl.generation.vllm_generation import VLLMGeneration as Engine

    if VLLM_SEED_SOURCE not in inspect.getsource(Engine._init_vllm) \
            or "self.generator" not in inspect.getsource(RepeatSampler.__iter__):
        raise RuntimeError("trl's vLLM engine seed or RepeatSampler's shuffle changed: re-check "
                           "seeded_vllm_engine and EpochSeededSampler in grpo_ablate/training/trl_hooks.py")
    loss_source = inspect.getsource(GRPOTrainer._compute_loss)
    # The loss point: TRL computes the policy's log-probs, then reads the advantages (and takes
    # per-token ones as they are), so they can be rewritten per token in between.
    logps_at = loss_source.find("self._get_per_token_logps_and_entropies(")
    advantages_at = loss_source.find('advantages = inputs["advantages"]')
    if not 0 <= logps_at < advantages_at or "if advantages.dim() == 1:" not in loss_source:
        raise RuntimeError("trl's _compute_loss no longer reads the advantages after the "
                           "policy's log-probs, or no longer takes per-token ones: re-check "
                           "the token_advantages point in grpo_ablate/training/trl_hooks.py")
    if any(f"self.{name}(" not in loss_source for name in ("get_off_policy_mask",
                                                          "get_gamma_weights")):
        raise RuntimeError("trl's _compute_loss no longer calls get_off_policy_mask or "
                           "get_gamma_weights through self: re-check the variants' counters in "
                           "grpo_ablate/training/trl_hooks.py")
    for name, params in HOOKED.items():
        method = getattr(GRPOTrainer, name, None)
        if method is None:
            raise RuntimeError(f"trl.GRPOTrainer.{name} is gone: re-check grpo_ablate/training/trl_hooks.py")
        got = list(inspect.signature(method).parameters)
        if got != params:
            raise RuntimeError(f"trl.GRPOTrainer.{name}{got} changed from {params}: "
                               "re-check grpo_ablate/training/trl_hooks.py")


LEFT_PADDED = ("prompt_ids", "prompt_mask")  # TRL pads prompts on the left, the rest right


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


def vllm_engine_seed(run_seed: int, tp_group: int) -> int:
    """The colocated vLLM engine's seed: the run's seed and the process's tensor-parallel
    group (one stream per group: the processes of a group must sample alike, and groups
    sample the same prompt's completions, so they must not)."""
    return (run_seed * 1_000_003 + tp_group) % 2**31


@contextmanager
def seeded_vllm_engine(run_seed: int):
    """While TRL builds its colocated vLLM engine, `LLM(seed=...)` gets vllm_engine_seed in
    place of TRL's process index. Not a per-request seed: colocate mode sends each prompt
    num_generations times with n=1, so a fixed one would make a group's completions equal."""
    import trl.generation.vllm_generation as engine_module

    original = getattr(engine_module, "LLM", None)
    if original is None:  # vLLM is not installed: TRL refuses use_vllm itself
        yield
        return

    def llm(*args: Any, seed: int = 0, **kwargs: Any):
        return original(*args, seed=vllm_engine_seed(run_seed, seed), **kwargs)

    engine_module.LLM = llm
    try:
        yield
    finally:
        engine_module.LLM = original


class EpochSeededSampler(RepeatSampler):
    """TRL's RepeatSampler, whose order in epoch e is the one its persistent generator gives
    at its e-th pass (the same permutations), computed from the seed and e: a run resumed in
    epoch e shuffles as the uninterrupted run did. The trainer sets `epoch` (_run_epoch)."""

    epoch = 0

    def __iter__(self):
        if self.shuffle and self.seed is not None:
            self.generator = torch.Generator().manual_seed(self.seed)
            for _ in range(self.epoch):
                torch.randperm(self.num_samples, generator=self.generator)
        return super().__iter__()


class AblationGRPOTrainer(GRPOTrainer):
    """GRPOTrainer + the hook tricks a run turns on, called at their points.

    `activity` counts how often each of them acted (the units each point function changed,
    and what a hook counts for itself), for the record."""

    def __init__(self, *args: Any, hooks: dict | None = None,
                 run_state: RunState | None = None, checkpoints=None, **kwargs: Any) -> None:
        """`run_state`: where the activity and generation time are counted (shared with the
        callbacks and the tricks that count outside this class); `checkpoints`: the run's
        RunCheckpoints and CheckpointSchedule, or None (no mid-run checkpoints)."""
        check_trl_compat()
        self.ablation_hooks = hooks or {}
        self.run_state = run_state if run_state is not None else RunState()
        self.activity = self.run_state.activity
        self.run_checkpoints, self.checkpoint_schedule = checkpoints or (None, None)
        self._shaped_rewards: torch.Tensor | None = None
        self._loss_inputs: dict | None = None  # the micro-batch TRL's loss is computing
        self._loss_calls = (-1, 0)  # (step, micro-batches of that step): their seeds
        self._keep: torch.Tensor | None = None  # the drop_samples point's, this batch
        self._train_sampler: EpochSeededSampler | None = None
        args_ = kwargs.get("args")
        seed = args_.seed if args_ is not None else 42
        with seeded_vllm_engine(seed):
            super().__init__(*args, **kwargs)
        if self.args.cast_lm_head_to_fp32:  # acts only on a policy that computes below fp32
            low = self.args.bf16 or self.args.fp16 or any(
                p.dtype in (torch.bfloat16, torch.float16)
                for n, p in self.model.named_parameters() if "lm_head" not in n)
            self.activity["lm_head_processes"] = 1  # every process: summed over them
            self.activity["lm_head_below_fp32"] = int(low)
        if self.checkpoint_schedule is not None:
            self.checkpoint_schedule.agree = self.first_process_decides

    @property
    def generation_seconds(self) -> float:
        return self.run_state.generation_seconds

    def first_process_decides(self, flag: bool) -> bool:
        if self.accelerator.num_processes == 1:
            return flag
        return bool(broadcast_object_list([flag], from_process=0)[0])

    # -- the data order: a pure function of the seed and the epoch (resumable) ------------
    def _get_train_sampler(self, dataset=None):
        sampler = super()._get_train_sampler(dataset)
        if type(sampler) is RepeatSampler:
            sampler.__class__ = EpochSeededSampler  # same fields; only the pass differs
            self._train_sampler = sampler
        return sampler

    def _run_epoch(self, *args: Any, **kwargs: Any):
        if self._train_sampler is not None:
            self._train_sampler.epoch = kwargs["epoch"]
        return super()._run_epoch(*args, **kwargs)

    # -- mid-run checkpoints: whole or absent (training/checkpoint.py) --------------------
    def _save_checkpoint(self, model, trial) -> None:
        """The Trainer's checkpoint into the incoming folder, each process's run state beside
        it, then committed whole by the first process. A save that fails (a full disk) is a
        warning on every process, and the run goes on."""
        if self.run_checkpoints is None:
            return super()._save_checkpoint(model, trial)
        start = time.perf_counter()
        step = self.state.global_step
        folder = Path(self.args.output_dir) / f"checkpoint-{step}"
        error = None
        try:
            super()._save_checkpoint(model, trial)
            self.run_checkpoints.write_rank_state(folder, self.accelerator.process_index,
                                                  self.run_state)
            if self.args.sync_ref_model and self.accelerator.is_main_process:
                self.save_reference(folder)
        except Exception as exc:  # noqa: BLE001 - a checkpoint never stops a run
            error = f"{type(exc).__name__}: {exc}"
        errors = [e for e in gather_errors(self, error) if e]
        if self.accelerator.is_main_process:
            self.run_checkpoints.commit_or_discard(folder, step, time.perf_counter() - start,
                                                   errors[0] if errors else None)
        self.accelerator.wait_for_everyone()
        self.checkpoint_schedule.saved(step, time.perf_counter() - start)

    def save_reference(self, folder: Path) -> None:
        """The synced reference's weights: TRL's sync moves them away from the checkpoint the
        run started from, so a resumed run needs them to keep the reference it had."""
        ref = self.accelerator.unwrap_model(self.ref_model)
        torch.save({k: v.detach().cpu() for k, v in ref.state_dict().items()},
                   Path(folder) / REFERENCE_FILE)

    def train(self, resume_from_checkpoint=None, *args: Any, **kwargs: Any):
        if resume_from_checkpoint and self.args.sync_ref_model:
            saved = torch.load(Path(resume_from_checkpoint) / REFERENCE_FILE, map_location="cpu",
                               weights_only=True)
            self.accelerator.unwrap_model(self.ref_model).load_state_dict(saved)
        return super().train(resume_from_checkpoint, *args, **kwargs)

    # -- rewards: shaped (and filtered) before TRL subtracts the group mean ---------------
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions,
                                                      completion_ids_list)
        mode = "train" if self.model.training else "eval"
        weights = self.reward_weights.to(rewards_per_func.device)
        lengths = torch.tensor([len(ids) for ids in completion_ids_list],
                               device=rewards_per_func.device)
        lengths = gather(lengths)  # rewards are gathered across processes; match them
        rewards_per_func = self._reward_hooks(rewards_per_func, lengths, weights, mode)
        self._shaped_rewards = (rewards_per_func * weights).nansum(1)
        self._keep = None
        if mode == "train":
            for hook, value in hooks_at("drop_samples", self.ablation_hooks):
                keep = hook.drop_samples(DropBatch(self._shaped_rewards, self.state.global_step,
                                                   self.state.max_steps), value)
                if keep is None:
                    continue
                self._count(hook, keep.numel(), int((~keep).sum()))
                self._keep = keep if self._keep is None else self._keep & keep
        if self._keep is not None:
            # All-NaN rows take no part in TRL's group mean/std and get advantage 0.
            rewards_per_func = rewards_per_func.masked_fill(~self._keep[:, None], float("nan"))
        return rewards_per_func

    def _reward_hooks(self, rewards: torch.Tensor, lengths: torch.Tensor,
                      weights: torch.Tensor, mode: str) -> torch.Tensor:
        """The hooks at the rewards point (grpo_ablate/hook_tricks.py), in their order; the
        batch's reward before them is logged as `reward_unshaped`."""
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
                self._count(hook, rewards.size(0), int(changed.sum()))
        return rewards

    def _count(self, hook: HookTrick, units: int, changed: int) -> None:
        """A point function's counters (the record's activity reads them)."""
        self.activity[f"{hook.name}_units"] += units
        self.activity[f"{hook.name}_changed"] += changed

    # -- advantages and loss mask: after TRL's group z-score ------------------------------
    def _generate_and_score_completions(self, inputs):
        start = time.perf_counter()
        out = self._sampled(inputs)
        hooks = self.ablation_hooks
        mode = "train" if self.model.training else "eval"
        if mode == "train":
            out = self._generation_hooks(inputs, out)
        self.run_state.generation_seconds += time.perf_counter() - start  # and its rewards
        n = out["completion_mask"].size(0)
        local = slice(self.accelerator.process_index * n, (self.accelerator.process_index + 1) * n)
        self._advantage_hooks(out, mode)
        droppers = hooks_at("drop_samples", hooks) if mode == "train" else []
        if droppers:
            dropped = 0.0
            if self._keep is not None:
                keep = self._keep[local].to(out["completion_mask"].device)
                # Dropped samples get no gradient (their KL term included) and leave every
                # normaliser: the token count (dapo) and the per-sequence mean (grpo).
                out["completion_mask"] = out["completion_mask"] * keep[:, None]
                out["num_items_in_batch"] = self.accelerator.gather(
                    out["completion_mask"].sum()).sum()
                out[KEPT_ROWS] = keep
                dropped = 1.0 - self._keep.float().mean().item()
                # TRL logs the reward over kept rows only; the run's reward is over all of them.
                self._metrics[mode]["reward"][-1] = self._shaped_rewards.mean().item()
                self._metrics[mode]["reward_std"][-1] = self._shaped_rewards.std().item()
            for hook, _ in droppers:
                self._metrics[mode][hook.dropped_metric or f"{hook.name}/frac_dropped"].append(dropped)
        return out

    def _advantage_hooks(self, out: dict, mode: str) -> None:
        """The hooks at the advantages point, on the whole step's batch (every process's
        share, gathered as the rewards are); this process keeps its own share. Training
        batches count what each changed."""
        on = hooks_at("advantages", self.ablation_hooks)
        if not on:
            return

        def run(full: torch.Tensor) -> torch.Tensor:
            batch = StepBatch(advantages=full, rewards=self._shaped_rewards.to(full.device),
                              group_size=self.num_generations, step=self.state.global_step)
            for hook, value in on:
                new = hook.advantages(batch, value)
                if mode == "train":
                    self._count(hook, new.numel(), int((new != batch.advantages).sum()))
                batch.advantages = new
            return batch.advantages

        out["advantages"] = on_whole_batch(out["advantages"], self.accelerator.gather,
                                           self.accelerator.process_index, run)

    def _sampled(self, inputs):
        """TRL's sampling and scoring of one batch; its prompt tokens counted (the completion
        tokens are counted by the reward, train.py), each completion's prompt once, as verl
        counts its throughput."""
        out = super()._generate_and_score_completions(inputs)
        if self.model.training:
            cost = self.run_state.cost
            cost["prompt_tokens"] = cost.get("prompt_tokens", 0) + int(out["prompt_mask"].sum())
        return out

    # -- the generation point: more rounds of sampling (dynamic sampling) ------------------
    def _generation_hooks(self, inputs: list[dict], out: dict) -> dict:
        """The hooks at the generation point choose the batch the step trains on; the rewards
        of that batch are what the hooks after this point see."""
        for hook, value in hooks_at("generation", self.ablation_hooks):
            def sample(rows: list[int]) -> tuple[dict, torch.Tensor]:
                group = [self.train_dataset[i] for i in rows for _ in range(self.num_generations)]
                more = self._sampled(group)
                return more, self._shaped_rewards.detach().cpu()

            out, self._shaped_rewards = hook.generation(Generation(
                out=out, rewards=self._shaped_rewards.detach().cpu(),
                prompts=len(inputs) // self.num_generations, group_size=self.num_generations,
                step=self.state.global_step, seed=self.args.seed,
                dataset_size=len(self.train_dataset), sample=sample,
                merge=lambda outs, kept: merge_groups(outs, kept, self.num_generations,
                                                      self.processing_class.pad_token_id),
                counts=self.activity), value)
        return out

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
        # On a copy: a batch used for several updates keeps its own advantages.
        self._loss_inputs = dict(inputs)
        try:
            return super()._compute_loss(model, self._loss_inputs)
        finally:
            self._loss_inputs = None

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask,
                                           logits_to_keep, *args: Any, **kwargs: Any):
        out = super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask,
                                                         logits_to_keep, *args, **kwargs)
        if self._loss_inputs is not None:  # inside _compute_loss, before it reads advantages
            self._token_advantage_hooks(self._loss_inputs, out[0])
            self._loss_inputs = None
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
            self._count(hook, int(mask.sum()), int(changed.sum()))
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

    # -- held-out evaluation on the engine training generates with (trainer.use_vllm) -----
    def vllm_texts(self, texts: list[str], max_new_tokens: int,
                   temperature: float | None) -> list[str]:
        """Completions of `texts` from TRL's vLLM engine, for the weights now in self.model
        (the EMA weights while they are swapped in): pushed to the engine first, and marked
        stale after, so the next training generation pushes the training weights back."""
        engine = self.vllm_generation
        saved = {name: getattr(engine, name) for name in VLLM_SAMPLING}
        engine.sync_weights()
        engine.temperature = 0.0 if temperature is None else temperature  # 0: greedy in vLLM
        engine.top_p, engine.top_k, engine.min_p, engine.repetition_penalty = 1.0, 0, 0.0, 1.0
        engine.max_completion_length, engine.generation_kwargs = max_new_tokens, {}
        try:
            ids = [self.processing_class(t)["input_ids"] for t in texts]
            _, completion_ids, _, _ = engine.generate(prompts=ids, images=None, num_generations=1)
        finally:
            for name, value in saved.items():
                setattr(engine, name, value)
            self._last_loaded_step = -1
        return self.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
