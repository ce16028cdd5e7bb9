"""Tasks: RL prompts, a reward and a held-out evaluation. Math, code and chat come later;
each exposes the same small surface as `ArithmeticTask`."""

from __future__ import annotations

from grpo_ablate.tasks.arithmetic import ArithmeticTask

TASKS = {"arithmetic": ArithmeticTask}


def get_task(cfg: dict):
    return TASKS[cfg["name"]](cfg)
