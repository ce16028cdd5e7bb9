"""Mid-run checkpoints: when a run saves, what a checkpoint holds beyond the Trainer's own,
how it is committed whole, and which one a re-run resumes from.

A checkpoint is `<run dir>/checkpoints/step-<N>/`: the Trainer's folder (weights, optimizer,
scheduler, every process's RNG states, trainer state) plus each process's `RunState`
(`grpo_ablate_rank<r>.pt`) and a manifest written last (identity, versions, every file's
size). The Trainer writes into `checkpoints/.incoming/`; the finished folder is renamed
into place, so a checkpoint is whole or absent, and the previous one is removed only after.

Saves happen only at generation boundaries (where TRL's buffered completions are used up):
TRL regenerates its buffer after a resume, so a save inside a `steps_per_generation x
num_iterations` cycle could not resume bit for bit (docs/failures.md). They happen only at
logged steps too (`trainer.logging_steps`): what is averaged into the next log row is not
in a checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from grpo_ablate.pausepoints import pause_point
from grpo_ablate.records import CHECKPOINTS_DIR, atomic_write_text
from grpo_ablate.runtime import package_version, say, stable_hash
from grpo_ablate.training.run_state import RunState

log = logging.getLogger(__name__)
MANIFEST = "grpo_ablate_checkpoint.json"
RANK_STATE = "grpo_ablate_rank{rank}.pt"
INCOMING = ".incoming"
PREFIX = "step-"


def identity(run_id: str, processes: int) -> dict[str, Any]:
    """What a checkpoint must match to be resumed: the run (its id is the hash of its whole
    computation), its number of processes (one RNG file each), and the libraries whose
    state formats and numerics it holds."""
    return {"run_id": run_id, "processes": processes,
            "versions": {name: package_version(name) for name in ("trl", "transformers", "torch")}}


def run_checkpoints(spec) -> RunCheckpoints:
    """The checkpoints of one run (a RunSpec), as its config keeps them."""
    cfg = spec.config
    return RunCheckpoints(spec.run_dir, identity(spec.run_id, cfg["launch"]["processes"]),
                          cfg["checkpoint"]["keep_last"])


def resume_lines(spec, path: Path | None, refused: str | None) -> list[str]:
    """What a run says before it trains: where it resumes from, and a checkpoint refused."""
    lines = []
    if path is not None:
        lines.append(f"resuming arm={spec.arm} seed={spec.seed} ({spec.run_id}) from its "
                     f"checkpoint at step {path.name.removeprefix(PREFIX)}")
    if refused:
        lines.append(refused + ("" if path else "; trained from step 0"))
    return lines


def announce_resume(spec) -> None:
    """For a launcher whose run trains in other processes (their output goes to a log)."""
    for line in resume_lines(spec, *run_checkpoints(spec).latest()):
        say(line)


class CheckpointSchedule(TrainerCallback):
    """Asks the Trainer to save (`control.should_save`) at a generation boundary when
    `every_steps` steps or `every_minutes` minutes have passed since the last save. A
    time-based save also waits until the saves so far, plus this one at the last one's cost,
    come to at most `max_overhead` of the time since training began: past the first save,
    saving costs at most that share of a run whatever the model's size. Never at the last
    step (the record follows), nor after the divergence guard stopped the run.

    `agree(flag)` makes every process take the first one's decision (times differ)."""

    def __init__(self, settings: dict, trainer: dict, agree=None) -> None:
        self.every_steps, self.every_minutes = settings["every_steps"], settings["every_minutes"]
        self.max_overhead = settings["max_overhead"]
        self.accumulation = trainer["gradient_accumulation_steps"]
        self.cycle = trainer["steps_per_generation"] * trainer["num_iterations"]  # micro-steps
        self.agree = agree or (lambda flag: flag)
        self.last_step, self.last_time, self.last_seconds = 0, time.monotonic(), 0.0
        self.began, self.saved_seconds = self.last_time, 0.0

    @property
    def enabled(self) -> bool:
        return self.every_steps is not None or self.every_minutes is not None

    def at_boundary(self, step: int, logging_steps: int = 1) -> bool:
        """A generation boundary that is also a logged step: the Trainer's loss since the last
        log and TRL's metrics are not in a checkpoint, and right after a log both are empty."""
        return (step * self.accumulation) % self.cycle == 0 and step % max(1, logging_steps) == 0

    def due(self, step: int, now: float) -> bool:
        return self.due_by_steps(step) or self.due_by_time(now)

    def due_by_steps(self, step: int) -> bool:
        return self.every_steps is not None and step - self.last_step >= self.every_steps

    def due_by_time(self, now: float) -> bool:
        return self.every_minutes is not None \
            and now - self.last_time >= 60 * self.every_minutes \
            and self.saved_seconds + self.last_seconds <= self.max_overhead * (now - self.began)

    def on_train_begin(self, args, state, control, **kwargs):
        self.last_step, self.last_time = state.global_step, time.monotonic()
        self.began = self.last_time

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if not self.enabled or step >= state.max_steps or control.should_training_stop \
                or not self.at_boundary(step, getattr(state, "logging_steps", 1)):
            return
        # Steps are the same on every process; clocks are not, so the first one's decides.
        if self.due_by_steps(step) or (self.every_minutes is not None
                                       and self.agree(self.due_by_time(time.monotonic()))):
            control.should_save = True

    def saved(self, step: int, seconds: float) -> None:
        self.last_step, self.last_time, self.last_seconds = step, time.monotonic(), seconds
        self.saved_seconds += seconds


