"""Math word problems, verified with HF's math-verify: `score(completion, gold)` is the
contract other tools call (1.0 when the completion's final answer equals gold, else 0.0;
never raises; bounded time). 0.5, 1/2, \\frac{1}{2}, 50% and \\boxed{\\frac{1}{2}} all
score the same against gold 1/2.

Presets (`task.answer_format`): gsm8k — gold after '####' in the answer field; boxed
(MATH) — gold in the last \\boxed{} of the solution field; plain — the field is the gold.
Reward: correctness, plus `task.format_weight` x (the completion states its answer in the
preset's format). Primary metric: held-out accuracy (greedy) and sampled accuracy (avg@k).
"""

from __future__ import annotations

import re
import threading

from grpo_ablate.tasks.base import TextTask

MAX_CHARS = 4000  # the tail of a completion that is parsed: bounds time off the main thread
TIMEOUT_S = 5


def _parse(text: str):
    from math_verify import parse

    text = text[-MAX_CHARS:]
    if threading.current_thread() is threading.main_thread():
        return parse(text, parsing_timeout=TIMEOUT_S)
    return parse(text, parsing_timeout=None)  # signal-based timeouts need the main thread


def score(completion: str, gold: str) -> float:
    """1.0 when the completion's final answer is mathematically equal to gold, else 0.0."""
    try:
        from math_verify import verify

        wanted, got = _parse(str(gold)), _parse(str(completion))
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

    @property
    def fields(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.cfg["question_field"], self.cfg["answer_field"])

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
        return str(row[self.cfg["answer_field"]])

    def score(self, completion, row: dict) -> float:
        return score(self.completion_text(completion), self.gold(row))

    def formatted(self, completion: str) -> bool:
        if self.cfg["answer_format"] == "boxed":
            return last_boxed(completion) is not None
        return GSM8K_ANSWER.search(completion) is not None

    def reward(self, completions: list, row: list[dict], **_: object) -> list[float]:
        weight = self.cfg["format_weight"]
        out = []
        for c, r in zip(completions, row, strict=True):
            text = self.completion_text(c)
            out.append(score(text, self.gold(r)) + (weight * self.formatted(text) if weight else 0.0))
        return out
