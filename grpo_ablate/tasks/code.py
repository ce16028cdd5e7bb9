"""Code generation on data as its publishers ship it, scored by unit tests in the sandbox
(grpo_ablate/sandbox.py). Two presets, one per schema:

- `humaneval` (openai/openai_humaneval: task_id, prompt, canonical_solution, test,
  entry_point). The program is the prompt plus a body that continues it, or the whole
  function from a chat answer. The tests are the row's `test` with `check(entry_point)`
  unrolled: `check`'s body runs with `candidate = <entry_point>`, each statement that holds
  an assert counting as one test, so partial credit exists; pass@1 means all of them.
- `mbpp` (google-research-datasets/mbpp, `full`: task_id, text, code, test_list,
  test_setup_code, challenge_test_list; `sanitized`: source_file, task_id, prompt, code,
  test_imports, test_list). The prompt is the problem and its first test, as MBPP's
  harnesses give it; reward = the fraction of `test_list` passing after the setup code and
  the test imports.

Code from a chat answer: the last block fenced as Python (```python or ```py), else the last
fenced block, else the whole text; the prompt's imports are added when the answer lacks
them, and a trailing `if __name__ == "__main__":` block is not run.

`score(completion, row, preset)` is the public contract: the fraction of the row's tests
passed, in the sandbox; it never raises for any completion or row.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap

from grpo_ablate.errors import UserError
from grpo_ablate.sandbox import Limits, run, run_many
from grpo_ablate.tasks.base import TextTask

PRESETS = ("humaneval", "mbpp")
# A fenced block; the last one may be cut off by the completion length (no closing fence).
FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
PYTHON_TAGS = ("python", "py", "python3")
MAIN = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.M)


# ---------------------------------------------------------------------------- answers
def fenced_code(text: str) -> str | None:
    """The last block fenced as Python, else the last fenced block; None without fences."""
    blocks = FENCE.findall(text)
    if not blocks:
        return None
    python = [code for tag, code in blocks if tag.lower() in PYTHON_TAGS]
    return python[-1] if python else blocks[-1][1]


def strip_main(code: str) -> str:
    """The code without a top-level `if __name__ == "__main__":` block (or what follows it):
    the harness runs the program as __main__, and that block is the answer's own demo."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        m = MAIN.search(code)
        return code[:m.start()] if m else code
    lines = code.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, ast.If) and MAIN.match(ast.get_source_segment(code, node) or ""):
            return "".join(lines[:node.lineno - 1])
    return code


def drop_top_level_asserts(code: str) -> str:
    """MBPP answers often end with their own asserts; the row's tests are the ones scored."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    lines = code.splitlines(keepends=True)
    cut = [(n.lineno, n.end_lineno) for n in tree.body if isinstance(n, ast.Assert)]
    keep = [ln for i, ln in enumerate(lines, 1) if not any(a <= i <= b for a, b in cut)]
    return "".join(keep)


def top_level_imports(source: str) -> list[str]:
    """The import statements at the top level of a prompt (`from typing import List`)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [ln for ln in source.splitlines() if re.match(r"(import|from)\s+\w", ln)]
    return [ast.get_source_segment(source, n) or "" for n in tree.body
            if isinstance(n, ast.Import | ast.ImportFrom)]


def with_imports(code: str, prompt: str) -> str:
    missing = [imp for imp in top_level_imports(prompt) if imp not in code]
    return "\n".join(missing) + ("\n" if missing else "") + code


