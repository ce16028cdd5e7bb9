"""Code generation (MBPP / HumanEval style): a prompt (signature and docstring), an entry
point, reference tests. The completion is the function's body; program = prompt +
completion, run with the row's tests in the sandbox (grpo_ablate/sandbox.py). Reward: the
fraction of tests passed; held-out pass@1 = all tests passed (greedy)."""

from __future__ import annotations

from grpo_ablate.sandbox import Limits, run_many
from grpo_ablate.tasks.base import TextTask


class CodeTask(TextTask):
    name = "code"
    fields = ("prompt", "entry_point", "tests")

    def __init__(self, cfg: dict) -> None:
        super().__init__(cfg)
        box = cfg["sandbox"]
        self.limits = Limits(cpu_seconds=box["cpu_seconds"], memory_mb=box["memory_mb"],
                             file_mb=box["file_mb"], processes=box["processes"])
        self.timeout_s = float(box["timeout_s"])

    def question(self, row: dict) -> str:
        return str(row["prompt"])

    def prompt(self, row: dict):
        if not self.conversational:
            return self.question(row)  # the body continues the signature
        return super().prompt(row)

    def gold(self, row: dict) -> str:
        return str(row["tests"])

    def demonstration(self, row: dict) -> str:
        return str(row.get("solution", ""))

    def program(self, completion, row: dict) -> str:
        text = self.completion_text(completion)
        if self.conversational:  # a chat model writes the whole function
            return text
        return str(row["prompt"]) + text

    def results(self, completions: list, rows: list[dict]):
        return run_many([(self.program(c, r), str(r["tests"]))
                         for c, r in zip(completions, rows, strict=True)],
                        self.timeout_s, self.limits)

    def scores(self, completions: list, rows: list[dict]) -> list[float]:
        return [res.reward for res in self.results(completions, rows)]

    def score(self, completion, row: dict) -> float:
        return self.scores([completion], [row])[0]

    def reward(self, completions: list, row: list[dict], **_: object) -> list[float]:
        return self.scores(completions, row)
