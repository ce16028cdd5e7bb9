"""Math problems verified with HF's math-verify: `score(completion, gold)` is the contract
other tools call (1.0 when the completion's final answer equals gold, else 0.0; never raises;
bounded time). 0.5, 1/2, \\frac{1}{2}, 50% and \\boxed{\\frac{1}{2}} all score the same
against gold 1/2, and a gold stored as bare LaTeX (`\\frac{\\sqrt{2}}{2}`, `p - q`,
`(-\\infty, 2]`, `\\text{Evelyn}`) is parsed inside `\\boxed{}`: math-verify reads LaTeX only
inside delimiters, so a bare symbolic gold would parse to nothing and score 0 against the
identical answer.

Where the gold is (`task.answer_format`): gsm8k — after '####' in the answer field
(openai/gsm8k); boxed — the last \\boxed{} of the solution field; plain — the field is the
gold (HuggingFaceH4/MATH-500's `answer`). A chat model's prompt carries `task.instruction`
(by default the Qwen2.5-Math convention: the final answer within \\boxed{}). Reward:
correctness, plus `task.format_weight` x (the completion states its answer in the format
its prompt asked for: \\boxed{} after the instruction, the dataset's own format for plain
prompts). Primary metric: held-out accuracy (greedy) and sampled accuracy (avg@k).
"""

from __future__ import annotations

import re
import threading

from grpo_ablate.tasks.base import TextTask

MAX_CHARS = 4000  # the tail of a completion that is parsed: bounds time off the main thread
TIMEOUT_S = 5
DELIMITERS = ("$", "\\(", "\\[", "\\boxed", "\\begin{")


def _parse(text: str):
    from math_verify import parse  # 0.5 s to import: loaded where an answer is checked

    text = text[-MAX_CHARS:]
    if threading.current_thread() is threading.main_thread():
        return parse(text, parsing_timeout=TIMEOUT_S)
    return parse(text, parsing_timeout=None)  # signal-based timeouts need the main thread


def parse_gold(gold: str):
    """A gold as datasets store it: delimited LaTeX as it is, a bare one inside \\boxed{}
    (where math-verify reads it), falling back to the text itself (plain numbers)."""
    gold = str(gold).strip()
    if any(d in gold for d in DELIMITERS):
        return _parse(gold)
    return _parse(f"\\boxed{{{gold}}}") or _parse(f"${gold}$") or _parse(gold)


def score(completion: str, gold: str) -> float:
    """1.0 when the completion's final answer is mathematically equal to gold, else 0.0."""
    try:
        from math_verify import verify

        wanted, got = parse_gold(str(gold)), _parse(str(completion))
        if not wanted or not got:
            return 0.0
        main = threading.current_thread() is threading.main_thread()
        return 1.0 if verify(wanted, got, timeout_seconds=TIMEOUT_S if main else None) else 0.0
    except Exception:  # noqa: BLE001 - the contract: never raises
        return 0.0


def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...}, braces balanced."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1:j]
    return None


GSM8K_ANSWER = re.compile(r"####\s*(-?[\d,]*\.?\d+)")


class MathTask(TextTask):
    name = "math"

    @staticmethod
    def fields_of(cfg: dict) -> tuple[str, ...]:
        return (cfg["question_field"], cfg["answer_field"])

    @staticmethod
    def problem_in(cfg: dict, row: dict) -> str | None:
        if cfg["answer_format"] == "gsm8k" and "####" not in str(row[cfg["answer_field"]]):
            return f"its {cfg['answer_field']!r} has no '#### <answer>' (task.answer_format=gsm8k)"
        return None

    def question(self, row: dict) -> str:
        return str(row[self.cfg["question_field"]])

    def gold(self, row: dict) -> str:
        answer = str(row[self.cfg["answer_field"]])
        fmt = self.cfg["answer_format"]
        if fmt == "gsm8k":
            return answer.split("####")[-1].strip().replace(",", "")
        if fmt == "boxed":
            return last_boxed(answer) or answer
        return answer

    def demonstration(self, row: dict) -> str:
        solution = self.cfg.get("solution_field") or self.cfg["answer_field"]
        return str(row.get(solution, row[self.cfg["answer_field"]]))

    def score(self, completion, row: dict) -> float:
        return score(self.completion_text(completion), self.gold(row))

    def asked_format(self) -> str:
        """The answer format the prompt asks for: the instruction's when the prompt carries
        it, else the dataset's own (the policy imitates its solutions)."""
        if self.conversational and self.cfg.get("instruction"):
            return self.cfg.get("instruction_format") or "boxed"
        return "boxed" if self.cfg["answer_format"] == "boxed" else "gsm8k"

    def formatted(self, completion: str) -> bool:
        if self.asked_format() == "boxed":
            return last_boxed(completion) is not None
        return GSM8K_ANSWER.search(completion) is not None

    def reward(self, completions: list, row: list[dict], **_: object) -> list[float]:
        weight = self.cfg["format_weight"]
        out = []
        for c, r in zip(completions, row, strict=True):
            text = self.completion_text(c)
            out.append(score(text, self.gold(r)) + (weight * self.formatted(text) if weight else 0.0))
        return out