def body_only(text: str) -> str:
    """A completion that continues a function's prompt, up to the function's end: the first
    non-blank line at column 0 (what HumanEval's stop sequences `\\ndef`, `\\nclass`, `\\nif`,
    `\\nprint`, `\\n#` cut)."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() and not line[0].isspace():
            return "".join(lines[:i])
    return text


def defines(code: str, name: str) -> bool:
    return re.search(rf"^def\s+{re.escape(name)}\s*\(", code, re.M) is not None


def humaneval_program(completion: str, row: dict) -> str:
    """The program for a HumanEval row: the prompt plus a body, or a whole function."""
    prompt, entry = str(row["prompt"]), str(row["entry_point"])
    code = fenced_code(completion)
    if code is None:
        if defines(completion, entry):  # an unfenced whole function
            return with_imports(strip_main(completion), prompt)
        return prompt + body_only(completion)
    if defines(code, entry):
        return with_imports(strip_main(code), prompt)
    return prompt + code  # a fenced body


def mbpp_program(completion: str, row: dict) -> str:
    code = fenced_code(completion)
    return drop_top_level_asserts(strip_main(completion if code is None else code))


# ---------------------------------------------------------------------------- tests
def humaneval_tests(row: dict) -> str:
    """The row's `test` with `check(entry_point)` unrolled: the module's own statements,
    `candidate = <entry_point>`, then check's body at the top level (one test per statement
    that holds an assert). ValueError when there is no `def check(...)`."""
    test, entry = str(row["test"]), str(row["entry_point"])
    tree = ast.parse(test)
    lines = test.splitlines()
    out: list[str] = []
    found = False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check" and node.args.args:
            found = True
            param = node.args.args[0].arg
            body = "\n".join(lines[node.body[0].lineno - 1:node.end_lineno])
            out += [f"{param} = {entry}", textwrap.dedent(body)]
        else:
            out.append(ast.get_source_segment(test, node) or "")
    if not found:
        raise ValueError("the row's test defines no `def check(candidate)`")
    return "\n".join(out) + "\n"


def mbpp_problem(row: dict) -> str:
    return str(row.get("text") or row.get("prompt") or "")


def mbpp_tests(row: dict) -> str:
    imports = row.get("test_imports") or []
    setup = row.get("test_setup_code") or ""
    return "\n".join([*imports, setup, *row["test_list"]]) + "\n"


def program_and_tests(completion: str, row: dict, preset: str) -> tuple[str, str]:
    if preset == "humaneval":
        return humaneval_program(completion, row), humaneval_tests(row)
    if preset == "mbpp":
        return mbpp_program(completion, row), mbpp_tests(row)
    raise ValueError(f"preset={preset!r}: allowed: {', '.join(PRESETS)}")


def row_problem(row: dict, preset: str) -> str | None:
    """What is wrong with a row for this preset (validation, one line), or None."""
    if preset == "humaneval":
        for field in ("prompt", "test", "entry_point"):
            if not isinstance(row.get(field), str) or not row[field].strip():
                return f"no {field!r} text"
        try:
            humaneval_tests(row)
        except SyntaxError as exc:
            return f"its test is not Python ({exc.msg}, line {exc.lineno})"
        except ValueError as exc:
            return str(exc)
        return None
    if not mbpp_problem(row):
        return "no problem text ('text' or 'prompt')"
    tests = row.get("test_list")
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        return "an empty or malformed test_list (a list of assert strings is needed)"
    return None


def score(completion: str, row: dict, preset: str, timeout_s: float = 10.0) -> float:
    """The fraction of the row's tests the completion passes, in the sandbox. Never raises
    for any completion or row (ValueError for an unknown preset)."""
    if preset not in PRESETS:
        raise ValueError(f"preset={preset!r}: allowed: {', '.join(PRESETS)}")
    try:
        program, tests = program_and_tests(str(completion), row, preset)
        return run(program, tests, timeout_s).reward
    except Exception:  # noqa: BLE001 - the contract: a bad row or answer scores 0
        return 0.0


# ---------------------------------------------------------------------------- the task
class CodeTask(TextTask):
    name = "code"

    @staticmethod
    def reward_kind(cfg: dict) -> str:
        return "fraction"  # the share of the tests passed; 1 = all

    def __init__(self, cfg: dict) -> None:
        self.preset = cfg["preset"]
        super().__init__(cfg)
        box = cfg["sandbox"]
        self.limits = Limits(cpu_seconds=box["cpu_seconds"], memory_mb=box["memory_mb"],
                             file_mb=box["file_mb"], processes=box["processes"])
        self.timeout_s = float(box["timeout_s"])

    @classmethod
    def check_config(cls, cfg: dict) -> None:
        """The preset is a published schema, the files' rows hold it, the limits are usable."""
        if cfg.get("preset") not in PRESETS:
            raise UserError(f"task.preset={json.dumps(cfg.get('preset'))}: a code task scores "
                            f"rows of a published schema; allowed: {', '.join(PRESETS)}")
        super().check_config(cfg)
        box = cfg["sandbox"]
        try:  # the sandbox names its own parameters: here they are the config's keys
            Limits(cpu_seconds=box["cpu_seconds"], memory_mb=box["memory_mb"],
                   file_mb=box["file_mb"], processes=box["processes"]).check()
        except ValueError as exc:
            raise UserError(f"task.sandbox.{exc}") from None

    @staticmethod
    def fields_of(cfg: dict) -> tuple[str, ...]:
        return ("prompt", "test", "entry_point") if cfg["preset"] == "humaneval" else ("test_list",)

    @staticmethod
    def problem_in(cfg: dict, row: dict) -> str | None:
        return row_problem(row, cfg["preset"])

    def question(self, row: dict) -> str:
        if self.preset == "humaneval":
            return str(row["prompt"])
        return f'"""\n{mbpp_problem(row)}\n{row["test_list"][0]}\n"""\n'

    def prompt(self, row: dict):
        if not self.conversational:
            return self.question(row)  # a base model (or the tiny policy) continues it
        instruction = self.cfg.get("instruction") or ""
        if self.preset == "humaneval":
            text = f"{instruction}\n\n```python\n{str(row['prompt']).rstrip()}\n```"
        else:
            text = (f"{mbpp_problem(row)}\nYour code should pass this test:\n\n"
                    f"{row['test_list'][0]}\n\n{instruction}")
        return self.messages(text.strip())

    def gold(self, row: dict) -> str:
        return str(row.get("test") or row.get("test_list"))

    def demonstration(self, row: dict) -> str:
        return str(row.get("canonical_solution") or row.get("code") or "")

    def results(self, completions: list, rows: list[dict]):
        return run_many([program_and_tests(self.completion_text(c), r, self.preset)
                         for c, r in zip(completions, rows, strict=True)],
                        self.timeout_s, self.limits)

    def scores(self, completions: list, rows: list[dict]) -> list[float]:
        return [res.reward for res in self.results(completions, rows)]

    def score(self, completion, row: dict) -> float:
        return self.scores([completion], [row])[0]

    def reward(self, completions: list, row: list[dict], **_: object) -> list[float]:
        return self.scores(completions, row)

