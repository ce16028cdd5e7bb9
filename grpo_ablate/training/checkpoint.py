"""Mid-run checkpoints: when a run saves, what a checkpoint holds beyond the Trainer's own,
how it is committed whole, and which one a re-run resumes from.

A checkpoint is `<run dir>/checkpoints/step-<N>/`: the Trainer's folder (weights, optimizer,
scheduler, every process's RNG states, trainer state) plus each process's `RunState`
(`grpo_ablate_rank<r>.pt`) and a manifest written last: what made it (the run, the code and
its commit, every library that changes the numbers, the model's and the data's contents,
the machine) and every file's size and SHA-256. The Trainer writes into
`checkpoints/.incoming/`; every file and folder is fsynced and the finished folder renamed
into place, so a checkpoint is whole or absent, and the previous one is removed only after.

A checkpoint that turns out damaged when a run resumes (a file missing, truncated or changed,
a run state that does not load) is set aside in `<run dir>/checkpoints-set-aside/`, never
deleted, and the run resumes from the previous whole one, or from step 0.

Saves happen only at generation boundaries (where TRL's buffered completions are used up):
TRL regenerates its buffer after a resume, so a save inside a `steps_per_generation x
num_iterations` cycle could not resume bit for bit (docs/failures.md). They happen only at
logged steps too (`trainer.logging_steps`): what is averaged into the next log row is not
in a checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from grpo_ablate import __version__
from grpo_ablate.pausepoints import pause_point
from grpo_ablate.records import CHECKPOINTS_DIR, atomic_write_text
from grpo_ablate.runtime import cache_root, git_sha, numeric_id, package_version, say, stable_hash
from grpo_ablate.training.run_state import RunState

log = logging.getLogger(__name__)
MANIFEST = "grpo_ablate_checkpoint.json"
RANK_STATE = "grpo_ablate_rank{rank}.pt"
INCOMING = ".incoming"
PRUNING = ".pruning-"  # a checkpoint being removed: renamed first, so never mistaken for one
PREFIX = "step-"
SET_ASIDE = "checkpoints-set-aside"
DAMAGE = "damaged: "  # a refusal that sets the checkpoint aside (not another run's or version's)
# The libraries whose versions change a run's numbers or its state files' formats.
LIBRARIES = ("trl", "transformers", "torch", "accelerate", "peft", "deepspeed", "vllm")
# What a checkpoint must match to be resumed; the machine may differ (the record says so).
MUST_MATCH = ("run_id", "processes", "code", "versions", "inputs")


def identity(run_id: str, processes: int, use_cpu: bool = True) -> dict[str, Any]:
    """What made a checkpoint: the run (its id is the hash of its whole computation), its
    number of processes (one RNG file each), the code (version and commit) and the libraries
    whose state formats and numerics it holds, and the machine's numeric identity. The
    contents of the model and data it read are added once they are loaded (`inputs`)."""
    return {"run_id": run_id, "processes": processes,
            "code": {"grpo_ablate": __version__, "commit": git_sha()},
            "versions": {name: package_version(name) for name in LIBRARIES},
            "machine": numeric_id(use_cpu)}


def run_checkpoints(spec) -> RunCheckpoints:
    """The checkpoints of one run (a RunSpec), as its config keeps them."""
    cfg = spec.config
    return RunCheckpoints(spec.run_dir, identity(spec.run_id, cfg["launch"]["processes"],
                                                 cfg["trainer"]["use_cpu"]),
                          cfg["checkpoint"]["keep_last"])


def file_sha256(path: Path, sync: bool = False) -> str:
    """A file's SHA-256; with `sync`, its bytes are also forced to disk."""
    with open(path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
        if sync:
            os.fsync(fh.fileno())
    return digest


def fsync_dir(path: Path) -> None:
    """A folder's entries (a new file's name, a rename) forced to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def model_contents(path: str) -> str:
    """The SHA-256 of a local checkpoint folder's files (cached by path, size and mtime, so a
    sweep hashes its model once); a hub id as given (its revision is in the config)."""
    local = Path(path)
    if not local.is_dir():
        return path
    files = sorted(p for p in local.rglob("*") if p.is_file())
    stats = [(str(p.relative_to(local)), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    cached = cache_root() / "contents" / f"{stable_hash([str(local.resolve()), stats], 32)}.sha256"
    if cached.is_file():
        return cached.read_text().strip()
    digest = stable_hash([(name, file_sha256(p)) for (name, _, _), p in zip(stats, files,
                                                                            strict=True)], 64)
    try:
        atomic_write_text(cached, digest)
    except OSError:
        pass  # an unwritable cache only means hashing again next time
    return digest


def resume_lines(spec, path: Path | None, passed_over: list[str]) -> list[str]:
    """What a run says before it trains: each checkpoint passed over (refused or set aside),
    then where it resumes from."""
    lines = list(passed_over)
    if path is not None:
        lines.append(f"resuming arm={spec.arm} seed={spec.seed} ({spec.run_id}) from its "
                     f"checkpoint at step {path.name.removeprefix(PREFIX)}")
    elif lines:
        lines[-1] += "; trained from step 0"
    return lines


def announce_resume(spec) -> None:
    """For a launcher whose run trains in other processes (their output goes to a log): a
    damaged checkpoint is set aside here, before any of them reads one."""
    path, _, passed_over = run_checkpoints(spec).resumable(0)
    for line in resume_lines(spec, path, passed_over):
        say(line)


class CheckpointSchedule(TrainerCallback):
    """Asks the Trainer to save (`control.should_save`) at a generation boundary when
    `every_steps` steps or `every_minutes` minutes have passed since the last save. A
    time-based save also waits until the saves so far, plus this one at the last one's cost,
    come to at most `max_overhead` of the time since training began: past the first save,
    saving costs at most that share of a run whatever the model's size. Never at the last
    step (the record follows), nor after the divergence guard stopped the run.

    `agree(flag)` makes every process take the first one's decision (times differ)."""

    def __init__(self, settings: dict, trainer: dict, agree=None,
                 pause_at: int | None = None) -> None:
        self.every_steps, self.every_minutes = settings["every_steps"], settings["every_minutes"]
        self.pause_at = pause_at  # an early-stop look: save here, then stop (the run pauses)
        self.max_overhead = settings["max_overhead"]
        self.accumulation = trainer["gradient_accumulation_steps"]
        self.cycle = trainer["steps_per_generation"] * trainer["num_iterations"]  # micro-steps
        self.agree = agree or (lambda flag: flag)
        self.last_step, self.last_time, self.last_seconds = 0, time.monotonic(), 0.0
        self.began, self.saved_seconds = self.last_time, 0.0

    @property
    def enabled(self) -> bool:
        return self.every_steps is not None or self.every_minutes is not None \
            or self.pause_at is not None

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
        if step == self.pause_at and not control.should_training_stop:
            control.should_save = control.should_training_stop = True  # a boundary by design
            return
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
        """A save that was killed leaves a partial folder here, a prune that was killed a
        renamed one; never a finished checkpoint."""
        shutil.rmtree(self.incoming, ignore_errors=True)
        for path in self.root.glob(f"{PRUNING}*"):
            shutil.rmtree(path, ignore_errors=True)

    # -- saving ---------------------------------------------------------------------------
    @staticmethod
    def write_rank_state(folder: Path, rank: int, state: RunState) -> None:
        torch.save(state.payload(), Path(folder) / RANK_STATE.format(rank=rank))

    def commit(self, folder: Path, step: int, seconds: float) -> Path:
        """Every file's bytes and the folder's entries forced to disk, the manifest (last),
        the folder renamed into place and that rename forced to disk, then older ones pruned.
        `seconds`: what writing the folder took (logged with this commit's own time)."""
        start = time.perf_counter()
        folder = Path(folder)
        paths = [p for p in sorted(folder.rglob("*")) if p.is_file()]
        files = {str(p.relative_to(folder)): {"bytes": p.stat().st_size,
                                              "sha256": file_sha256(p, sync=True)}
                 for p in paths}
        body = {**self.ident, "step": step, "files": files}
        body["checksum"] = stable_hash(body, 64)
        atomic_write_text(folder / MANIFEST, json.dumps(body, indent=1, sort_keys=True))
        for sub in [folder, *(p for p in folder.rglob("*") if p.is_dir())]:
            fsync_dir(sub)
        pause_point("checkpoint_write")  # kill tests: written, not yet renamed into place
        target = self.root / f"{PREFIX}{step}"
        if target.exists():  # a same-step save a killed run began
            self._remove(target)
        os.replace(folder, target)
        fsync_dir(self.root)
        self.prune()
        self.saves += 1
        seconds += time.perf_counter() - start
        mib = sum(f["bytes"] for f in files.values()) / 2**20
        log.debug("checkpoint saved: step=%d mib=%.3f seconds=%.4f", step, mib, seconds)
        if self.saves == 1:
            say(f"checkpoint at step {step}: {mib:.1f} MiB in {seconds:.2f} s ({target})")
        return target

    def commit_or_discard(self, folder: Path, step: int, seconds: float,
                          error: str | None) -> Path | None:
        """The save's last part, on the first process: a failure anywhere in it (a full
        disk at the manifest, the rename) is a warning, and the run goes on."""
        if error is None:
            try:
                return self.commit(folder, step, seconds)
            except Exception as exc:  # noqa: BLE001 - a checkpoint never stops a run
                error = f"{type(exc).__name__}: {exc}"
        self.discard(folder, error)
        return None

    def discard(self, folder: Path, why: str) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        log.warning("checkpoint not written (%s); the run goes on, resumable from the previous "
                    "one", why)

    def prune(self) -> None:
        for path, _ in self.complete()[self.keep_last:]:
            self._remove(path)

    def _remove(self, path: Path) -> None:
        """Renamed out of the step-<N> names first: a removal cut short leaves no folder that
        looks like a damaged checkpoint (clean_incoming finishes it)."""
        doomed = self.root / f"{PRUNING}{path.name}"
        shutil.rmtree(doomed, ignore_errors=True)
        os.replace(path, doomed)
        shutil.rmtree(doomed, ignore_errors=True)

    def set_aside(self, path: Path, why: str) -> str:
        """A damaged checkpoint moved out of the way, never deleted; one warning line."""
        aside = self.root.parent / SET_ASIDE
        aside.mkdir(exist_ok=True)
        target, n = aside / path.name, 1
        while target.exists():
            target, n = aside / f"{path.name}.{n}", n + 1
        os.replace(path, target)
        line = f"checkpoint {path.name} set aside ({why}) in {target}"
        log.warning(line)
        return line

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

    def resumable(self, rank: int) -> tuple[Path | None, RunState | None, list[str]]:
        """The newest checkpoint of this run whose files hold the bytes its manifest names
        and whose run states load, with this process's state; and a line for each one passed
        over. A damaged one is set aside; another run's, code's or input's is left in place."""
        lines = []
        for path, manifest, why in self.checked():
            if why is None:
                why = self._changed(path, manifest)
            if why is None:
                try:  # every process's state, so that all of them resume from one step
                    states = [self.load_state(path, r) for r in range(manifest["processes"])]
                except Exception as exc:  # noqa: BLE001 - any unreadable state is damage
                    why = f"{DAMAGE}a run state does not load: {type(exc).__name__}: {exc}"
                else:
                    if states[rank].guard_reason is None:
                        return path, states[rank], lines
                    why = f"{DAMAGE}saved after the divergence guard stopped the run"
            if why.startswith(DAMAGE):
                lines.append(self.set_aside(path, why))
            else:
                lines.append(f"checkpoint {path.name} refused ({why}): not loaded")
        return None, None, lines

    @staticmethod
    def _changed(path: Path, manifest: dict) -> str | None:
        for name, entry in manifest["files"].items():
            if file_sha256(path / name) != entry["sha256"]:
                return f"{DAMAGE}{name} changed since it was saved"
        return None

    def _manifest(self, path: Path) -> dict | str:
        try:
            body = json.loads((path / MANIFEST).read_text())
        except (OSError, ValueError):
            return f"{DAMAGE}no readable manifest"
        checksum = body.pop("checksum", None)
        if checksum != stable_hash(body, 64):
            return f"{DAMAGE}manifest checksum mismatch"
        for name, entry in body["files"].items():
            if not isinstance(entry, dict):
                return "made by an earlier grpo-ablate (no content checksums)"
            if not (path / name).is_file() or (path / name).stat().st_size != entry["bytes"]:
                return f"{DAMAGE}{name} missing or truncated"
        return body

    def _refusal(self, manifest: dict) -> str | None:
        for key in MUST_MATCH:
            if key in self.ident and manifest.get(key) != self.ident[key]:
                return f"{key} {manifest.get(key)} is not this run's {self.ident[key]}"
        return None

    def machine_note(self, path: Path) -> str | None:
        """A checkpoint made on another machine is resumed; the record says so."""
        made_on = json.loads((path / MANIFEST).read_text()).get("machine")
        if made_on != self.ident["machine"]:
            return (f"resumed from {path.name}, made on another machine (numeric id {made_on}; "
                    f"this one {self.ident['machine']}): bitwise equality with an uninterrupted "
                    "run holds only on one machine")
        return None

    @staticmethod
    def load_state(path: Path, rank: int) -> RunState:
        data = torch.load(path / RANK_STATE.format(rank=rank), map_location="cpu",
                          weights_only=True)
        return RunState.from_payload(data)
