"""W&B, per run: one run per arm x seed (group = sweep, job_type = arm, grpo-ablate's
resolved config as the run config, so W&B's filters and parallel coordinates work on trick
keys). Training metrics (the history keys, not TRL's profiling timers) and every held-out
evaluation are logged as curves against the optimizer step.

It must never block or break training: any failure to start or log is a warning and the run
goes on without W&B. transformers' own W&B callback is not used: it would replace the run
config with TRL's flattened arguments and the model config, and log profiling timers."""

from __future__ import annotations

import logging
import math
from typing import Any

from transformers import TrainerCallback

from grpo_ablate.config import model_label
from grpo_ablate.runtime import wandb_run_id

log = logging.getLogger(__name__)
STEP = "train/global_step"


def start_run(config: dict, arm: str, seed: int, run_id: str, sweep_dir: str,
              wandb_id: str | None = None):
    """The run's W&B run, or None. `wandb_id`: the id a resumed run's checkpoint holds (its
    curves continue there even when the sweep folder has moved since)."""
    lg = config["logger"]
    if lg["backend"] != "wandb" or lg["mode"] == "disabled":
        return None
    try:
        import wandb

        # Passed explicitly: W&B reads WANDB_* once per process, and a one-process multirun
        # must not inherit the previous job's run.
        run = wandb.init(
            project=lg["project"], entity=lg["entity"], group=config["sweep_name"],
            job_type=arm, name=f"{arm}-seed{seed}", id=wandb_id or wandb_run_id(run_id, sweep_dir),
            config={**config, "run_id": run_id},
            tags=[arm, model_label(config), config["task"]["name"]],
            mode=lg["mode"], dir=lg["dir"] or sweep_dir, reinit="finish_previous",
            resume="allow",  # a run resumed from its checkpoint continues its curves
            settings=wandb.Settings(silent=True, init_timeout=60, console="off"),
        )
        run.define_metric(STEP)
        run.define_metric("*", step_metric=STEP)
        return run
    except Exception as exc:  # noqa: BLE001 - W&B must never stop a run
        log.warning("W&B did not start (%s); the run goes on without it", exc)
        return None


def _log(run, step: int, values: dict[str, Any]) -> None:
    if run is None:
        return
    try:
        run.log({**{k: v for k, v in values.items() if isinstance(v, int | float)
                    and math.isfinite(v)}, STEP: step})
    except Exception as exc:  # noqa: BLE001
        log.warning("W&B did not log (%s)", exc)


def log_eval(run, step: int, prefix: str, metrics: dict[str, float]) -> None:
    """One held-out evaluation (eval/*, raw/eval/*) at its optimizer step."""
    _log(run, step, {f"{prefix}{k}": v for k, v in metrics.items()})


class WandbHistoryCallback(TrainerCallback):
    """Per-step training metrics to W&B under train/, the keys kept in history.jsonl."""

    def __init__(self, run, keys: tuple[str, ...]) -> None:
        self.run, self.keys = run, keys

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "train_runtime" not in logs:
            _log(self.run, state.global_step, {f"train/{k}": logs[k] for k in self.keys if k in logs})


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
