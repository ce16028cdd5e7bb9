"""Tasks: RL prompts, a reward and a held-out evaluation, behind one small protocol.

A task is a class with `name` and these methods (the training layer and models/ use nothing
else):
- `train_rows()`: the RL dataset, one dict per prompt: `prompt` (text, or TRL's
  conversational messages) plus the columns its reward reads;
- `reward(completions, **columns) -> list[float]`: the TRL reward function's body (one
  combined reward; a task weighs its parts itself, e.g. math's format_weight);
- `evaluate(model, tokenizer, max_new_tokens, temperature, sampled_k, seed)`: held-out
  `accuracy` (greedy), `reward_mean`, `sampled_accuracy` (avg@k), in an isolated RNG;
- `use_tokenizer(tokenizer)`: plain or conversational prompts for this checkpoint;
- `notes()`: what the run should say about how it was scored (kept in the record);
- `check_config(cfg)` (a class method): what the task's section names (local data files and
  their rows, the sandbox's limits), checked by launch before the first run trains;
- dataset-backed tasks (`TextTask`): static `fields_of(cfg)` and `problem_in(cfg, row)`, the
  fields every row needs and what else can be wrong with one (`check_config` reads a local
  file's rows with them);
- for the embedded tiny policy: `data_key(cfg)` (a static method: its cache key, from the
  task section alone), `policy_data_config()`, `policy_alphabet()`,
  `sft_sample(rng) -> (prompt, completion)` and `max_text_length()`.

Adding a task is one module here (a `TextTask` subclass for dataset-backed tasks), one
entry in TASKS (which is also the list of names `task.name` accepts), the keys of its own
section in config/schema.py's `task` block (the union of every task's keys, each checked
there), and one conf/task/<name>.yaml per published schema (docs/tasks.md).
"""

from __future__ import annotations

from grpo_ablate.runtime import stable_hash
from grpo_ablate.tasks.arithmetic import ArithmeticTask
from grpo_ablate.tasks.chat import ChatTask
from grpo_ablate.tasks.code import CodeTask
from grpo_ablate.tasks.math import MathTask

TASKS = {"arithmetic": ArithmeticTask, "math": MathTask, "code": CodeTask, "chat": ChatTask}

# What a task's rewards are: `binary` 0/1 (right or not), `graded` full credit 1 with partial
# credit below it, `fraction` the share of tests passed (1: all), `score` a reward model's
# score (no range and no right answer). A trick whose method needs a right answer, or 0/1
# rewards, is refused on the kinds it is not defined on (hook_tricks.HookTrick.applies_to).
REWARD_KINDS = ("binary", "graded", "fraction", "score")


def reward_kind(cfg: dict) -> str:
    """The kind of a task section's rewards (REWARD_KINDS)."""
    return TASKS[cfg["name"]].reward_kind(cfg)


def get_task(cfg: dict):
    return TASKS[cfg["name"]](cfg)


def check_task_configs(sections: list[dict]) -> None:
    """Each distinct task section's own checks (its data files, its limits), before the first
    run trains: one line (UserError) for the first problem."""
    distinct = {stable_hash(cfg): cfg for cfg in sections}
    for cfg in distinct.values():
        TASKS[cfg["name"]].check_config(cfg)


def policy_data_key(cfg: dict) -> dict:
    """The embedded policy's data key for a task section, without loading its rows."""
    return TASKS[cfg["name"]].data_key(cfg)


def task_and_tokenizer(cfg: dict):
    """A run's task, the checkpoint it starts from (built or fetched on first use) and its
    tokenizer, which sets the task's prompt format (plain or conversational)."""
    from transformers import AutoTokenizer  # heavy: only where a model is about to load

    from grpo_ablate.models import resolve_model_path

    task = get_task(cfg["task"])
    model_path = resolve_model_path(cfg, task)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    task.use_tokenizer(tokenizer)
    return task, model_path, tokenizer
