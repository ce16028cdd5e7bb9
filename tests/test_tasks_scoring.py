"""The math and code tasks: the math scoring contract (math-verify), gold extraction and the
format reward, the code task's sandboxed reward, data errors as one line (exit 2), and each
task's whole path on the embedded tiny policy (slow)."""

import json
import math
import threading
import time

import pytest

from grpo_ablate import cli
from grpo_ablate.config import specs_for
from grpo_ablate.records import read_record
from grpo_ablate.tasks import get_task
from grpo_ablate.tasks.chat import PLAIN
from grpo_ablate.tasks.math import last_boxed, score

# A small policy build and a few steps: the whole path, not the learning.
SMALL = ["model.sft.steps=30", "model.sft.batch_size=16", "model.arch.hidden_size=64",
         "model.arch.intermediate_size=128", "trainer.max_steps=2",
         "recipe.prompts_per_step=2", "recipe.group_size=4", "task.dataset.eval_size=6",
         "eval.sampled_k=1", "eval.every_steps=0", "run_cache=null"]


@pytest.mark.parametrize("completion", ["0.5", "1/2", "\\frac{1}{2}", "The answer is \\boxed{\\frac{1}{2}}",
                                        "half of it: 1/2 #### 0.5"])
def test_math_score_accepts_every_spelling_of_the_gold(completion):
    assert score(completion, "1/2") == 1.0


def test_math_score_percent_where_meant_and_wrong_answers():
    assert score("50%", "0.5") == 1.0
    assert score("0.25", "1/2") == 0.0
    assert score("15-12=4\n#### 4", "3") == 0.0
    assert score("15-12=3\n#### 3", "3") == 1.0


def test_math_score_never_raises_and_is_bounded_on_any_input():
    for bad in ("", "}}}{{{\\frac{", "\\boxed{" * 500, None, 12, "1" * 20000):
        t0 = time.perf_counter()
        assert score(bad, "3") in (0.0, 1.0)
        assert time.perf_counter() - t0 < 10
    out = []
    worker = threading.Thread(target=lambda: out.append(score("\\boxed{3}", "3")))
    worker.start()
    worker.join()
    assert out == [1.0]  # off the main thread too (math-verify's timeouts need signals)


def test_math_gold_presets_and_format_reward():
    (spec,) = specs_for(["task=math", "task.format_weight=0.5"], multirun=False)
    task = get_task(spec.config["task"])
    row = task.train[0]
    gold = task.gold(row)
    assert gold == row["answer"].split("####")[-1].strip()
    right, unformatted, wrong = f"x\n#### {gold}", gold, "#### 100000"
    assert task.reward([right, unformatted, wrong], row=[row] * 3) == [1.5, 1.0, 0.5]
    assert last_boxed("so \\boxed{\\frac{1}{2}} and \\boxed{x^{2}}") == "x^{2}"
    (spec,) = specs_for(["task=math", "task.answer_format=boxed"], multirun=False)
    boxed = get_task(spec.config["task"])
    assert boxed.gold({"question": "q", "answer": "so \\boxed{\\frac{3}{4}}."}) == "\\frac{3}{4}"


def test_code_task_rewards_the_fraction_of_tests_passed_in_the_sandbox():
    (spec,) = specs_for(["task=code"], multirun=False)
    task = get_task(spec.config["task"])
    rows = task.train[:2]
    right = [r["canonical_solution"] for r in rows]
    assert task.reward(right, row=rows) == [1.0, 1.0]
    wrong = ["    return 0\n", "    return a +\n"]
    rewards = task.reward(wrong, row=rows)
    assert rewards[1] == 0.0 and 0.0 <= rewards[0] < 1.0


