"""Write the small fixture datasets shipped in grpo_ablate/tasks/fixtures/ (written for this
project, deterministic): GSM8K-style math word problems ("... #### 42") and MBPP-style code
problems (prompt, entry point, reference solution, assert tests), and chat prompts with
reference responses. Rerun to regenerate:

    python scripts/make_task_fixtures.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "grpo_ablate" / "tasks" / "fixtures"
NAMES = ["Ann", "Ben", "Cal", "Dee", "Eli", "Fay", "Gus", "Ivy"]
THINGS = ["apples", "pens", "cards", "coins", "books", "shells"]


def math_rows(rng: random.Random, n: int) -> list[dict]:
    rows = []
    for _ in range(n):
        who, what = rng.choice(NAMES), rng.choice(THINGS)
        a, b = rng.randint(2, 30), rng.randint(2, 20)
        if rng.random() < 0.5:
            q = f"{who} has {a} {what} and gets {b} more. How many {what} now?"
            work, ans = f"{a}+{b}={a + b}", a + b
        else:
            a = a + b
            q = f"{who} has {a} {what} and gives away {b}. How many {what} are left?"
            work, ans = f"{a}-{b}={a - b}", a - b
        rows.append({"question": q, "answer": f"{work}\n#### {ans}"})
    return rows


CODE = [  # (entry point, prompt, solution body, cases)
    ("add", "Return the sum of a and b.", "    return a + b", [(1, 2), (0, 0), (-3, 5)]),
    ("sub", "Return a minus b.", "    return a - b", [(5, 2), (0, 3), (7, 7)]),
    ("mul", "Return a times b.", "    return a * b", [(3, 4), (0, 9), (-2, 6)]),
    ("mx", "Return the larger of a and b.", "    return max(a, b)", [(3, 4), (9, 1), (2, 2)]),
    ("mn", "Return the smaller of a and b.", "    return min(a, b)", [(3, 4), (9, 1), (5, 5)]),
    ("avg", "Return the mean of a and b.", "    return (a + b) / 2", [(2, 4), (1, 2), (0, 0)]),
    ("mod", "Return a modulo b.", "    return a % b", [(7, 3), (9, 9), (10, 4)]),
    ("pw", "Return a to the power b.", "    return a ** b", [(2, 3), (5, 0), (3, 2)]),
]


def code_rows() -> list[dict]:
    rows = []
    for name, doc, body, cases in CODE:
        env: dict = {}
        exec(f"def {name}(a, b):\n{body}\n", env)
        tests = "\n".join(f"assert {name}({a}, {b}) == {env[name](a, b)!r}" for a, b in cases)
        rows.append({"prompt": f"def {name}(a, b):\n    \"\"\"{doc}\"\"\"\n", "entry_point": name,
                     "solution": body + "\n", "tests": tests + "\n"})
    return rows


GREETINGS = ["hello", "good morning", "thanks", "well done", "good night"]


def chat_rows(rng: random.Random, n: int) -> list[dict]:
    rows = []
    for _ in range(n):
        who, what = rng.choice(NAMES), rng.choice(GREETINGS)
        rows.append({"prompt": f"Say {what} to {who}.", "response": f"{what.capitalize()}, {who}!"})
    return rows


def write(name: str, rows: list[dict]) -> None:
    (OUT / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    rng = random.Random(20261130)
    write("math_train.jsonl", math_rows(rng, 240))
    write("math_test.jsonl", math_rows(rng, 60))
    write("chat_train.jsonl", chat_rows(rng, 40))
    write("chat_test.jsonl", chat_rows(rng, 10))
    rows = code_rows()
    write("code_train.jsonl", rows[:6])
    write("code_test.jsonl", rows[6:])  # held out: functions the policy never trained on


if __name__ == "__main__":
    main()
