"""The one driver. `grpo-ablate run` calls `run_one`. Every multirun of grpo-ablate's app
(`grpo-ablate sweep`, or a plain `python -m grpo_ablate.app -m ...`) reaches `run_sweep`
through grpo-ablate's Hydra sweeper (launch/sweeper.py): the runs without a record are
trained (a fixed sweep in one launch, an adaptive one rung by rung), then the statistics
stage reports on each sweep folder. How jobs are launched is the sweeper's: its Hydra
launcher."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grpo_ablate.config import RunSpec, check_trainable
from grpo_ablate.launch import sweep
from grpo_ablate.records import RECORD_NAME, CorruptRecord, read_record
from grpo_ablate.runtime import say
from grpo_ablate.tasks import check_task_configs

if TYPE_CHECKING:  # the report stage loads pandas, scipy and matplotlib: only where it runs
    from grpo_ablate.report.settings import ReportSettings


@dataclass(frozen=True)
class LaunchSettings:
    """How a sweep's runs start. `overrides` name every job of the sweep; `launch(jobs)`
    runs these jobs (each a list of overrides) on the Hydra launcher; `compose(overrides)`
    returns the validated RunSpecs some overrides name (an adaptive sweep composes each rung)."""

    overrides: list[str]
    launch: Callable[[list[list[str]]], Any]
    compose: Callable[[list[str]], list[RunSpec]]


def run_one(spec: RunSpec, launch: Callable[[], Any]) -> int:
    """`grpo-ablate run`: TRL's checks and the starting checkpoint unless recorded, then
    `launch()` (a Hydra run of its one job) and the record's summary; 1 when it failed."""
    check_task_configs([spec.config["task"]])
    check_trainable(sweep.unfinished([spec]))
    sweep.prepare_checkpoints(sweep.unfinished([spec]))
    launch()
    try:
        record = read_record(spec.run_dir / RECORD_NAME)
    except CorruptRecord:  # another sweep holds the run's lock and is training it
        say(f"grpo-ablate: no record at {spec.run_dir}: another sweep is training this run")
        return 1
    print(f"record: {spec.run_dir / RECORD_NAME}")
    print(f"status={record.status} " + " ".join(
        f"{k}={v:.4f}" for k, v in sorted(record.metrics.items()) if v is not None))
    if record.status == "failed":
        say(f"grpo-ablate: the run failed: {record.error}")
        return 1
    return 0


def run_sweep(specs: list[RunSpec], launch: LaunchSettings,
              report: ReportSettings | None = None) -> int:
    """Train what the sweep lacks and report; 0, or 1 when an adaptive rung left no record.
    `report` None: the sweep's own (W&B when its runs log there)."""
    sweep_dirs = sorted({str(s.sweep_dir) for s in specs})
    t0 = time.perf_counter()
    check_task_configs([s.config["task"] for s in specs])
    if specs[0].config["early_stop"]["enabled"]:
        from grpo_ablate.launch.adaptive import swept_key
        from grpo_ablate.launch.early_stop import PAUSE_KEY, run_stop_looks  # pandas, scipy

        fixed = [o for o in launch.overrides
                 if swept_key(o) not in ("trick", "seed", PAUSE_KEY)]
        if run_stop_looks(specs, fixed, compose=launch.compose, launch=launch.launch):
            return 1
    elif specs[0].config["adaptive"]["enabled"]:
        from grpo_ablate.config.screening import DESIGN_FILE
        from grpo_ablate.launch.adaptive import run_ladder, swept_key  # pandas, scipy
        from grpo_ablate.launch.screening_ladder import run_screening_ladder

        fixed = [o for o in launch.overrides if swept_key(o) not in ("trick", "seed")]
        # A screening's design is in its folder: its replicates are its looks' unit.
        ladder = run_screening_ladder if len(sweep_dirs) == 1 and \
            (specs[0].sweep_dir / DESIGN_FILE).is_file() else run_ladder
        if ladder(specs, fixed, compose=launch.compose, launch=launch.launch):
            return 1
    else:
        def describe(todo: int, reused: int) -> str:
            return (f"sweep: {len(specs)} runs ({len({s.arm for s in specs})} arms x "
                    f"{len({s.seed for s in specs})} seeds), {todo} to train"
                    + (f", {reused} reused from the run cache" if reused else "")
                    + f" -> {', '.join(sweep_dirs)}")

        sweep.launch_unfinished(specs, launch.launch, describe)
        say(f"sweep finished in {time.perf_counter() - t0:.0f}s")
    from grpo_ablate.report import report_or_skip  # heavy: pandas, scipy, matplotlib
    from grpo_ablate.report.settings import ReportSettings

    report = report or ReportSettings.for_logger(specs[0].config["logger"])
    for sweep_dir in sweep_dirs:
        report_or_skip(sweep_dir, report)
    return 0
