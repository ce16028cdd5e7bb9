"""Math problems verified with HF's math-verify: `score(completion, gold)` is the contract
other tools call (1.0 when the completion's final answer equals gold, else 0.0; never raises;
bounded time). The forms supported, and the percent rule, are in docs/tasks.md ("Math");
tests/test_tasks_math_corpus.py holds a labelled corpus in the forms GSM8K and MATH-500 store.

math-verify reads LaTeX only inside delimiters, so a gold stored as bare LaTeX
(`\\frac{\\sqrt{2}}{2}`, `\\begin{pmatrix} -1 \\\\ 3 \\end{pmatrix}`, `\\text{Evelyn}`) is
parsed inside `\\boxed{}`. Before parsing, both sides are normalised for what math-verify
would otherwise keep as a string or misread as a delimiter: a money sign (`\\$`), a percent
sign beside a number, `\\degree` and `°`, `\\mbox`, e-notation and the Unicode minus. A
piecewise answer (`cases`), which math-verify parses to a constant, is compared branch by
branch; a multiple-choice letter is also found after "the answer is".

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
# What opens LaTeX for math-verify. `\begin{` is not one: a bare `\begin{pmatrix}` gold is
# read outside math mode (as its last number), so it goes inside \boxed{} like any bare gold.
# An escaped `\$` is a money sign, not a delimiter; it is removed before this check.
DELIMITERS = ("$", "\\(", "\\[", "\\boxed")

_PERCENT_SIGN = (r"\s*(?:\\%|%|\\text\{\s*\\?%\s*\}|\\mbox\{\s*\\?%\s*\}"
                 r"|\\text\{\s*percent(?:age)?\s*\}|\s*\bpercent(?:age)?\b|\s*\bpct\b)")
PERCENT = re.compile(r"(?<=[\d.}])" + _PERCENT_SIGN)  # a sign right after a number (or {..})
PERCENT_NUMBER = re.compile(r"(\d+(?:\.\d+)?)" + _PERCENT_SIGN)
_REWRITES = (
    (re.compile("\u2212"), "-"),                       # the Unicode minus
    (re.compile(r"\\\$\s*"), ""),                      # money: \$18.90 is 18.90
    (re.compile(r"\\mbox\{"), r"\\text{"),             # \mbox{ cm} as \text{ cm}
    (re.compile(r"\\degree\b|°|\\textdegree\b"), r"^\\circ"),
    # e-notation: 1.2e5 and 3E-4 (a digit right before and after the e: not Euler's e)
    (re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[eE]([+-]?\d+)(?![\w.])"), r"\1\\times 10^{\2}"),
)
_ENV = re.compile(r"\\begin\{(\w+\*?)\}")
MATRIX_ENVS = {"pmatrix", "bmatrix", "Bmatrix", "matrix", "smallmatrix"}
_CHOICE = re.compile(r"^\s*(?:\\text(?:bf)?\{\s*)?\(?\s*([A-E])\s*\)?\s*\}?\s*$")
_CHOICE_IN_PROSE = re.compile(r"answer\s*(?:is|:)\s*:?\s*\$?\s*(?:\\text(?:bf)?\{)?\s*\(([A-E])\)")


def normalise(text: str) -> str:
    """The text with the forms math-verify misreads rewritten (money sign, \\mbox, degrees,
    e-notation, the Unicode minus); percent signs are left to `strip_percent`."""
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    return text


def strip_percent(text: str) -> str:
    """The text with every percent sign beside a number removed (`25\\%` -> `25`)."""
    return PERCENT.sub("", text)


def _parse(text: str):
    from math_verify import parse  # 0.5 s to import: loaded where an answer is checked

    text = text[-MAX_CHARS:]
    if threading.current_thread() is threading.main_thread():
        return parse(text, parsing_timeout=TIMEOUT_S)
    return parse(text, parsing_timeout=None)  # signal-based timeouts need the main thread


def _verify(wanted, got) -> bool:
    from math_verify import verify

    main = threading.current_thread() is threading.main_thread()
    return bool(verify(wanted, got, timeout_seconds=TIMEOUT_S if main else None))


def parse_gold(gold: str):
    """A gold as datasets store it, normalised and without its percent sign: delimited
    LaTeX as it is, a bare one inside \\boxed{} (where math-verify reads it), falling back
    to the text itself (plain numbers)."""
    gold = strip_percent(normalise(str(gold).strip()))
    if any(d in gold for d in DELIMITERS):
        return _parse(gold)
    return _parse(f"\\boxed{{{gold}}}") or _parse(f"${gold}$") or _parse(gold)


def _readings(completion: str) -> list:
    """The completion's final answer (its last \\boxed{} when it has one) as math-verify
    reads it; when it carries a percent sign, also its number without the sign and its
    number over 100 (`25\\%` is right against 25 and against 0.25)."""
    text = normalise(completion)
    boxed = last_boxed(text)
    if boxed is not None:  # the final answer is the last box, not the first
        text = f"\\boxed{{{boxed}}}"
    texts = [text]
    if (stripped := strip_percent(text)) != text:
        texts += [stripped, PERCENT_NUMBER.sub(r"\\frac{\1}{100}", text)]
    return [r for r in map(_parse, texts) if r]


def _final_text(completion: str) -> str:
    return last_boxed(completion) or completion


def _cases_rows(text: str) -> list[tuple[str, str]] | None:
    """The branches (expression, condition) of the last `cases` environment in text."""
    bodies = re.findall(r"\\begin\{cases\}(.*?)\\end\{cases\}", text, flags=re.S)
    if not bodies:
        return None
    rows = []
    for row in re.split(r"\\\\", bodies[-1]):
        if row.strip():
            expr, _, cond = row.partition("&")
            cond = re.sub(r"\\text\{([^{}]*)\}", r"\1", cond)  # \text{if } x>0 -> if x>0
            rows.append((expr.strip(), re.sub(r"\b(?:if|for|when)\b", "", cond).strip()))
    return rows


def _same_part(a: str, b: str) -> bool:
    squash = re.sub(r"\s+|\\[,;!]|\\left|\\right", "", a), re.sub(r"\s+|\\[,;!]|\\left|\\right", "", b)
    if squash[0] == squash[1]:
        return True
    if not a.strip() or not b.strip() or "otherwise" in a + b or "else" in a + b:
        return False
    wanted, got = _parse(f"${a}$"), _parse(f"${b}$")
    return bool(wanted and got and _verify(wanted, got))


def _cases_equal(completion: str, gold: str) -> bool:
    """Piecewise answers are equal when they have the same branches, in any order."""
    want, got = _cases_rows(gold), _cases_rows(_final_text(completion))
    if not want or not got or len(want) != len(got):
        return False
    unmatched = list(got)
    for expr, cond in want:
        match = next((g for g in unmatched if _same_part(expr, g[0]) and _same_part(cond, g[1])), None)
        if match is None:
            return False
        unmatched.remove(match)
    return True


def _letter(text: str) -> str | None:
    choice = _CHOICE.match(text)
    return choice.group(1) if choice else None


def score(completion: str, gold: str) -> float:
    """1.0 when the completion's final answer is mathematically equal to gold, else 0.0."""
    try:
        completion, gold = normalise(str(completion)), normalise(str(gold).strip())
        if "\\begin{cases}" in gold:
            return float(_cases_equal(completion, gold))
        if set(_ENV.findall(gold)) - MATRIX_ENVS - {"cases"}:
            # An environment math-verify cannot read (array, aligned): the same text.
            return float(_same_part(_final_text(completion), gold))
        wanted = parse_gold(gold)
        if wanted and any(_verify(wanted, got) for got in _readings(completion)):
            return 1.0
        letter = _letter(gold)
        if letter and last_boxed(completion) is None:  # "The answer is (C)." with no \boxed{}
            found = _CHOICE_IN_PROSE.findall(completion)
            return float(bool(found) and found[-1] == letter)
        return 0.0
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
    def reward_kind(cfg: dict) -> str:
        return "binary" if not cfg.get("format_weight") else "graded"

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
