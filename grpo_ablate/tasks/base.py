"""What a dataset-backed task shares: rows from `datasets`, prompts (plain for the embedded
policy, conversational with the checkpoint's own chat template otherwise), a batched held-out
evaluation, and what the embedded tiny policy needs to be SFT-trained on the task.

A task (see grpo_ablate/tasks/__init__.py for the protocol) subclasses `TextTask` and says
how to read a row (`question`, `gold`), how to score a completion (`score`: 1.0 counts as
correct), how to reward one (`reward`), and what a row must hold (`fields_of`, `problem_in`), which
`check_config` reads a local file's rows with before the first run.
"""

from __future__ import annotations

import random
from typing import Any

from grpo_ablate.errors import UserError
from grpo_ablate.tasks.data import check_local, load_task_rows, resolve_source
from grpo_ablate.tasks.evaluation import evaluating, generate, prompt_id, prompt_outcomes


class Task:
    """What every task shares: its config section, no notes by default, and the embedded
    policy's data key from that section (`data_key`, a static method each task defines)."""

    name = "task"
    last_outcomes: dict | None = None  # the last evaluation, per held-out prompt
    held_out_pool: int | None = None  # how many prompts the task's data could hold out

    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg

    def notes(self) -> list[str]:
        """What the run should say about how it was scored (kept in the record)."""
        return []

    @classmethod
    def check_config(cls, cfg: dict) -> None:
        """What the task's section names, checked before the first run trains: its data
        files and their rows, its limits. One line (UserError) for the first problem."""

    def policy_data_config(self) -> dict:
        return self.data_key(self.cfg)

    @staticmethod
    def reward_kind(cfg: dict) -> str:
        """What its rewards are (tasks.REWARD_KINDS): which tricks' methods are defined on
        them (a method that needs a right answer needs a full-credit reward)."""
        raise NotImplementedError

    @staticmethod
    def data_key(cfg: dict) -> dict:
        raise NotImplementedError


