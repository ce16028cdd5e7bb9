"""`grpo-ablate report --from lm-eval`: lm-evaluation-harness's own sample logs, written by
the installed harness (its Python entry point and EvaluationTracker, the calls its command
line makes) on tiny local checkpoints and a local task, read and reported per prompt."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from grpo_ablate import cli

pytestmark = pytest.mark.slow
DOCS = 12


def task_folder(root: Path) -> Path:
    """A multiple-choice task on a local JSON file (no download): `acc` per document."""
    rows = [{"question": f"{a} + {b} =", "choices": [f" {a + b}", f" {a + b + 1}", f" {a + b - 1}"],
             "answer": (a * 7 + b) % 3} for a, b in zip(range(1, DOCS + 1), range(3, DOCS + 3),
                                                      strict=True)]
    for r in rows:  # the right choice at its `answer` position
        right = r["choices"].pop(0)
        r["choices"].insert(r["answer"], right)
    (root / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "sums.yaml").write_text(
        "task: tiny_sums\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {root / 'rows.jsonl'}\ntest_split: test\noutput_type: multiple_choice\n"
        'doc_to_text: "{{question}}"\ndoc_to_choice: "{{choices}}"\ndoc_to_target: "{{answer}}"\n'
        "metric_list:\n  - metric: acc\n")
    return root


def checkpoint(base: Path, out: Path, seed: int) -> Path:
    """The tiny checkpoint with its weights moved by a seeded perturbation: a different
    policy per run, as training would leave."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.5)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(base).save_pretrained(out)
    return out


def harness(model: Path, tasks: Path, output_path: Path) -> dict:
    """What `lm_eval --model hf --tasks tiny_sums --include_path TASKS --log_samples
    --output_path OUTPUT_PATH` does: evaluate, then save the aggregate and the samples."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    tracker = EvaluationTracker(output_path=str(output_path))
    res = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={model},dtype=float32",
                                  tasks=["tiny_sums"], task_manager=TaskManager(
                                      include_path=str(tasks)), log_samples=True, device="cpu",
                                  batch_size=4, evaluation_tracker=tracker)
    samples = res.pop("samples")
    tracker.save_results_aggregated(results=res, samples=samples)
    for name in res["configs"]:
        tracker.save_results_samples(task_name=name, samples=samples[name])
    return res


@pytest.fixture(scope="module")
def harness_runs(tmp_path_factory):
    from tiny_qwen import build_tiny_qwen2

    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = tmp_path_factory.mktemp("lm_eval")
    (root / "tasks").mkdir()
    tasks = task_folder(root / "tasks")
    base = build_tiny_qwen2(root / "tiny")
    accuracy = {}
    for k, (arm, seed) in enumerate((a, s) for a in ("baseline", "kl_off") for s in range(3)):
        model = checkpoint(base, root / "ckpt" / f"{arm}{seed}", 100 * k + 1)
        res = harness(model, tasks, root / "evals" / f"{arm}-seed{seed}")
        accuracy[arm, seed] = res["results"]["tiny_sums"]["acc,none"]
    return root, accuracy


def test_the_harness_sample_logs_are_read_and_reported_per_prompt(harness_runs, capsys):
    root, accuracy = harness_runs
    out = root / "report"
    assert cli.main(["report", "--from", "lm-eval", str(root / "evals"), "--metric", "acc,none",
                     "--out", str(out), "--no-figures"]) == 0
    capsys.readouterr()
    rep = json.loads((out / "report.json").read_text())
    (st,) = rep["strata"]
    assert st["task"] == "tiny_sums" and rep["design"]["runs"] == "independent"
    assert rep["scope"] == "prompts"  # a benchmark's fixed documents, unless said otherwise
    base = [accuracy["baseline", s] for s in range(3)]
    assert st["baseline"]["n"] == 3
    assert st["baseline"]["mean"] == pytest.approx(sum(base) / 3, abs=1e-12)
    (arm,) = st["arms"]
    mine = [accuracy["kl_off", s] for s in range(3)]
    # Each run's mean over its documents is the harness's own aggregate for that run.
    assert arm["mean"] == pytest.approx(sum(mine) / 3, abs=1e-12)
    # Said to be a sample of a larger pool, the documents are the task scope's second chance.
    pooled = root / "report-pool"
    assert cli.main(["report", "--from", "lm-eval", str(root / "evals"), "--metric", "acc,none",
                     "--out", str(pooled), "--no-figures", "--prompts-pool", "500"]) == 0
    capsys.readouterr()
    (arm,) = json.loads((pooled / "report.json").read_text())["strata"][0]["arms"]
    assert arm["variance"]["prompts"] == DOCS and arm["test"] == "crossed_welch"


def test_a_manifest_names_the_runs_and_a_folder_without_a_name_is_refused(harness_runs, capsys,
                                                                         tmp_path):
    root, accuracy = harness_runs
    evals = root / "evals"
    rows = [{"path": str(evals / f"{a}-seed{s}"), "arm": "grpo" if a == "baseline" else "dapo",
             "seed": s} for a in ("baseline", "kl_off") for s in range(3)]
    manifest = tmp_path / "runs.csv"
    pd.DataFrame(rows).to_csv(manifest, index=False)
    out = tmp_path / "report"
    assert cli.main(["report", "--from", "lm-eval", str(evals), "--manifest", str(manifest),
                     "--metric", "acc,none", "--baseline", "grpo", "--out", str(out),
                     "--no-figures"]) == 0
    capsys.readouterr()
    rep = json.loads((out / "report.json").read_text())
    (arm,) = rep["strata"][0]["arms"]
    assert arm["arm"] == "dapo" and rep["arms"] == "methods"
    assert arm["mean"] == pytest.approx(sum(accuracy["kl_off", s] for s in range(3)) / 3)
    # A folder of samples without a run name or a manifest: one line, exit 2, nothing written.
    code = cli.main(["report", "--from", "lm-eval", str(root / "evals" / "kl_off-seed0" / ".."
                                                        / ".." / "ckpt"), "--out",
                     str(tmp_path / "none")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and "no samples_*.jsonl" in err[0]
    lost = tmp_path / "unnamed" / "model"
    lost.mkdir(parents=True)
    first = next((evals / "kl_off-seed0").rglob("samples_*.jsonl"))
    (lost / first.name).write_text(first.read_text())
    code = cli.main(["report", "--from", "lm-eval", str(tmp_path / "unnamed"), "--out",
                     str(tmp_path / "none")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and "<arm>-seed<N>" in err[0]
    assert not (tmp_path / "none").exists()