@pytest.mark.parametrize("args, message", [
    (["task=math", "task.dataset.train=/nope/train.jsonl"],
     "task.dataset.train=/nope/train.jsonl: no such file"),
    (["task=math", "task.question_field=problem"], "has no field 'problem'"),
    (["task=nope"], "task=nope: no such task"),
    (["task=math", "task.answer_format=latex"], "task.answer_format=\"latex\": must be one of"),
    (["task=math", "task.chat=true"], "task.chat=true: the embedded tiny policy has no chat template"),
    (["task=code", "task.sandbox.memory_mb=1"], "task.sandbox.memory_mb=1: must be an integer"),
    (["task=code", "task.sandbox.timeout_s=0"], "task.sandbox.timeout_s=0: must be"),
])
def test_bad_task_input_is_one_line_exit_2(tmp_path, capsys, args, message):
    assert cli.main(["run", f"out_root={tmp_path}", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not list(tmp_path.rglob("*.json"))


def test_chat_reward_is_the_reward_models_score_and_accuracy_its_win_rate():
    import torch

    (spec,) = specs_for(["task=chat"], multirun=False)
    task = get_task(spec.config["task"])
    rows = task.train[:4]
    completions = ["Hello, Ann!", "no", "Thanks, Ben!", "zzzz"]
    model, tokenizer, templated = task.reward_model()
    assert not templated and task.notes() == [PLAIN]  # the tiny reward model has no template
    with torch.no_grad():  # the score, computed here one text at a time
        direct = [model(**tokenizer(task.question(r) + "\n" + c, return_tensors="pt")).logits[0, 0]
                  .item() for r, c in zip(rows, completions, strict=True)]
        refs = [model(**tokenizer(task.question(r) + "\n" + task.gold(r),
                                  return_tensors="pt")).logits[0, 0].item() for r in rows]
    assert task.reward(completions, row=rows) == pytest.approx(direct, abs=1e-5)
    assert task.scores(completions, rows) == [float(d > r) for d, r in zip(direct, refs,
                                                                             strict=True)]


def test_a_reward_model_that_is_not_a_classifier_is_refused(tmp_path, capsys):
    ckpt = tmp_path / "policy"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    assert cli.main(["run", f"out_root={tmp_path}", "task=chat",
                     f"task.reward_model={ckpt}"]) == 2
    err = capsys.readouterr().err
    assert "a LlamaForCausalLM, not a sequence classifier" in err and err.count("\n") == 1


def test_an_empty_data_file_is_refused(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert cli.main(["run", f"out_root={tmp_path}", "task=math",
                     f"task.dataset.eval={empty}"]) == 2
    assert "the file has no rows" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("task", ["math", "code", "chat"])
def test_each_task_runs_end_to_end_on_the_tiny_policy(tmp_path, task, capsys):
    assert cli.main(["run", f"task={task}", f"out_root={tmp_path}", *SMALL]) == 0
    (path,) = tmp_path.glob("adhoc/runs/*/record.json")
    record = read_record(path)
    assert record.status == "completed" and record.task == task
    for key in ("eval/accuracy", "eval/sampled_accuracy"):
        assert 0.0 <= record.metrics[key] <= 1.0
    assert math.isfinite(record.metrics["eval/reward_mean"])  # a reward model's units for chat
    assert record.steps == 2
    assert json.loads(path.read_text())["config"]["task"]["name"] == task


@pytest.mark.slow
def test_chat_reward_clip_is_set_in_quantiles_of_the_sft_policys_rewards(tmp_path, capsys):
    """A reward model's scores have no fixed range: the clip bounds are measured on the SFT
    policy (5% and 95% quantiles of its rewards), recorded, and shown in the report."""
    args = ["sweep", "task=chat", "trick=baseline,reward_clamp_task", "seed=0,1",
            f"out_root={tmp_path}", "sweep_name=q", *SMALL]
    assert cli.main(args) == 0
    records = [read_record(p) for p in tmp_path.glob("q/runs/*/record.json")]
    clipped = [r for r in records if r.arm == "reward_clamp_task"]
    assert len(clipped) == 2 and all(r.status == "completed" for r in clipped)
    values = [r.activity["values"] for r in clipped]
    assert values[0] == values[1]  # measured once per run with a fixed seed: the same for every seed
    low, high = values[0]["reward_clip_low"], values[0]["reward_clip_high"]
    assert low < high and (low, high) != (0.05, 0.95)  # reward units, not the quantile levels
    assert 0.0 < clipped[0].activity["details"]["reward_clip_samples"] < 1.0  # it clipped the tails
    report = (tmp_path / "q" / "report.md").read_text()
    assert "values used" in report and f"reward_clip_low={low:.3f}" in report


def test_model_scales_carry_the_scaled_recipe_and_64_groups_per_step():
    from grpo_ablate.config import completions_per_step

    for model, lr in (("qwen2.5-1.5b", 1e-6), ("qwen2.5-7b", 5e-7), ("qwen2.5-14b", 3e-7)):
        (spec,) = specs_for([f"model={model}", "task=math"], multirun=False)
        tr = spec.config["trainer"]
        assert tr["learning_rate"] == lr and tr["gradient_checkpointing"] is True
        assert spec.config["model"]["path"].startswith("Qwen/Qwen2.5-")
        assert completions_per_step(spec.config) // tr["num_generations"] == 64
        assert tr["steps_per_generation"] == tr["gradient_accumulation_steps"]
        (g4,) = specs_for([f"model={model}", "trick=group_size_4"], multirun=False)
        assert completions_per_step(g4.config) == 64 * 4  # still 64 groups


def test_cross_scale_sweep_crosses_models_tasks_tricks_and_seeds():
    from grpo_ablate.config import expand_jobs

    jobs = expand_jobs(["sweep=cross_scale"])
    assert len(jobs) == 3 * 2 * 25 * 5


def test_percentile_is_nearest_rank():
    import numpy as np

    from grpo_ablate.training.lengths import percentile

    rng = np.random.default_rng(3)
    for n in (1, 7, 100):
        values = rng.integers(1, 500, n).tolist()
        for q in (50, 90, 95, 99):
            assert percentile(values, q) == int(np.percentile(values, q, method="inverted_cdf"))


@pytest.mark.slow
def test_lengths_prints_percentiles_and_the_95th_as_the_suggestion(tiny_policy, capsys):
    assert cli.main(["lengths", "--prompts", "32", "--cap", "8"]) == 0
    out = capsys.readouterr().out
    p95 = int(out.split("p95=")[1].split()[0])
    assert f"suggested trainer.max_completion_length={p95} " in out
    assert 1 <= p95 <= 8


def test_a_trick_that_changes_the_batch_layout_is_refused(tmp_path, capsys):
    trick = tmp_path / "mine" / "trick"
    trick.mkdir(parents=True)
    (trick / "big_batch.yaml").write_text(
        "# @package _global_\ntrick:\n  id: big_batch\n  family: other\n  changes: x\n"
        "  verdict: x\n  keys: [recipe.prompts_per_step]\nrecipe:\n  prompts_per_step: 8\n")
    args = ["sweep", "--config-dir", str(tmp_path / "mine"), "sweep=smoke",
            "trick=baseline,big_batch", f"out_root={tmp_path}/out"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "trick=big_batch: 8 groups per optimizer step where trick=baseline has 4" in err
    assert not (tmp_path / "out").exists()
    # the same arm under budget.match=completions changes the layout on purpose: allowed
    specs = specs_for([f"hydra.searchpath=[file://{tmp_path / 'mine'}]",
                       "sweep=smoke", "trick=baseline,big_batch", "budget.match=completions"],
                      multirun=True)
    assert len(specs) == 4


def test_vllm_is_an_optional_switch_checked_before_training(capsys):
    assert cli.main(["run", "trainer.use_vllm=true"]) == 2
    assert "vLLM generates on a CUDA device" in capsys.readouterr().err
    assert cli.main(["run", "trainer.vllm_mode=remote"]) == 2
    assert "must be one of: colocate, server" in capsys.readouterr().err
    import sys

    assert "vllm" not in sys.modules  # nothing imports it while it is off


@pytest.mark.slow
def test_a_real_checkpoint_with_bpe_and_a_chat_template_runs_conversationally(tmp_path):
    """model=hf on a local Qwen2-architecture checkpoint: chat-template prompts, a record."""
    from tiny_qwen import SMALL_HF, build_tiny_qwen2

    ckpt = build_tiny_qwen2(tmp_path / "qwen")
    (spec,) = specs_for([*SMALL_HF, f"model.path={ckpt}", f"out_root={tmp_path}"],
                        multirun=False)
    task = get_task(spec.config["task"])
    from transformers import AutoTokenizer

    task.use_tokenizer(AutoTokenizer.from_pretrained(ckpt))
    assert task.conversational and task.train_rows()[0]["prompt"][-1]["role"] == "user"
    assert cli.main(["run", *SMALL_HF, f"model.path={ckpt}", f"out_root={tmp_path}"]) == 0
    (path,) = tmp_path.glob("adhoc/runs/*/record.json")
    record = read_record(path)
    assert record.status == "completed" and record.steps == 2
    assert record.config["trainer"]["bf16"] is False  # the CPU: fp32, whatever the CPU has


def test_sampled_lengths_drop_ended_rows_and_equal_generate_row_by_row(tmp_path):
    """The lengths loop (one left-padded batch, a KV cache, ended rows dropped) gives each
    prompt what `generate` gives it alone; with top_k=1 sampling is greedy, so they must agree
    token for token (prompts of different lengths: the padding and positions are exercised)."""
    import torch
    from tiny_qwen import build_tiny_qwen2
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_ablate.training.lengths import sample_lengths

    path = build_tiny_qwen2(tmp_path / "qwen")
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)
    torch.manual_seed(0)
    with torch.no_grad():  # a bias towards the end token makes some rows stop early
        model.lm_head.weight[tokenizer.eos_token_id] += 0.35 * torch.randn(model.config.hidden_size)
    texts = ["Ann has 3 pens.", "Cal has 12 books and gives away 5. How many?", "Eli", "4+4="]
    stops = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    got = sample_lengths(model, tokenizer, texts, 40, stops, 1.0, 1.0, 1)
    want = []
    for text in texts:
        enc = tokenizer(text, return_tensors="pt")
        out = model.generate(**enc, max_new_tokens=40, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id)[0, enc["input_ids"].shape[1]:]
        ends = [j for j, t in enumerate(out.tolist()) if t in stops]
        want.append(ends[0] + 1 if ends else 40)
    assert got == want
    assert len(set(got)) > 1  # rows ended at different steps


def test_the_held_out_pool_is_what_the_data_could_hold_out_with_training_as_it_is(tmp_path):
    """One shared split: its rows less those that train (train_size, or every row not held
    out); separate files: the eval file's rows. The record's `prompts.pool` carries it."""
    from grpo_ablate.tasks.data import load_task_rows

    rows = [{"question": f"{i}+1", "answer": str(i + 1)} for i in range(10)]
    shared = tmp_path / "rows.jsonl"
    shared.write_text("".join(json.dumps(r) + "\n" for r in rows))
    other = tmp_path / "eval.jsonl"
    other.write_text("".join(json.dumps(r) + "\n" for r in rows[:7]))
    section = {"train": str(shared), "eval": str(shared), "train_split": "train",
               "eval_split": "train", "eval_size": 3, "train_size": 4}
    train, held_out, pool = load_task_rows(section, ["question", "answer"])
    assert (len(train), len(held_out), pool) == (4, 3, 6)
    train, held_out, pool = load_task_rows({**section, "train_size": None}, ["question"])
    assert (len(train), len(held_out), pool) == (7, 3, 3)
    train, held_out, pool = load_task_rows({**section, "eval": str(other)}, ["question"])
    assert (len(train), len(held_out), pool) == (4, 3, 7)
    task = get_task({"name": "arithmetic", "max_operand": 9, "carry_bug_rate": 0.0,
                     "eval_fraction": 0.2, "split_seed": 0, "data_file": None})
    assert task.held_out_pool == len(task.eval_problems) == 20
