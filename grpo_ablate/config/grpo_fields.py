"""Every field of TRL's `GRPOConfig` (its `TrainingArguments` included), classified once:
either the baseline recipe pins it (conf/recipe/baseline.yaml sets it under `trainer:`, so a
TRL release that moves its default cannot move the baseline), or it is declared here not to
change what a run computes, with the reason. `unclassified_fields` is what the suite checks
against the installed TRL: a new field, or a pinned one the recipe does not set, fails
`make test` instead of moving the baseline silently."""

from __future__ import annotations

from collections.abc import Iterable

# Pinned by the recipe: they change the numbers. The reason says how.
PINNED: dict[str, str] = {
    # the objective
    "beta": "the KL penalty's weight",
    "use_bias_correction_kl": "TRL's default multiplies the per-token KL by the importance "
                              "ratio (DeepSeek-V3.2): the review's k3 KL needs it off",
    "loss_type": "how token losses are averaged (TRL's default moved to 'dapo')",
    "scale_rewards": "the group advantage's divisor",
    "importance_sampling_level": "token or sequence (GSPO) importance ratios",
    "epsilon": "the clip range's lower side", "epsilon_high": "the clip range's upper side",
    "delta": "two-sided clipping's cap", "num_iterations": "updates per generated batch",
    "off_policy_mask_threshold": "DeepSeek-V3.2's off-policy sequence mask",
    "mask_truncated_completions": "truncated completions left out of the loss",
    "top_entropy_quantile": "tokens kept by their entropy",
    "entropy_coef": "the entropy bonus", "use_adaptive_entropy": "Skywork-OR1's adaptive bonus",
    "entropy_coef_min": "the adaptive bonus's floor", "entropy_coef_max": "its ceiling",
    "entropy_coef_delta": "its step", "entropy_target": "its target entropy",
    "sapo_temperature_neg": "SAPO's gate, negative advantages",
    "sapo_temperature_pos": "SAPO's gate, positive advantages",
    "vespo_k_pos": "VESPO's shape, positive", "vespo_lambda_pos": "VESPO's scale, positive",
    "vespo_k_neg": "VESPO's shape, negative", "vespo_lambda_neg": "VESPO's scale, negative",
    "reward_weights": "the weights of the reward functions",
    "multi_objective_aggregation": "how several rewards become one advantage",
    "router_aux_loss_coef": "a mixture-of-experts model's router loss in the objective",
    "cast_lm_head_to_fp32": "the output layer's precision (ScaleRL)",
    "sync_ref_model": "the reference model moved during training",
    "ref_model_mixup_alpha": "how far a sync moves it", "ref_model_sync_steps": "how often",
    "disable_dropout": "dropout in the policy",
    # what is sampled
    "num_generations": "G", "max_completion_length": "the completion cap",
    "temperature": "sampling temperature", "top_p": "nucleus sampling", "top_k": "top-k sampling",
    "min_p": "min-p sampling", "repetition_penalty": "sampling's repetition penalty",
    "generation_kwargs": "any other sampling argument",
    "chat_template_kwargs": "how prompts are rendered",
    "steps_per_generation": "optimizer steps per generated batch",
    "shuffle_dataset": "the prompt order", "pad_to_multiple_of": "padding of model inputs",
    "max_tool_calling_iterations": "tool-calling rounds per completion",
    "cache_implementation": "the KV cache generation uses",
    "use_transformers_paged": "generation through transformers' paged attention",
    "use_transformers_continuous_batching": "generation through continuous batching",
    "transformers_continuous_batching_config": "its settings",
    "use_vllm": "the generation engine", "vllm_mode": "colocated or a server",
    "vllm_model_impl": "vLLM's or transformers' model code in vLLM",
    "vllm_max_model_length": "vLLM's context cap",
    "vllm_structured_outputs_regex": "constrained decoding",
    "vllm_importance_sampling_correction": "the correction for vLLM's sampling probabilities",
    "vllm_importance_sampling_mode": "its kind (token or sequence, truncate or mask)",
    "vllm_importance_sampling_clip_max": "its cap", "vllm_importance_sampling_clip_min": "its floor",
    "vllm_importance_sampling_cap": "its cap under the older name",
    # the optimizer, the schedule, the batch, the numbers' precision
    "learning_rate": "the step size", "lr_scheduler_type": "the schedule",
    "lr_scheduler_kwargs": "the schedule's arguments", "warmup_steps": "the warm-up",
    "weight_decay": "AdamW's decay", "optim": "the optimizer",
    "optim_args": "the optimizer's extra arguments",
    "adam_beta1": "Adam's first moment", "adam_beta2": "Adam's second moment",
    "adam_epsilon": "Adam's epsilon", "max_grad_norm": "gradient clipping",
    "max_steps": "the run's length", "per_device_train_batch_size": "completions per micro-batch",
    "gradient_accumulation_steps": "micro-batches per optimizer step",
    "average_tokens_across_devices": "the loss's normaliser across processes",
    "seed": "the run's randomness", "data_seed": "the sampler's randomness",
    "full_determinism": "deterministic kernels", "bf16": "bf16 mixed precision",
    "fp16": "fp16 mixed precision", "tf32": "TF32 matrix products on CUDA",
    "gradient_checkpointing": "recomputation (the same numbers, other rounding on some kernels)",
    "gradient_checkpointing_kwargs": "the recomputation's variant",
    "torch_compile": "compiled kernels", "use_liger_kernel": "Liger's fused kernels",
    "neftune_noise_alpha": "noise added to embeddings",
    "use_cpu": "the device", "logging_nan_inf_filter": "a NaN loss must reach the guard",
    "dataloader_drop_last": "the last partial batch", "model_init_kwargs": "how TRL loads the "
    "policy (dtype, attention)", "trust_remote_code": "which model code runs",
}

