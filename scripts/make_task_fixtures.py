"""Write the small fixture datasets (written for this project, deterministic), each in a
published dataset's exact schema:

- shipped in grpo_ablate/tasks/fixtures/ (the default math, code and chat tasks run on them):
  GSM8K (question, answer ending "#### 42"), HumanEval (task_id, prompt,
  canonical_solution, test with `def check(candidate)`, entry_point), and chat prompts with
  reference responses;
- for the tests, in tests/fixtures/published/: MBPP `full` and `sanitized`, MATH-500 (golds of
  every kind: roots, polynomials, tuples, intervals, text) and UltraFeedback-binarized rows.

Rerun to regenerate:

    python scripts/make_task_fixtures.py
    python scripts/make_task_fixtures.py --quick   writes them into a temporary folder and
                                                   checks the committed files are what it writes
"""

from __future__ import annotations

import argparse
import filecmp
import json
import random
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "grpo_ablate" / "tasks" / "fixtures"
PUBLISHED = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "published"
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
    """HumanEval's schema: the prompt is the signature and docstring, the test a
    `check(candidate)` of asserts (HumanEval's METADATA line included)."""
    rows = []
    for i, (name, doc, body, cases) in enumerate(CODE):
        env: dict = {}
        exec(f"def {name}(a, b):\n{body}\n", env)
        asserts = "".join(f"    assert candidate({a}, {b}) == {env[name](a, b)!r}\n"
                          for a, b in cases)
        rows.append({"task_id": f"Fixture/{i}",
                     "prompt": f"def {name}(a, b):\n    \"\"\"{doc}\"\"\"\n",
                     "canonical_solution": body + "\n",
                     "test": f"\n\nMETADATA = {{}}\n\n\ndef check(candidate):\n{asserts}\n",
                     "entry_point": name})
    return rows


def mbpp_rows() -> tuple[list[dict], list[dict]]:
    """MBPP's `full` and `sanitized` schemas (the full config's code uses \\r\\n, as
    published); one row with test_setup_code, one with test_imports."""
    full, sanitized = [], []
    for i, (name, doc, body, cases) in enumerate(CODE):
        env: dict = {}
        exec(f"def {name}(a, b):\n{body}\n", env)
        tests = [f"assert {name}({a}, {b}) == {env[name](a, b)!r}" for a, b in cases]
        text = f"Write a function to {doc[0].lower()}{doc[1:].rstrip('.')}."
        code = f"def {name}(a, b):\n{body}"
        full.append({"task_id": 601 + i, "text": text, "code": code.replace("\n", "\r\n"),
                     "test_list": tests, "test_setup_code": "", "challenge_test_list": []})
        sanitized.append({"source_file": "Benchmark Questions Verification V2.ipynb",
                          "task_id": 601 + i, "prompt": text, "code": code,
                          "test_imports": [], "test_list": tests})
    full[0]["test_setup_code"] = "offset = 0"
    full[0]["test_list"] = [t.replace(") ==", ") + offset ==") for t in full[0]["test_list"]]
    sanitized[1]["test_imports"] = ["import math"]
    sanitized[1]["test_list"] = [t + " and math.isfinite(0)" for t in sanitized[1]["test_list"]]
    return full, sanitized


