"""W&B offline runs, read back from their files: one run per arm x seed with grpo-ablate's
config, eval curves at their steps, no profiling timers, ids unique per sweep folder."""

import json

import pytest
import wandb
from wandb_files import read_run

from grpo_ablate.config import specs_for
from grpo_ablate.records import write_record
from grpo_ablate.training.train import train_one

pytestmark = pytest.mark.slow
TESTED_WANDB = (0, 31)


def test_reader_is_pinned_to_the_tested_wandb():
    assert tuple(int(x) for x in wandb.__version__.split(".")[:2]) == TESTED_WANDB


def test_offline_run_carries_config_curves_and_summary(tmp_path, tiny_policy):
    runs = {}
    for out in ("a", "b"):
        (spec,) = specs_for(["trainer.max_steps=3", "eval.every_steps=2", "logger=wandb",
                             "trick=ema_0.9", f"out_root={tmp_path / out}"], multirun=False)
        record, history = train_one(spec)
        write_record(spec.run_dir, record, history)
        (path,) = (tmp_path / out / "adhoc" / "wandb").glob("offline-run-*/run-*.wandb")
        runs[out] = read_run(path)
    a, b = runs["a"], runs["b"]
    assert a["run"].run_id != b["run"].run_id  # same run, two sweep folders: no collision
    assert a["config"]["run_id"] == b["config"]["run_id"] == spec.run_id
    assert a["run"].run_group == "adhoc" and a["run"].job_type == "ema_0.9"
    config = {k for k in a["config"] if not k.startswith("_")}
    assert config == set(spec.config) | {"run_id"}  # grpo-ablate's config, not TRL's 200 keys
    assert a["config"]["hooks"]["ema"] == {"decay": 0.9}
    evals = [(h["train/global_step"], h["eval/accuracy"]) for h in a["history"] if "eval/accuracy" in h]
    assert [s for s, _ in evals] == [0, 2, 3]  # start, every 2 steps, end
    assert [h["train/global_step"] for h in a["history"] if "raw/eval/accuracy" in h] == [0, 2, 3]
    steps = [h["train/global_step"] for h in a["history"] if "train/loss" in h]
    assert steps == [1, 2, 3]
    keys = set().union(*a["history"])
    assert not any(k.startswith(("profiling/", "train/profiling")) for k in keys)
    assert a["summary"]["status"] == "completed"
    assert a["summary"]["eval/accuracy"] == record.metrics["eval/accuracy"]


def test_report_writes_one_summary_run_with_the_verdicts(tmp_path):
    from pathlib import Path

    from grpo_ablate import cli

    csv = Path(__file__).parent / "fixtures" / "results.csv"
    args = ["report", str(csv), "--out", str(tmp_path), "--wandb", "offline"]
    assert cli.main(args) == 0 and cli.main(args) == 0  # a re-run updates the same run
    files = sorted((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    runs = [read_run(p) for p in files]
    assert len(runs) == 2 and all(r["exit"] for r in runs)
    assert len({r["run"].run_id for r in runs}) == 1
    run = runs[-1]
    assert run["run"].job_type == "summary" and run["run"].run_group == "results"
    (row,) = run["history"]
    assert row["verdicts/_type"] == "table-file" and row["verdicts/nrows"] == 3
    assert {k.split("/")[1] for k in row if k.startswith("figures/")} == {"forest", "seeds", "mde"}
    table = json.loads((files[-1].parent / "files" / row["verdicts/path"]).read_text())
    report = json.loads((tmp_path / "report.json").read_text())
    verdicts = {a["arm"]: a["verdict"] for a in report["strata"][0]["arms"]}
    assert {r[2]: r[10] for r in table["data"]} == verdicts
    assert run["summary"]["verdicts/improves"] == 1