class RunCheckpoints:
    """The checkpoints of one run, in its folder."""

    def __init__(self, run_dir: Path, ident: dict[str, Any], keep_last: int) -> None:
        self.root = Path(run_dir) / CHECKPOINTS_DIR
        self.ident, self.keep_last = ident, keep_last
        self.saves = 0

    @property
    def incoming(self) -> Path:
        """Where the Trainer writes (its output_dir): `checkpoint-<N>` folders, until whole."""
        return self.root / INCOMING

    def clean_incoming(self) -> None:
        """A save that was killed leaves a partial folder here; never a finished one."""
        shutil.rmtree(self.incoming, ignore_errors=True)

    # -- saving ---------------------------------------------------------------------------
    @staticmethod
    def write_rank_state(folder: Path, rank: int, state: RunState) -> None:
        torch.save(state.payload(), Path(folder) / RANK_STATE.format(rank=rank))

    def commit(self, folder: Path, step: int, seconds: float) -> Path:
        """The manifest (last), then the folder renamed into place, then older ones pruned.
        `seconds`: what writing the folder took (logged with this commit's own time)."""
        start = time.perf_counter()
        folder = Path(folder)
        files = {str(p.relative_to(folder)): p.stat().st_size
                 for p in sorted(folder.rglob("*")) if p.is_file()}
        body = {**self.ident, "step": step, "files": files}
        body["checksum"] = stable_hash(body, 64)
        atomic_write_text(folder / MANIFEST, json.dumps(body, indent=1, sort_keys=True))
        pause_point("checkpoint_write")  # kill tests: written, not yet renamed into place
        target = self.root / f"{PREFIX}{step}"
        shutil.rmtree(target, ignore_errors=True)  # a same-step save a killed run began
        os.replace(folder, target)
        self.prune()
        self.saves += 1
        seconds += time.perf_counter() - start
        mib = sum(files.values()) / 2**20
        log.debug("checkpoint saved: step=%d mib=%.3f seconds=%.4f", step, mib, seconds)
        if self.saves == 1:
            say(f"checkpoint at step {step}: {mib:.1f} MiB in {seconds:.2f} s ({target})")
        return target

    def discard(self, folder: Path, why: str) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        log.warning("checkpoint not written (%s); the run goes on, resumable from the previous "
                    "one", why)

    def prune(self) -> None:
        for path, _ in self.complete()[self.keep_last:]:
            shutil.rmtree(path, ignore_errors=True)

    # -- resuming -------------------------------------------------------------------------
    def checked(self) -> list[tuple[Path, dict | None, str | None]]:
        """Every step-<N> folder, newest first: (path, manifest, None) when it is a whole
        checkpoint of this run, else (path, None, why it is refused)."""
        out = []
        for step, path in sorted(self._folders(), reverse=True):
            manifest = self._manifest(path)
            why = manifest if isinstance(manifest, str) else self._refusal(manifest)
            if why is None and manifest["step"] != step:
                why = f"it holds step {manifest['step']}"
            out.append((path, None, why) if why else (path, manifest, None))
        return out

    def complete(self) -> list[tuple[Path, dict]]:
        """This run's whole checkpoints, newest first."""
        return [(path, manifest) for path, manifest, why in self.checked() if why is None]

    def _folders(self) -> list[tuple[int, Path]]:
        return [(int(p.name.removeprefix(PREFIX)), p) for p in self.root.glob(f"{PREFIX}*")
                if p.name.removeprefix(PREFIX).isdigit()]

    def latest(self) -> tuple[Path | None, str | None]:
        """The newest whole checkpoint of this run, or None; and a note on the newest one
        that was refused (another run, another version, damaged), if it is newer."""
        refused = None
        for path, _, why in self.checked():
            if why is None:
                return path, refused
            refused = refused or f"checkpoint {path.name} refused ({why}): not loaded"
        return None, refused

    def _manifest(self, path: Path) -> dict | str:
        try:
            body = json.loads((path / MANIFEST).read_text())
        except (OSError, ValueError):
            return "no readable manifest"
        checksum = body.pop("checksum", None)
        if checksum != stable_hash(body, 64):
            return "manifest checksum mismatch"
        for name, size in body["files"].items():
            if not (path / name).is_file() or (path / name).stat().st_size != size:
                return f"{name} missing or truncated"
        return body

    def _refusal(self, manifest: dict) -> str | None:
        for key in ("run_id", "processes", "versions"):
            if manifest.get(key) != self.ident[key]:
                return f"{key} {manifest.get(key)} is not this run's {self.ident[key]}"
        return None

    @staticmethod
    def load_state(path: Path, rank: int) -> RunState:
        data = torch.load(path / RANK_STATE.format(rank=rank), map_location="cpu",
                          weights_only=True)
        return RunState.from_payload(data)