MATH500 = [  # (problem, solution's work, answer, subject): golds of every kind
    ("Rationalize the denominator of $\\frac{1}{\\sqrt{2}}$.", "Multiply by $\\sqrt{2}$ above "
     "and below.", "\\frac{\\sqrt{2}}{2}", "Algebra"),
    ("Simplify $\\sqrt{12}$.", "$\\sqrt{12} = \\sqrt{4 \\cdot 3}$.", "2\\sqrt{3}", "Algebra"),
    ("Expand $(x+1)^2$.", "Use $(a+b)^2 = a^2 + 2ab + b^2$.", "x^2+2x+1", "Algebra"),
    ("Where do $y = x + 1$ and $y = -x + 5$ meet?", "Then $x + 1 = -x + 5$, so $x = 2$.",
     "(2, 3)", "Algebra"),
    ("Solve $3x - 1 \\le 5$; give the answer in interval notation.", "$3x \\le 6$.",
     "(-\\infty, 2]", "Algebra"),
    ("Evelyn is 12 and Ben is 9. Who is older?", "12 > 9.", "\\text{Evelyn}", "Prealgebra"),
    ("What is $6 \\cdot 7$?", "Six sevens.", "42", "Prealgebra"),
    ("What is $\\frac{1}{2} + \\frac{1}{4}$?", "Common denominator 4.", "\\frac{3}{4}",
     "Prealgebra"),
    ("If $a = p + 1$ and $b = q + 1$, what is $a - b$?", "The ones cancel.", "p - q", "Algebra"),
    ("Find all real $x$ with $x^2 = 9$.", "Both signs square to 9.", "-3, 3", "Algebra"),
    ("What is $2^{10}$?", "Ten doublings.", "1024", "Prealgebra"),
    ("What is $\\sqrt{2} \\cdot \\sqrt{8}$?", "$\\sqrt{16}$.", "4", "Algebra"),
]


def math500_rows() -> list[dict]:
    return [{"problem": p, "solution": f"{work} The answer is $\\boxed{{{ans}}}$.", "answer": ans,
             "subject": subject, "level": 1 + i % 5, "unique_id": f"test/fixture/{i}.json"}
            for i, (p, work, ans, subject) in enumerate(MATH500)]


def ultrafeedback_rows(rng: random.Random, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        who, what = rng.choice(NAMES), rng.choice(GREETINGS)
        prompt = f"Say {what} to {who}."
        chosen = [{"content": prompt, "role": "user"},
                  {"content": f"{what.capitalize()}, {who}!", "role": "assistant"}]
        rejected = [{"content": prompt, "role": "user"}, {"content": "No.", "role": "assistant"}]
        rows.append({"prompt": prompt, "prompt_id": f"{i:064x}", "chosen": chosen,
                     "rejected": rejected, "messages": chosen, "score_chosen": 8.0,
                     "score_rejected": 2.0})
    return rows


GREETINGS = ["hello", "good morning", "thanks", "well done", "good night"]


def chat_rows(rng: random.Random, n: int) -> list[dict]:
    rows = []
    for _ in range(n):
        who, what = rng.choice(NAMES), rng.choice(GREETINGS)
        rows.append({"prompt": f"Say {what} to {who}.", "response": f"{what.capitalize()}, {who}!"})
    return rows


def write_to(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_all(out: Path, published: Path) -> list[Path]:
    """Every fixture file, written under `out` (the task fixtures) and `published`."""
    out.mkdir(parents=True, exist_ok=True)
    published.mkdir(parents=True, exist_ok=True)
    rng = random.Random(20261130)
    files = {out / "math_train.jsonl": math_rows(rng, 240), out / "math_test.jsonl": math_rows(rng, 60),
             out / "chat_train.jsonl": chat_rows(rng, 40), out / "chat_test.jsonl": chat_rows(rng, 10)}
    rows = code_rows()
    files[out / "code_train.jsonl"] = rows[:6]
    files[out / "code_test.jsonl"] = rows[6:]  # held out: functions the policy never trained on
    full, sanitized = mbpp_rows()
    files[published / "mbpp_full.jsonl"] = full
    files[published / "mbpp_sanitized.jsonl"] = sanitized
    files[published / "math500.jsonl"] = math500_rows()
    files[published / "ultrafeedback.jsonl"] = ultrafeedback_rows(random.Random(7), 12)
    for path, content in files.items():
        write_to(path, content)
    return list(files)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true",
                    help="write into a temporary folder; check the committed files match")
    if not ap.parse_args().quick:
        write_all(OUT, PUBLISHED)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        written = write_all(Path(tmp) / "tasks", Path(tmp) / "published")
        committed = [(OUT if p.parent.name == "tasks" else PUBLISHED) / p.name for p in written]
        differ = [str(c) for w, c in zip(written, committed, strict=True)
                  if not c.is_file() or not filecmp.cmp(w, c, shallow=False)]
    print(f"fixtures_identical={len(written) - len(differ)}/{len(written)}")
    for path in differ:
        print(f"make_task_fixtures: {path} differs from what this script writes")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
