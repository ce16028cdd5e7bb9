"""Fault injection for the reliability tests, chosen by the `faults` config group
(conf/faults/none.yaml: all off): a NaN loss, a KL blow-up, a reward function that raises,
planted rewards (a test's premise that no CPU's policy decides), and slowed steps with pause
points for the kill-and-resume tests. They are attached from
outside the trainer (callbacks, and wrappers around the public `compute_loss` and the
reward function), so the trainer subclass holds tricks only."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from transformers import TrainerCallback

from grpo_ablate.pausepoints import pause_point
from grpo_ablate.runtime import process_rank

KL_BLOWUP = 1.0e4


class FaultInjection(TrainerCallback):
    """Put it before the history and the divergence guard among the callbacks: the KL
    blow-up rewrites the logged KL that they read."""

    def __init__(self, faults: dict) -> None:
        self.faults = faults

    def attach(self, trainer) -> None:
        """A NaN loss from optimizer step `nan_loss_at_step` on."""
        at = self.faults.get("nan_loss_at_step")
        if at is None:
            return
        compute_loss = trainer.compute_loss

        @functools.wraps(compute_loss)
        def nan_from_step(*args, **kwargs):
            loss = compute_loss(*args, **kwargs)
            return loss * float("nan") if trainer.state.global_step + 1 >= at else loss

        trainer.compute_loss = nan_from_step

    def wrap_reward(self, reward: Callable) -> Callable:
        """The reward function raises from step `reward_raises_at_step` on (on the process
        `reward_raises_on_rank` only, when it is set); with `planted_rewards`, each call's
        completions get those values in turn, whatever they say."""
        reward = self._planted(reward)
        at, rank = self.faults.get("reward_raises_at_step"), self.faults.get("reward_raises_on_rank")
        if at is None:
            return reward

        @functools.wraps(reward)
        def raising(*args, trainer_state=None, **kwargs):
            if trainer_state is not None and trainer_state.global_step >= at \
                    and rank in (None, process_rank()):
                raise RuntimeError(f"injected fault: reward function raised at step "
                                   f"{trainer_state.global_step}")
            return reward(*args, trainer_state=trainer_state, **kwargs)

        return raising

    def _planted(self, reward: Callable) -> Callable:
        plan = self.faults.get("planted_rewards")
        if not plan:
            return reward

        @functools.wraps(reward)
        def planted(prompts, completions, **kwargs):
            reward(prompts, completions, **kwargs)  # the task's own bookkeeping still runs
            return [float(plan[i % len(plan)]) for i in range(len(completions))]

        return planted

    def on_log(self, args, state, control, logs=None, **kwargs):
        at = self.faults.get("kl_blowup_at_step")
        if at is not None and logs and logs.get("kl") is not None and state.global_step >= at:
            logs["kl"] = KL_BLOWUP


class PacingCallback(TrainerCallback):
    """`faults.sleep_per_step` slows each step (for concurrency tests); the `mid_training`
    pause point sits after step 2, and `after_step` after every step (its n-th time: step n
    of the process's first run), for kill-and-resume tests."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_step_end(self, args, state, control, **kwargs):
        if self.seconds:
            time.sleep(self.seconds)
        if state.global_step == 2:
            pause_point("mid_training")
        pause_point("after_step")
