"""A run that resumes bit for bit: the data order as a pure function of the seed and the
epoch (EpochSeededSampler), and mid-run checkpoints written whole or not at all, each
process's run state and the synced reference's weights beside the Trainer's own
(training/checkpoint.py keeps the folders)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import broadcast_object_list
from trl import GRPOTrainer
from trl.trainer.utils import RepeatSampler

# The synced reference (trainer.sync_ref_model) is saved beside each mid-run checkpoint.
REFERENCE_FILE = "reference_model.pt"


def gather_errors(trainer: GRPOTrainer, error: str | None) -> list[str | None]:
    """Every process's error (or None) from a step they all take."""
    if trainer.accelerator.num_processes == 1:
        return [error]
    from accelerate.utils import gather_object

    return gather_object([error])


class EpochSeededSampler(RepeatSampler):
    """TRL's RepeatSampler, whose order in epoch e is the one its persistent generator gives
    at its e-th pass (the same permutations), computed from the seed and e: a run resumed in
    epoch e shuffles as the uninterrupted run did. The Trainer sets the epoch (`set_epoch`)
    on its data loader's sampler before each pass."""

    epoch = 0
    # epoch -> the prompts it leaves out (a prompt filter's, trainer.PromptFiltering), or None
    left_out: Callable[[int], list[int]] | None = None

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        if self.shuffle and self.seed is not None:
            self.generator = torch.Generator().manual_seed(self.seed)
            for _ in range(self.epoch):
                torch.randperm(self.num_samples, generator=self.generator)
        left_out = set(self.left_out(self.epoch)) if self.left_out is not None else set()
        return self._without(left_out) if left_out else super().__iter__()

    def _without(self, left_out: set[int]):
        """TRL's pass over the prompts not left out, cycled to the epoch's usual length: the
        Trainer's steps per epoch, and where a resumed epoch starts, count on that length."""
        order = torch.randperm(self.num_samples, generator=self.generator).tolist() \
            if self.shuffle else list(range(self.num_samples))
        kept = [i for i in order if i not in left_out]
        kept = (kept * -(-self.num_samples // len(kept)))[:self.num_samples]
        whole = len(kept) // self.batch_size * self.batch_size
        for start in range(0, whole, self.batch_size):
            chunk = kept[start:start + self.batch_size]
            for _ in range(self.repeat_count):
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index


class ResumableTraining(GRPOTrainer):
    """The sampler and the checkpoints of a resumable run. Needs `run_state`,
    `run_checkpoints` and `checkpoint_schedule` (AblationGRPOTrainer sets them)."""

    run_state: Any
    run_checkpoints: Any
    checkpoint_schedule: Any

    def first_process_decides(self, flag: bool) -> bool:
        if self.accelerator.num_processes == 1:
            return flag
        return bool(broadcast_object_list([flag], from_process=0)[0])

    def _get_train_sampler(self, dataset=None):
        sampler = super()._get_train_sampler(dataset)
        if type(sampler) is RepeatSampler:
            sampler.__class__ = EpochSeededSampler  # same fields; only the pass differs
            sampler.left_out = self.prompts_left_out
        return sampler

    def prompts_left_out(self, epoch: int) -> list[int]:
        """The prompts epoch `epoch` leaves out: none here (PromptFiltering decides them)."""
        return []

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