class TextTask(Task):
    name = "text"

    def __init__(self, cfg: dict) -> None:
        super().__init__(cfg)
        self.train, self.held_out, self.held_out_pool = load_task_rows(
            cfg["dataset"], list(self.fields_of(cfg)), lambda row: self.problem_in(cfg, row))
        self.conversational = False

    # ------------------------------------------------------------------ what a row holds
    # Static: check_config reads a local file's rows with them before anything trains.
    @classmethod
    def check_config(cls, cfg: dict) -> None:
        """Local dataset files: they exist, have rows, and every row has the fields and
        passes the preset's own row check. Hub datasets are checked when the run loads them."""
        for split in ("train", "eval"):
            check_local(str(cfg["dataset"][split]), f"task.dataset.{split}",
                        list(cls.fields_of(cfg)), lambda row: cls.problem_in(cfg, row),
                        cfg.get("preset"))

    @staticmethod
    def fields_of(cfg: dict) -> tuple[str, ...]:
        """The fields every row must have."""
        raise NotImplementedError

    @staticmethod
    def problem_in(cfg: dict, row: dict) -> str | None:
        """What is wrong with a row beyond missing fields (None: nothing)."""
        return None

    # ------------------------------------------------------------------ per task
    def question(self, row: dict) -> str:
        raise NotImplementedError

    def gold(self, row: dict) -> Any:
        raise NotImplementedError

    def score(self, completion: str, row: dict) -> float:
        raise NotImplementedError

    def reward(self, completions: list, **columns: list) -> list[float]:
        raise NotImplementedError

    def demonstration(self, row: dict) -> str:
        """The completion the embedded policy is SFT-trained to give for a row."""
        raise NotImplementedError

    # ------------------------------------------------------------------ prompts
    def use_tokenizer(self, tokenizer) -> None:
        """Decide plain or conversational prompts for this checkpoint (task.chat: auto uses
        the chat template when the checkpoint has one)."""
        chat = self.cfg.get("chat", "auto")
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if chat is True and not has_template:
            raise UserError("task.chat=true: the checkpoint has no chat template; allowed: "
                            "task.chat=false or auto, or a checkpoint with a chat template")
        self.conversational = has_template if chat == "auto" else bool(chat)

    def prompt(self, row: dict):
        """TRL's prompt: a list of messages (conversational: the question and the task's
        instruction) or plain text (the question alone, as the dataset's own answers follow
        it)."""
        text = self.question(row)
        if not self.conversational:
            return f"{text}\n"
        instruction = self.cfg.get("instruction")
        return self.messages(f"{text}\n\n{instruction}" if instruction else text)

    def messages(self, text: str) -> list[dict]:
        system = self.cfg.get("system_prompt")
        return ([{"role": "system", "content": system}] if system else []) + \
            [{"role": "user", "content": text}]

    def prompt_text(self, row: dict, tokenizer) -> str:
        p = self.prompt(row)
        if isinstance(p, str):
            return p
        return tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False)

    def train_rows(self) -> list[dict]:
        return [{"prompt": self.prompt(r), **self.reward_columns(r)} for r in self.train]

    def reward_columns(self, row: dict) -> dict:
        return {"row": row}

    def completion_text(self, completion) -> str:
        """TRL hands conversational completions as message lists."""
        if isinstance(completion, list):
            return completion[-1]["content"] if completion else ""
        return completion

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, model, tokenizer, max_new_tokens: int, temperature: float,
                 sampled_k: int, seed: int) -> dict[str, float]:
        """Held-out accuracy (greedy), mean reward, and sampled accuracy (avg@k at
        `temperature`), batched; in an isolated RNG so it never changes the training run."""
        rows = self.held_out
        texts = [self.prompt_text(r, tokenizer) for r in rows]
        with evaluating(model, seed):
            greedy = generate(model, tokenizer, texts, max_new_tokens, None)
            sampled = generate(model, tokenizer, texts * sampled_k, max_new_tokens,
                               temperature) if sampled_k else []
        scores = self.scores(greedy, rows)
        rewards = self.reward(greedy, **_columns([self.reward_columns(r) for r in rows]))
        out = {"accuracy": sum(s == 1.0 for s in scores) / len(rows),
               "reward_mean": sum(rewards) / len(rewards)}
        hits = None
        if sampled_k:  # 0: greedy only (the intermediate evaluations)
            hits = [s == 1.0 for s in self.scores(sampled, rows * sampled_k)]
            out["sampled_accuracy"] = sum(hits) / len(hits)
        self.last_outcomes = prompt_outcomes([prompt_id(self.question(r)) for r in rows],
                                             [s == 1.0 for s in scores], hits, rewards,
                                             self.held_out_pool)
        return out

    def scores(self, completions: list[str], rows: list[dict]) -> list[float]:
        return [self.score(c, r) for c, r in zip(completions, rows, strict=True)]

    # ------------------------------------------------------------------ embedded policy
    @staticmethod
    def data_key(cfg: dict) -> dict:
        """What the embedded policy's SFT data depends on (part of its cache key): the rows
        and how they are read, not how completions are rewarded."""
        keys = ("name", "preset", "dataset", "question_field", "answer_field", "answer_format",
                "solution_field", "prompt_field", "reference_field")
        out = {k: cfg[k] for k in keys if k in cfg}
        out["dataset"] = {**cfg["dataset"], "train": resolve_source(str(cfg["dataset"]["train"])),
                          "eval": resolve_source(str(cfg["dataset"]["eval"]))}
        return out

    def policy_alphabet(self) -> list[str]:
        text = "".join(self.prompt(r) + self.demonstration(r)
                       for r in self.train + self.held_out)
        return sorted(set(text))

    def sft_sample(self, rng: random.Random) -> tuple[str, str]:
        row = rng.choice(self.train)
        return self.prompt(row), self.demonstration(row)

    def max_text_length(self) -> int:
        return max(len(self.prompt(r) + self.demonstration(r))
                   for r in self.train + self.held_out) + 8


def _columns(rows: list[dict]) -> dict[str, list]:
    return {k: [r[k] for r in rows] for k in rows[0]} if rows else {}
