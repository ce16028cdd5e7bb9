"""W&B, per run: one run per arm x seed (group = sweep, job_type = arm, the full resolved
config). It must never block or break training: any failure to start is a warning and the
run goes on without W&B."""

from __future__ import annotations

import logging
import math
from typing import Any

log = logging.getLogger(__name__)


def start_run(config: dict, arm: str, seed: int, run_id: str, sweep_dir: str):
    lg = config["logger"]
    if lg["backend"] != "wandb" or lg["mode"] == "disabled":
        return None
    try:
        import wandb

        # Passed explicitly: W&B reads WANDB_* once per process, and a one-process multirun
        # must not inherit the previous job's run.
        return wandb.init(
            project=lg["project"], entity=lg["entity"], group=config["sweep_name"],
            job_type=arm, name=f"{arm}-seed{seed}", id=f"{run_id}-{seed}"[:32], config=config,
            tags=[arm, config["model"]["name"], config["task"]["name"]],
            mode=lg["mode"], dir=lg["dir"] or sweep_dir, reinit="finish_previous",
            settings=wandb.Settings(silent=True, init_timeout=60, console="off"),
        )
    except Exception as exc:  # noqa: BLE001 - W&B must never stop a run
        log.warning("W&B did not start (%s); the run goes on without it", exc)
        return None


def finish_run(run, metrics: dict[str, Any], status: str) -> None:
    if run is None:
        return
    try:
        run.summary.update({k: v for k, v in metrics.items()
                            if isinstance(v, int | float) and math.isfinite(v)})
        run.summary["status"] = status
        run.finish(exit_code=0 if status != "failed" else 1)
    except Exception as exc:  # noqa: BLE001
        log.warning("W&B did not finish cleanly (%s)", exc)
