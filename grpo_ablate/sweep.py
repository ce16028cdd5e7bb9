"""Execute one job of a run or sweep: skip it if its record exists, lock it, train it,
write its record, and show the sweep's progress (runs done of total, arm, seed, ETA)."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field

from grpo_ablate.config import RunSpec
from grpo_ablate.store import clean_partials, record_exists, run_lock, write_record

log = logging.getLogger(__name__)


@dataclass
class Progress:
    """Progress over a planned set of runs. Set by the CLI before Hydra launches; a launcher
    that runs jobs in other processes just prints per-run lines."""

    total: int
    done: int = 0
    trained_seconds: list[float] = field(default_factory=list)
    stream: object = sys.stderr

    def eta(self) -> str:
        if not self.trained_seconds:
            return "?"
        left = (self.total - self.done) * sum(self.trained_seconds) / len(self.trained_seconds)
        return f"{int(left // 60)}m{int(left % 60):02d}s"

    def show(self, spec: RunSpec, state: str) -> None:
        width = 24
        filled = int(width * self.done / max(1, self.total))
        bar = "#" * filled + "-" * (width - filled)
        print(f"[{bar}] {self.done}/{self.total} runs | arm={spec.arm} seed={spec.seed} "
              f"{state} | ETA {self.eta()}", file=self.stream, flush=True)


PROGRESS: Progress | None = None


def execute(spec: RunSpec) -> str:
    """Run one spec to a record. Returns what happened: trained, skipped, or busy."""
    from grpo_ablate.train import train_one

    run_dir = spec.run_dir
    if record_exists(run_dir):
        outcome = "skipped (record exists)"
    else:
        with run_lock(spec.sweep_dir, spec.run_id) as held:
            if not held:
                outcome = "busy (another sweep is training it)"
            elif record_exists(run_dir):  # finished by another sweep while we waited
                outcome = "skipped (record exists)"
            else:
                clean_partials(run_dir)
                if PROGRESS:
                    PROGRESS.show(spec, "training")
                t0 = time.perf_counter()
                record, history = train_one(spec)
                write_record(run_dir, record, history)
                if PROGRESS:
                    PROGRESS.trained_seconds.append(time.perf_counter() - t0)
                acc = record.metrics.get("eval/accuracy")
                outcome = f"{record.status}" + (f" acc={acc:.3f}" if acc is not None else "")
    if PROGRESS:
        PROGRESS.done += 1
        PROGRESS.show(spec, outcome)
    else:
        log.info("arm=%s seed=%s %s", spec.arm, spec.seed, outcome)
    return outcome
