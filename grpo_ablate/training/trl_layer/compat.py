"""The TRL version grpo-ablate was tested with, and the private methods and behaviour the
TRL layer relies on: `check_trl_compat` runs at every trainer's start and fails loudly when
any of them moved, the signal to re-check this folder before widening the pin."""

from __future__ import annotations

import inspect

from transformers import Trainer
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

TESTED_TRL = (1, 16)
# The private methods overridden in this folder, with the parameters it relies on.
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
    # static in TRL, called as self.<name>(...) from _compute_loss: counted here
    "get_off_policy_mask": ["advantages", "per_token_logps", "sampling_per_token_logps", "mask",
                            "off_policy_threshold"],
    "get_gamma_weights": ["advantages", "log_ratio_per_token", "mask",
                          "importance_sampling_ratio", "k_pos", "lambda_pos", "k_neg",
                          "lambda_neg"],
}
# TRL seeds its colocated vLLM engine with the process index alone (TRL PR #7040); the
# engine is given a seed of the run's instead (vllm.py).
VLLM_SEED_SOURCE = "seed=accelerator.process_index // self.tensor_parallel_size"
# What the held-out evaluation sets on TRL's vLLM engine (trl.generation.VLLMGeneration) for
# its own sampling, and puts back after.
VLLM_SAMPLING = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                 "max_completion_length", "generation_kwargs")


def check_trl_compat() -> None:
    """Fail loudly if the GRPOTrainer internals this folder overrides or reads have moved."""
    from trl.generation.vllm_generation import VLLMGeneration

    engine_init = inspect.getsource(VLLMGeneration.__init__)
    moved = [a for a in VLLM_SAMPLING if f"self.{a} =" not in engine_init]
    if moved or list(inspect.signature(VLLMGeneration.generate).parameters)[:4] != \
            ["self", "prompts", "images", "num_generations"] \
            or "_last_loaded_step" not in inspect.getsource(GRPOTrainer._generate_single_turn):
        raise RuntimeError(f"trl's VLLMGeneration or its weight sync changed ({moved or 'generate'})"
                           ": re-check grpo_ablate/training/trl_layer/vllm.py")
    if VLLM_SEED_SOURCE not in inspect.getsource(VLLMGeneration._init_vllm) \
            or "self.generator" not in inspect.getsource(RepeatSampler.__iter__):
        raise RuntimeError("trl's vLLM engine seed or RepeatSampler's shuffle changed: re-check "
                           "grpo_ablate/training/trl_layer/vllm.py and resumable.py")
    if "set_epoch(epoch)" not in inspect.getsource(Trainer._run_epoch):
        raise RuntimeError("transformers' Trainer no longer sets each epoch on its sampler: "
                           "re-check EpochSeededSampler in grpo_ablate/training/trl_layer/resumable.py")
    loss_source = inspect.getsource(GRPOTrainer._compute_loss)
    # The loss point: TRL computes the policy's log-probs, then reads the advantages (and takes
    # per-token ones as they are), so they can be rewritten per token in between.
    logps_at = loss_source.find("self._get_per_token_logps_and_entropies(")
    advantages_at = loss_source.find('advantages = inputs["advantages"]')
    if not 0 <= logps_at < advantages_at or "if advantages.dim() == 1:" not in loss_source:
        raise RuntimeError("trl's _compute_loss no longer reads the advantages after the "
                           "policy's log-probs, or no longer takes per-token ones: re-check "
                           "the token_advantages point in grpo_ablate/training/trl_layer/dispatch.py")
    if any(f"self.{name}(" not in loss_source for name in ("get_off_policy_mask",
                                                          "get_gamma_weights")):
        raise RuntimeError("trl's _compute_loss no longer calls get_off_policy_mask or "
                           "get_gamma_weights through self: re-check the variants' counters in "
                           "grpo_ablate/training/trl_layer/dispatch.py")
    # The KL in the reward: TRL's loss reads its KL coefficient from self.beta at call time
    # (loss_point.py sets it to 0 there), and its batch carries the reference log-probs.
    if loss_source.count("if self.beta != 0.0:") < 2 or 'output["ref_per_token_logps"]' not in \
            inspect.getsource(GRPOTrainer._generate_and_score_completions):
        raise RuntimeError("trl's _compute_loss no longer reads self.beta for its KL term, or its "
                           "batch no longer carries ref_per_token_logps: re-check the KL in the "
                           "reward in grpo_ablate/training/trl_layer/loss_point.py and dispatch.py")
    # A trust region in place of the ratio clip: TRL's clip reads its range from self at call
    # time (loss_point.py widens it there).
    if "1 - self.epsilon_low, 1 + self.epsilon_high" not in loss_source:
        raise RuntimeError("trl's _compute_loss no longer reads its clip range from "
                           "self.epsilon_low and self.epsilon_high: re-check ratio_clip_off in "
                           "grpo_ablate/training/trl_layer/loss_point.py")
    for name, params in HOOKED.items():
        method = getattr(GRPOTrainer, name, None)
        if method is None:
            raise RuntimeError(f"trl.GRPOTrainer.{name} is gone: re-check grpo_ablate/training/trl_layer/")
        got = list(inspect.signature(method).parameters)
        if got != params:
            raise RuntimeError(f"trl.GRPOTrainer.{name}{got} changed from {params}: "
                               "re-check grpo_ablate/training/trl_layer/")
