"""A sweep's progress, read from the records on disk by the launching process, not counted
inside the jobs: the same under every Hydra launcher (in-process, joblib workers, submitit,
Slurm). One whole line per finished run, with an ETA."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from grpo_ablate.config import RunSpec
from grpo_ablate.config.early_stop import paused_there
from grpo_ablate.records import (
    RECORD_NAME,
    CorruptRecord,
    read_record,
    record_exists,
)
from grpo_ablate.runtime import say


@dataclass
class Progress:
    """Runs done of a planned set, from their records on disk; one line per change."""

    specs: list[RunSpec]
    stream: object = None  # None: sys.stderr as it is when a line is shown
    started: float = field(default_factory=time.perf_counter)
    seen: set[str] = field(default_factory=set)
    done_before: int = 0
    first_done: float = 0.0
    final: bool = False  # at the end, failed runs count as done too

    def __post_init__(self) -> None:
        self.seen = {s.run_id for s in self.specs
                     if record_exists(s.run_dir) or paused_at_look(s) is not None}
        self.done_before = len(self.seen)

    def eta(self, done: int) -> str:
        # The rate from the first finished run on: the one-off start (imports, the tiny
        # policy's build) would otherwise inflate every estimate.
        fresh, now = done - self.done_before, time.perf_counter()
        if fresh == 1:
            self.first_done = now
        if fresh < 2:
            return "?"
        left = (len(self.specs) - done) * (now - self.first_done) / (fresh - 1)
        return f"{int(left // 60)}m{int(left % 60):02d}s"

    def poll(self) -> None:
        for spec in self.specs:
            if spec.run_id in self.seen:
                continue
            paused = paused_at_look(spec)
            if paused is not None:  # an early-stop look's job: done when paused there
                self.seen.add(spec.run_id)
                self.show(spec, f"paused at step {paused}")
                continue
            if not (spec.run_dir / RECORD_NAME).is_file():
                continue
            try:
                record = read_record(spec.run_dir / RECORD_NAME)
            except CorruptRecord:  # being written, or damaged: looked at again next poll
                continue
            if record.status == "failed" and not self.final:
                continue  # may be retried by another launcher; counted at the end
            self.seen.add(spec.run_id)
            acc = record.metrics.get("eval/accuracy")
            self.show(spec, record.status + (f" acc={acc:.3f}" if acc is not None else ""))

    def show(self, spec: RunSpec, state: str) -> None:
        done, total, width = len(self.seen), len(self.specs), 24
        filled = int(width * done / max(1, total))
        bar = "#" * filled + "-" * (width - filled)
        say(f"[{bar}] {done}/{total} runs | arm={spec.arm} seed={spec.seed} {state} | "
            f"ETA {self.eta(done)}", self.stream)


def paused_at_look(spec: RunSpec) -> int | None:
    """The step a job that trains to an early-stop look paused its run at, once it has."""
    if (spec.run_dir / RECORD_NAME).is_file():
        return None
    return paused_there(spec.run_dir, spec.config)


@contextmanager
def progress_from_disk(specs: list[RunSpec], every: float = 1.0) -> Iterator[Progress]:
    """Watch the sweep's run folders while the launcher runs; a last look at the end."""
    progress = Progress(specs)
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(every):
            progress.poll()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield progress
    finally:
        stop.set()
        thread.join()
        progress.final = True
        progress.poll()