# Declared not to change what a run computes, and why.
_WHERE = "where files, logs or checkpoints go"
_HUB = "the Hugging Face Hub: grpo-ablate never pushes"
_EVAL = "TRL's evaluation loop: grpo-ablate evaluates held-out prompts itself and never runs it"
_LOG = "what is logged or printed, not what is trained"
_SAVE = "grpo-ablate's own checkpoints (docs/failures.md): the Trainer saves nothing"
_SERVER = "where a vLLM server is and how long to wait for it"
_LOADER = "how batches are loaded (workers, pinned memory), not which rows or in what order"
_DIST = "how processes communicate (launch.accelerate and its config choose the engine)"
_UNUSED = "not read by GRPOTrainer's training loop"
NOT_COMPUTATION: dict[str, str] = {
    "output_dir": _WHERE, "run_name": _LOG, "project": _LOG, "logging_strategy": _LOG,
    "logging_steps": _LOG, "logging_first_step": _LOG, "log_on_each_node": _LOG,
    "include_num_input_tokens_seen": _LOG, "log_level": _LOG, "log_level_replica": _LOG,
    "disable_tqdm": _LOG, "report_to": _LOG, "trackio_space_id": _LOG,
    "trackio_bucket_id": _LOG, "trackio_static_space_id": _LOG, "skip_memory_metrics": _LOG,
    "debug": _LOG, "log_completions": _LOG, "log_multimodal": _LOG,
    "num_completions_to_print": _LOG, "log_unique_prompts": _LOG,
    "log_completions_hub_repo": _HUB,
    "push_to_hub": _HUB, "hub_token": _HUB, "hub_private_repo": _HUB, "hub_model_id": _HUB,
    "hub_strategy": _HUB, "hub_always_push": _HUB, "hub_revision": _HUB,
    "eval_strategy": _EVAL, "eval_steps": _EVAL, "eval_delay": _EVAL,
    "per_device_eval_batch_size": _EVAL, "prediction_loss_only": _EVAL, "eval_on_start": _EVAL,
    "eval_do_concat_batches": _EVAL, "eval_use_gather_object": _EVAL,
    "eval_accumulation_steps": _EVAL, "include_for_metrics": _EVAL,
    "batch_eval_metrics": _EVAL, "bf16_full_eval": _EVAL, "fp16_full_eval": _EVAL,
    "num_generations_eval": _EVAL, "load_best_model_at_end": _EVAL,
    "metric_for_best_model": _EVAL, "greater_is_better": _EVAL, "do_eval": _EVAL,
    "do_predict": _EVAL, "label_names": _EVAL,
    "save_only_model": _SAVE, "save_strategy": _SAVE, "save_steps": _SAVE,
    "save_on_each_node": _SAVE, "save_total_limit": _SAVE, "enable_jit_checkpoint": _SAVE,
    "resume_from_checkpoint": _SAVE, "ignore_data_skip": _SAVE,
    "restore_callback_states_from_checkpoint": _SAVE,
    "vllm_server_base_url": _SERVER, "vllm_server_host": _SERVER, "vllm_server_port": _SERVER,
    "vllm_server_timeout": _SERVER, "vllm_group_port": _SERVER,
    "vllm_gpu_memory_utilization": "vLLM's share of GPU memory (room, not results)",
    "vllm_enable_sleep_mode": "vLLM's memory freed between generations (room, not results)",
    "vllm_tensor_parallel_size": "how vLLM splits the model over GPUs (the same model and "
                                 "sampling; a cluster's choice)",
    "ds3_gather_for_generation": "ZeRO-3 weights gathered for generation: speed and memory",
    "torch_empty_cache_steps": "CUDA's cache emptied: memory, not results",
    "auto_find_batch_size": _UNUSED, "use_cache": "the KV cache during training forward "
    "passes (TRL turns it off with gradient checkpointing); generation's own cache is pinned",
    "activation_checkpointing": "an alias TRL folds into gradient_checkpointing (pinned)",
    "activation_checkpointing_kwargs": "an alias of gradient_checkpointing_kwargs (pinned)",
    "dataloader_num_workers": _LOADER, "dataloader_pin_memory": _LOADER,
    "dataloader_persistent_workers": _LOADER, "dataloader_prefetch_factor": _LOADER,
    "dataloader_multiprocessing_context": _LOADER, "dataloader_in_order": _LOADER,
    "remove_unused_columns": "TRL needs the prompt columns and sets it itself",
    "train_sampling_strategy": "GRPOTrainer's own sampler replaces the Trainer's",
    "length_column_name": _UNUSED, "label_smoothing_factor": "GRPOTrainer computes its own "
    "loss: the Trainer's label smoothing is never applied",
    "num_train_epochs": "max_steps (pinned, > 0) decides the run's length",
    "ddp_find_unused_parameters": _DIST, "ddp_bucket_cap_mb": _DIST,
    "ddp_broadcast_buffers": _DIST, "ddp_static_graph": _DIST, "ddp_backend": _DIST,
    "ddp_timeout": _DIST, "fsdp": _DIST, "fsdp_config": _DIST, "deepspeed": _DIST,
    "accelerator_config": _DIST, "parallelism_config": _DIST, "local_rank": _DIST,
    "torch_compile_backend": "used only with torch_compile (pinned off)",
    "torch_compile_mode": "used only with torch_compile (pinned off)",
    "liger_kernel_config": "used only with use_liger_kernel (pinned off)",
    "optim_target_modules": "used only by the GaLore-type optimizers (optim is pinned)",
    "generation_batch_size": "TRL derives it from steps_per_generation (pinned; setting both "
                             "is an error)",
    "do_train": _UNUSED,
}


def unclassified_fields(names: Iterable[str]) -> list[str]:
    """Field names in neither table: each must be pinned in the recipe or declared inert."""
    return sorted(n for n in names if n not in PINNED and n not in NOT_COMPUTATION)


def unpinned_fields(recipe_trainer: dict) -> list[str]:
    """Pinned fields the recipe's trainer section does not set."""
    return sorted(n for n in PINNED if n not in recipe_trainer)
