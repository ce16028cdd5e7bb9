"""Run records: one per run at `<sweep dir>/runs/<run_id>/record.json`, with its per-step
history in `history.jsonl` beside it.

A record is written once, complete: history first, then the record (the commit marker),
each through write-to-temp-then-rename. A content checksum lets readers reject a record
that was truncated or edited by hand. A lock per run keeps two sweeps on the same folder
from training the same run twice.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from grpo_ablate.pausepoints import pause_point

STATUSES = ("completed", "diverged", "failed")
RECORD_NAME, HISTORY_NAME = "record.json", "history.jsonl"
CHECKPOINTS_DIR = "checkpoints"  # mid-run checkpoints (training/checkpoint.py), until the record


@dataclass
class RunRecord:
    run_id: str
    sweep: str
    arm: str
    seed: int
    model: str
    task: str
    status: str
    error: str | None
    config: dict[str, Any]
    metrics: dict[str, float]
    stability: dict[str, float | None]
    diagnostics: list[dict]
    steps: int
    wall_seconds: float
    cost: dict[str, float]     # the budget and the throughput (docs/contracts.md, `cost`)
    activity: dict[str, Any]   # how much the arm's trick acted: {acted, measure, details}
    versions: dict[str, str]
    git_sha: str | None
    origin: str | None = None  # null: trained for this sweep; else the run-cache entry reused
    # Where the numbers were computed: CPU model and flags, device, library versions, threads
    # and their numeric_id (grpo_ablate.runtime.machine). Null in records written before it.
    machine: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)  # what the run says about itself
    # The steps of the mid-run checkpoints this run was resumed from, one per interruption.
    resumed_from: list[int] = field(default_factory=list)
    # The final held-out evaluation per prompt, columnwise: {ids, greedy, sampled, reward}
    # (tasks/evaluation.py, prompt_outcomes); null in records written before it.
    prompts: dict[str, Any] | None = None
    checksum: str = field(default="")

    def content_checksum(self) -> str:
        body = {k: v for k, v in asdict(self).items() if k != "checksum"}
        blob = json.dumps(jsonable(body), sort_keys=True, allow_nan=False)
        return hashlib.sha256(blob.encode()).hexdigest()


KNOWN = {f.name for f in fields(RunRecord)}
# The measured seconds in a record's `cost` (and what is computed from them): they differ
# between two runs of one config, every other field of a record does not.
TIMED_COST = ("eval_seconds", "generation_seconds", "step_seconds",
              "generation_seconds_per_step", "training_seconds_per_step",
              "tokens_per_second_per_device", "peak_gpu_mib")
# Fields with a default were added after records existed: older records lack them.
REQUIRED = {f.name for f in fields(RunRecord) if f.default is MISSING
            and f.default_factory is MISSING} | {"checksum"}


class CorruptRecord(ValueError):
    """A record that fails its schema or checksum: reported by path and excluded."""


def jsonable(obj: Any) -> Any:
    """NaN/inf are not JSON: store them as null so every record is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    return obj


