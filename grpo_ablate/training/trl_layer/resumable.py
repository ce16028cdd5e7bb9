"""A run that resumes bit for bit: the data order as a pure function of the seed and the
epoch (EpochSeededSampler), and mid-run checkpoints written whole or not at all, each
process's run state and the synced reference's weights beside the Trainer's own
(training/checkpoint.py keeps the folders)."""

from __future__ import annotations

import time
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

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        if self.shuffle and self.seed is not None:
            self.generator = torch.Generator().manual_seed(self.seed)
            for _ in range(self.epoch):
                torch.randperm(self.num_samples, generator=self.generator)
        return super().__iter__()


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
        return sampler

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
