"""The embedded task: two-operand addition with a graded reward.

The SFT demonstrations carry a realistic systematic bug: on problems that need a carry,
most demonstrations "forget the carry" (7+8=5). The SFT policy's greedy answer is then often
wrong while the right answer stays in its support, which is the situation where GRPO can
help (GRPO sharpens what the policy can already do; it cannot invent).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from grpo_ablate.errors import UserError
from grpo_ablate.tasks.base import Task
from grpo_ablate.tasks.evaluation import evaluating, generate, prompt_id, prompt_outcomes

MALFORMED_REWARD = -1.0  # no parseable number: the pathological outlier reward clipping targets


@dataclass(frozen=True)
class Problem:
    a: int
    b: int

    @property
    def prompt(self) -> str:
        return f"{self.a}+{self.b}="

    @property
    def answer(self) -> int:
        return self.a + self.b

    @property
    def needs_carry(self) -> bool:
        return (self.a % 10) + (self.b % 10) >= 10


def all_problems(max_operand: int) -> list[Problem]:
    return [Problem(a, b) for a in range(max_operand + 1) for b in range(max_operand + 1)]


def split_problems(
    max_operand: int, eval_fraction: float, split_seed: int
) -> tuple[list[Problem], list[Problem]]:
    """Disjoint RL-train / held-out prompt sets. The split seed is fixed per task, not per
    run, so every arm and every seed is evaluated on the same held-out prompts."""
    problems = all_problems(max_operand)
    random.Random(split_seed).shuffle(problems)
    n_eval = int(round(len(problems) * eval_fraction))
    return problems[n_eval:], problems[:n_eval]


def load_problems(path: str | Path) -> list[Problem]:
    """Read prompts from a JSONL file of {"a": int, "b": int} rows (fixture or user data)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"task.data_file={path}: no such file")
    problems = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            problems.append(Problem(int(row["a"]), int(row["b"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"task.data_file={path}: line {lineno} is not a JSON object with integer 'a' and 'b'"
            ) from exc
    if not problems:
        raise ValueError(f"task.data_file={path}: no problems in file")
    return problems


def sft_answer(problem: Problem, rng: random.Random, carry_bug_rate: float) -> int:
    """One SFT demonstration's answer: correct, or with the forgotten-carry bug."""
    if problem.needs_carry and rng.random() < carry_bug_rate:
        return problem.answer - 10
    return problem.answer


def parse_answer(completion: str) -> int | None:
    text = completion.strip()
    if not text or not text.isdigit() or len(text) > 4:
        return None
    return int(text)


def graded_reward(completion: str, answer: int) -> float:
    """1 for the exact answer, partial credit in [0, 0.5) for near misses, -1 if malformed."""
    pred = parse_answer(completion)
    if pred is None:
        return MALFORMED_REWARD
    if pred == answer:
        return 1.0
    return 0.5 * max(0.0, 1.0 - abs(pred - answer) / 10.0)


class ArithmeticTask(Task):
    """The task surface train.py uses: RL prompts, a TRL reward function, an evaluation."""

    name = "arithmetic"

    @staticmethod
    def reward_kind(cfg: dict) -> str:
        return "graded"  # 1 right, partial credit for near misses, -1 malformed

    def __init__(self, cfg: dict) -> None:
        super().__init__(cfg)
        train, held_out = split_problems(cfg["max_operand"], cfg["eval_fraction"], cfg["split_seed"])
        # More held-out problems would come out of the generated training split, unless a
        # data file trains: then every generated problem could be held out.
        self.held_out_pool = len(held_out)
        if cfg.get("data_file"):
            train = load_problems(cfg["data_file"])
            self.held_out_pool = len(all_problems(cfg["max_operand"]))
        self.train_problems, self.eval_problems = train, held_out

    @classmethod
    def check_config(cls, cfg: dict) -> None:
        """task.data_file, when set: a readable JSONL file of problems."""
        if cfg.get("data_file") is None:
            return
        try:
            load_problems(cfg["data_file"])
        except (OSError, ValueError) as exc:
            raise UserError(f"{exc}; allowed: a JSONL file of {{\"a\": int, \"b\": int}} rows") \
                from None

    @staticmethod
    def data_key(cfg: dict) -> dict:
        """What the embedded policy's SFT data depends on (part of its cache key)."""
        return {"max_operand": cfg["max_operand"], "carry_bug_rate": cfg["carry_bug_rate"]}

    def use_tokenizer(self, tokenizer) -> None:
        """Plain prompts always ("a+b="): the embedded policy has no chat template."""

    def policy_alphabet(self) -> list[str]:
        return list("0123456789+=")

    def sft_sample(self, rng: random.Random) -> tuple[str, str]:
        """One SFT demonstration: a prompt and its (possibly carry-bugged) answer."""
        p = rng.choice(self._sft_problems)
        return p.prompt, str(sft_answer(p, rng, self.cfg["carry_bug_rate"]))

    @property
    def _sft_problems(self) -> list[Problem]:
        # Built once: rebuilt per demonstration it was two thirds of the policy's SFT time.
        if not hasattr(self, "_all"):
            self._all = all_problems(self.cfg["max_operand"])
        return self._all

    def max_text_length(self) -> int:
        return 32

    def train_rows(self) -> list[dict]:
        return [{"prompt": p.prompt, "answer": p.answer} for p in self.train_problems]

    def reward(self, completions: list[str], answer: list[int], **_: object) -> list[float]:
        return [graded_reward(c, a) for c, a in zip(completions, answer, strict=True)]

    def evaluate(self, model, tokenizer, max_new_tokens: int, temperature: float,
                 sampled_k: int, seed: int) -> dict[str, float]:
        """Held-out greedy accuracy and reward, and sampled accuracy (avg@k at `temperature`;
        none when sampled_k is 0). Runs in an isolated RNG so it never changes the training run."""
        problems = self.eval_problems
        with evaluating(model, seed):
            texts = [p.prompt for p in problems]
            greedy = generate(model, tokenizer, texts, max_new_tokens, None, batch=len(texts))
            try:
                sampled = generate(model, tokenizer, texts * sampled_k, max_new_tokens,
                                   temperature, batch=len(texts) * sampled_k) \
                    if sampled_k else []
            except RuntimeError:  # non-finite weights cannot be sampled from
                sampled = None
        rewards = [graded_reward(c, p.answer) for c, p in zip(greedy, problems, strict=True)]
        out = {
            "accuracy": sum(r == 1.0 for r in rewards) / len(rewards),
            "reward_mean": sum(rewards) / len(rewards),
        }
        hits = None
        if not sampled_k:
            pass  # greedy only (the intermediate evaluations)
        elif sampled is None:
            out["sampled_accuracy"] = float("nan")
        else:
            hits = [graded_reward(c, p.answer) == 1.0
                    for c, p in zip(sampled, problems * sampled_k, strict=True)]
            out["sampled_accuracy"] = sum(hits) / len(hits)
        self.last_outcomes = prompt_outcomes([prompt_id(p.prompt) for p in problems],
                                             [r == 1.0 for r in rewards], hits, rewards,
                                             self.held_out_pool)
        return out
