"""Trainer callbacks: per-step history, held-out evals (raw and EMA), the divergence guard,
and the review's monitoring rules (fault injection: faults.py). None of them consumes the
training RNG, so turning one on never changes the training run."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from transformers import TrainerCallback

from grpo_ablate.training.run_state import RunState

# Per-step keys kept in history.jsonl (TRL's names), when the trainer logs them.
HISTORY_KEYS = (
    "loss", "reward", "reward_std", "reward_unshaped", "kl", "entropy", "grad_norm",
    "learning_rate", "completions/mean_length", "completions/clipped_ratio",
    "clip_ratio/region_mean", "clip_ratio/low_mean", "clip_ratio/high_mean",
    "frac_reward_zero_std", "filter/frac_dropped", "num_tokens",
    # what the variants' activity is measured from (LUSPO's lengths, adaptive entropy, vLLM IS)
    "completions/min_length", "completions/max_length", "entropy_coef",
    "sampling/importance_sampling_ratio/min", "sampling/importance_sampling_ratio/max",
)


class HistoryCallback(TrainerCallback):
    """Collects one row per logged optimizer step into the run state's history."""

    def __init__(self, state: RunState | None = None) -> None:
        self.state = state if state is not None else RunState()

    @property
    def rows(self) -> list[dict]:
        return self.state.history

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "train_runtime" not in logs:
            row = {"step": state.global_step}
            row.update({k: float(logs[k]) for k in HISTORY_KEYS if k in logs})
            self.state.history.append(row)


class StepClock(TrainerCallback):
    """Seconds inside optimizer steps (sampling, scoring, forward, backward, the optimizer),
    into the run state: the first callback, so no other callback's work at a step's end
    (evaluations, checkpoints, pacing) is counted."""

    def __init__(self, state: RunState) -> None:
        self.state, self._began = state, None

    def on_step_begin(self, args, state, control, **kwargs):
        self._began = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self._began is not None:
            self.state.step_seconds += time.perf_counter() - self._began
            self._began = None


class DivergenceGuard(TrainerCallback):
    """Stops the run at the first non-finite loss or runaway KL; the run is then recorded
    as `diverged` with its history up to that step."""

    def __init__(self, kl_abort: float, state: RunState) -> None:
        self.kl_abort, self.state = kl_abort, state

    @property
    def reason(self) -> str | None:
        return self.state.guard_reason

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or self.reason:
            return
        loss, kl = logs.get("loss"), logs.get("kl")
        reason = None
        if loss is not None and not math.isfinite(loss):
            reason = f"non-finite loss ({loss}) at step {state.global_step}"
        elif kl is not None and (not math.isfinite(kl) or kl > self.kl_abort):
            reason = f"KL {kl:.3g} > guard.kl_abort={self.kl_abort} at step {state.global_step}"
        if reason:
            self.state.guard_reason = reason
            control.should_training_stop = True
            # The checkpoint schedule asked for this step's save before this log was read: a
            # checkpoint of a stopped run would resume into training on.
            control.should_save = False


class EvalCallback(TrainerCallback):
    """Held-out evals of the arm's policy at the start, every `every_steps`, and at the end.
    With a policy average (EMA; the hook point `policy_average`), the policy is the averaged
    weights (updated after every optimizer step), and the raw weights are evaluated beside
    them under `raw/eval/`. A resumed run has its start evaluation and averaged weights in its
    run state already.

    `evaluate(model, step, final)` returns a metrics dict; `on_eval(step, prefix, metrics)`
    sees each one as it is made (W&B curves)."""

    def __init__(self, evaluate: Callable, state: RunState, every_steps: int,
                 average: Callable | None, on_eval: Callable | None = None,
                 pause_at: int | None = None) -> None:
        """`average(model, saved)`: the policy average to evaluate, or None. `pause_at`: the
        step an early-stop look pauses the run at (its evaluation there is not the final)."""
        self.evaluate, self.state, self.every = evaluate, state, every_steps
        self.pause_at = pause_at
        self.make_average, self.average, self.on_eval = average, None, on_eval

    def _add(self, step: int, prefix: str, metrics: dict) -> None:
        self.state.add_eval(step, prefix, metrics, raw=prefix.startswith("raw/"))
        if self.on_eval is not None:
            self.on_eval(step, prefix, metrics)

    def _run(self, model, step: int, final: bool = False) -> None:
        start = time.perf_counter()
        try:
            self._evaluate_all(model, step, final)
        finally:
            self.state.eval_seconds += time.perf_counter() - start

    def _evaluate_all(self, model, step: int, final: bool) -> None:
        if self.average is not None:
            with self.average.swapped_in(model):
                self._add(step, "eval/", self.evaluate(model, step, final))
            self._add(step, "raw/eval/", self.evaluate(model, step, final))
        else:
            self._add(step, "eval/", self.evaluate(model, step, final))

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.make_average is not None:
            self.average = self.make_average(model, self.state.ema_shadow)
            self.state.ema_shadow = self.average.shadow
        if not self.state.evals:  # a resumed run evaluated its start before the interruption
            self._run(model, 0)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.average is not None:
            self.average.update(model)
        last = state.global_step >= state.max_steps
        if self.every and state.global_step % self.every == 0 and not last \
                and not self.state.guard_reason:
            self._run(model, state.global_step)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if state.global_step == self.pause_at and not self.state.guard_reason:
            return  # paused for a look: the final evaluation comes when the run goes on
        self._run(model, state.global_step, final=True)