def atomic_write_text(path: Path, text: str, pause: str | None = None) -> None:
    """The one way grpo-ablate writes a file others read: whole or not at all (a temp file
    in the same folder, flushed to disk, renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if pause:
            pause_point(pause)  # kill-and-resume tests stop here: temp written, not renamed
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_cache_file(path: Path, text: str) -> bool:
    """Write a cache entry whole or not at all; False where the cache cannot be written,
    which only means the entry is computed again next time."""
    try:
        atomic_write_text(path, text)
        return True
    except OSError:
        return False


def write_record(run_dir: Path, record: RunRecord, history: list[dict],
                 pause: str | None = "record_write") -> Path:
    record.checksum = record.content_checksum()
    lines = "".join(json.dumps(jsonable(row), allow_nan=False) + "\n" for row in history)
    atomic_write_text(run_dir / HISTORY_NAME, lines)
    atomic_write_text(run_dir / RECORD_NAME, record_json(record) + "\n", pause=pause)
    return run_dir / RECORD_NAME


def record_json(record: RunRecord) -> str:
    """record.json's text: one field per line, except the per-prompt columns, which keep to
    one line each (hundreds of prompts would otherwise be thousands of lines)."""
    data = jsonable(asdict(record))
    if data.get("prompts") is None:
        return json.dumps(data, indent=1, sort_keys=True, allow_nan=False)
    prompts = data.pop("prompts")
    body = json.dumps(data, indent=1, sort_keys=True, allow_nan=False)
    columns = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v, allow_nan=False)}"
                         for k, v in sorted(prompts.items()))
    return body[:-2] + ',\n "prompts": {\n' + columns + "\n }\n}"


def read_record(path: Path) -> RunRecord:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CorruptRecord(f"{path}: not readable JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict) or not REQUIRED <= set(data) or not set(data) <= KNOWN:
        odd = sorted((REQUIRED - set(data)) | (set(data) - KNOWN)) if isinstance(data, dict) \
            else ["all"]
        raise CorruptRecord(f"{path}: not a run record (fields missing or extra: {odd})")
    record = RunRecord(**data)
    if record.status not in STATUSES:
        raise CorruptRecord(f"{path}: status {record.status!r} is not one of {STATUSES}")
    # The checksum of the stored body (the same JSON content_checksum() makes, without
    # copying the record first).
    body = json.dumps({k: v for k, v in data.items() if k != "checksum"}, sort_keys=True,
                      allow_nan=False)
    if record.checksum != hashlib.sha256(body.encode()).hexdigest():
        raise CorruptRecord(f"{path}: checksum mismatch (truncated or edited by hand)")
    return record


def read_history(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / HISTORY_NAME
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def record_exists(run_dir: Path) -> bool:
    """A final record is there: completed or diverged. A corrupt record or a failed run
    (an exception, often transient) does not count: the run is redone."""
    try:
        return read_record(Path(run_dir) / RECORD_NAME).status != "failed"
    except CorruptRecord:
        return False


def scan_records(sweep_dir: Path) -> tuple[list[RunRecord], list[str]]:
    """All valid records under a sweep folder, and one warning per corrupt one. Each record
    knows the folder it came from (`source_dir`, not part of the record itself)."""
    records, problems = [], []
    for path in sorted(Path(sweep_dir).glob(f"runs/*/{RECORD_NAME}")):
        try:
            record = read_record(path)
        except CorruptRecord as exc:
            problems.append(f"corrupt record excluded: {exc}")
            continue
        record.source_dir = str(path.parent.parent.parent)
        records.append(record)
    return records, problems


@contextmanager
def run_lock(sweep_dir: Path, run_id: str):
    """Yields True if this process holds the run's lock, False if another process does."""
    lock_dir = Path(sweep_dir) / ".locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    lock = try_lock(lock_dir / f"{run_id}.lock")
    if lock is None:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def try_lock(path: Path) -> FileLock | None:
    """The lock file at `path`, held by this process; None when another process holds it."""
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return None
    return lock


PAUSE_NAME = "pause.json"  # a run paused for an early-stop look: not a record


def write_pause(run_dir: Path, record: RunRecord, history: list[dict]) -> Path:
    """A run paused at an early-stop look (its checkpoint there stays): who it is, the step,
    and its history so far, which the look reads. Never a record: the run is unfinished, and
    its record is written once, when it has trained to its end."""
    data = {"run_id": record.run_id, "arm": record.arm, "seed": record.seed,
            "model": record.model, "task": record.task, "step": record.steps,
            "cost": record.cost, "activity": record.activity, "config": record.config,
            "history": history}
    atomic_write_text(Path(run_dir) / PAUSE_NAME, json.dumps(jsonable(data), allow_nan=False))
    return Path(run_dir) / PAUSE_NAME


def read_pause(run_dir: Path) -> dict | None:
    """The run's pause file, or None (none, or not readable: the run pauses again)."""
    try:
        data = json.loads((Path(run_dir) / PAUSE_NAME).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("step"), int) else None


def clean_partials(run_dir: Path) -> None:
    """Remove temp files a killed writer left behind (never a finished record)."""
    for tmp in Path(run_dir).glob(".*.tmp"):
        tmp.unlink(missing_ok=True)


def drop_checkpoints(run_dir: Path) -> None:
    """A finished run's mid-run checkpoints: not needed once its record is written."""
    shutil.rmtree(Path(run_dir) / CHECKPOINTS_DIR, ignore_errors=True)
