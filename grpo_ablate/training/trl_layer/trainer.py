"""`AblationGRPOTrainer`: TRL's GRPOTrainer with the hook dispatcher, resumable training and
evaluation on vLLM (this folder's other modules), checked against the TRL it was tested with
at every start."""

from __future__ import annotations

from typing import Any

import torch

from grpo_ablate.training.run_state import RunState
from grpo_ablate.training.trl_layer.compat import check_trl_compat
from grpo_ablate.training.trl_layer.dispatch import HookDispatch
from grpo_ablate.training.trl_layer.prompt_filter import PromptFiltering
from grpo_ablate.training.trl_layer.resumable import ResumableTraining
from grpo_ablate.training.trl_layer.vllm import VllmEvaluation, seeded_vllm_engine


class AblationGRPOTrainer(HookDispatch, PromptFiltering, ResumableTraining, VllmEvaluation):
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
        self._loss_calls = (-1, 0)  # (step, micro-batches of that step): their seeds
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

    def step_batch(self, rows: list[dict]) -> dict:
        """The batch a training step trains on for these prompt rows (each once per
        completion of its group): sampled, scored and given its advantages as training does,
        every hook point included; for the checks that plant a step's rewards and compare
        arms' gradients on it (scripts/check_duplicates.py)."""
        return self._generate_and_score_completions(rows)
