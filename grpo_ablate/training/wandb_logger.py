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
from grpo_ablate.training.run_state import RunState

log = logging.getLogger(__name__)
STEP = "train/global_step"
EVAL_PREFIXES = ("eval/", "raw/eval/")  # history rows of held-out evaluations


def start_run(config: dict, arm: str, seed: int, run_id: str, sweep_dir: str,
              state: RunState):
    """The run's W&B run, or None. A resumed run continues the W&B run its checkpoint names
    (its curves continue there even when the sweep folder has moved since) as one history:
    online, rewound to the W&B step of the checkpoint (W&B's `resume_from`), so the steps
    the interrupted attempt logged after it are dropped, not doubled; offline (W&B cannot
    append to an offline run), into a new offline folder under the same id, into which the
    checkpoint's history is logged again first: the newest folder holds the whole history."""
    lg = config["logger"]
    if lg["backend"] != "wandb" or lg["mode"] == "disabled":
        return None
    try:
        import wandb

        wandb_id = state.wandb_run_id or wandb_run_id(run_id, sweep_dir)
        rewind = lg["mode"] == "online" and state.wandb_run_id and state.wandb_step is not None
        # Passed explicitly: W&B reads WANDB_* once per process, and a one-process multirun
        # must not inherit the previous job's run.
        run = wandb.init(
            project=lg["project"], entity=lg["entity"], group=config["sweep_name"],
            job_type=arm, name=f"{arm}-seed{seed}", id=wandb_id,
            config={**config, "run_id": run_id},
            tags=[arm, model_label(config), config["task"]["name"]],
            mode=lg["mode"], dir=lg["dir"] or sweep_dir, reinit="finish_previous",
            **({"resume_from": f"{wandb_id}?_step={state.wandb_step}"} if rewind
               else {"resume": "allow"}),
            settings=wandb.Settings(silent=True, init_timeout=60, console="off"),
        )
        run.define_metric(STEP)
        run.define_metric("*", step_metric=STEP)
        if state.wandb_run_id and not rewind:
            for row in state.history:  # the checkpoint's history, row by row as first logged
                _log(run, state, row["step"], history_row_values(row))
        return run
    except Exception as exc:  # noqa: BLE001 - W&B must never stop a run
        log.warning("W&B did not start (%s); the run goes on without it", exc)
        return None


def history_row_values(row: dict) -> dict[str, Any]:
    """A history.jsonl row as it was logged to W&B: training keys under train/."""
    return {k if k.startswith(EVAL_PREFIXES) else f"train/{k}": v
            for k, v in row.items() if k != "step"}


def _log(run, state: RunState, step: int, values: dict[str, Any]) -> None:
    if run is None:
        return
    try:
        run.log({**{k: v for k, v in values.items() if isinstance(v, int | float)
                    and math.isfinite(v)}, STEP: step})
        state.wandb_step = run.step  # a checkpoint saved now resumes the W&B run from here
    except Exception as exc:  # noqa: BLE001
        log.warning("W&B did not log (%s)", exc)


def log_eval(run, state: RunState, step: int, prefix: str, metrics: dict[str, float]) -> None:
    """One held-out evaluation (eval/*, raw/eval/*) at its optimizer step."""
    _log(run, state, step, {f"{prefix}{k}": v for k, v in metrics.items()})


class WandbHistoryCallback(TrainerCallback):
    """Per-step training metrics to W&B under train/, the keys kept in history.jsonl."""

    def __init__(self, run, keys: tuple[str, ...], state: RunState) -> None:
        self.run, self.keys, self.state = run, keys, state

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "train_runtime" not in logs:
            _log(self.run, self.state, state.global_step,
                 {f"train/{k}": logs[k] for k in self.keys if k in logs})


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
