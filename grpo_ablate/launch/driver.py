"""The one sweep driver. `grpo-ablate sweep` and grpo-ablate's Hydra sweeper (a plain
`python -m grpo_ablate.app -m ...`) both call `run_sweep`: the runs without a record are
trained (a fixed sweep in one launch, an adaptive one rung by rung), then the statistics
stage reports on each sweep folder. How runs are launched is the caller's: a Hydra multirun
on the configured launcher."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grpo_ablate.config import RunSpec
from grpo_ablate.launch import sweep
from grpo_ablate.report.settings import ReportSettings
from grpo_ablate.runtime import say


@dataclass(frozen=True)
class LaunchSettings:
    """How a sweep's runs start. `overrides` name every job of the sweep; `launch(overrides)`
    runs the jobs some overrides name (one Hydra multirun); `compose(overrides)` returns the
    RunSpecs they are (an adaptive sweep composes each rung)."""

    overrides: list[str]
    launch: Callable[[list[str]], Any]
    compose: Callable[[list[str]], list[RunSpec]]


def run_sweep(specs: list[RunSpec], launch: LaunchSettings,
              report: ReportSettings | None = None) -> int:
    """Train what the sweep lacks and report; 0, or 1 when an adaptive rung left no record.
    `report` None: the sweep's own (W&B when its runs log there)."""
    sweep_dirs = sorted({str(s.sweep_dir) for s in specs})
    t0 = time.perf_counter()
    if specs[0].config["adaptive"]["enabled"]:
        from grpo_ablate.launch.adaptive import run_ladder, swept_key  # pandas, scipy

        fixed = [o for o in launch.overrides if swept_key(o) not in ("trick", "seed")]
        if run_ladder(specs, fixed, compose=launch.compose, launch=launch.launch):
            return 1
    else:
        def describe(todo: int, reused: int) -> str:
            return (f"sweep: {len(specs)} runs ({len({s.arm for s in specs})} arms x "
                    f"{len({s.seed for s in specs})} seeds), {todo} to train"
                    + (f", {reused} reused from the run cache" if reused else "")
                    + f" -> {', '.join(sweep_dirs)}")

        sweep.launch_unfinished(specs, lambda: launch.launch(launch.overrides), describe)
        say(f"sweep finished in {time.perf_counter() - t0:.0f}s")
    from grpo_ablate.report import report_or_skip  # heavy: pandas, scipy, matplotlib

    report = report or ReportSettings.for_logger(specs[0].config["logger"])
    for sweep_dir in sweep_dirs:
        report_or_skip(sweep_dir, report)
    return 0
