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
    # Matched runs (said so): the per-seed figure is drawn, and logged.
    args = ["report", str(csv), "--out", str(tmp_path), "--wandb", "offline", "--runs", "matched"]
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


class FakeRun:
    """A W&B run as `wandb.init` returns it, recording what is logged (a stand-in: online
    resume needs a W&B server, which cannot exist here)."""

    def __init__(self, **kwargs):
        self.kwargs, self.rows, self.step, self.id = kwargs, [], 0, kwargs.get("id")

    def define_metric(self, *args, **kwargs):
        pass

    def log(self, row):
        self.rows.append(row)
        self.step += 1


@pytest.mark.parametrize("mode", ["online", "offline"])
def test_a_resumed_run_continues_one_w_and_b_history(monkeypatch, mode):
    """Online: rewound to the W&B step saved with the checkpoint (`resume_from`), nothing
    logged again. Offline: a new folder under the same id, the checkpoint's rows logged
    again first, as they were logged the first time (train/ keys, eval rows as they are)."""
    from grpo_ablate.training.run_state import RunState
    from grpo_ablate.training.wandb_logger import start_run

    made = []
    monkeypatch.setattr(wandb, "init", lambda **kw: made.append(FakeRun(**kw)) or made[-1])
    (spec,) = specs_for(["logger=wandb", f"logger.mode={mode}"], multirun=False)
    state = RunState(wandb_run_id="abc-123", wandb_step=3,
                     history=[{"step": 0, "eval/accuracy": 0.5}, {"step": 1, "loss": 0.25},
                              {"step": 2, "loss": 0.5, "kl": 0.01}])
    run = start_run(spec.config, spec.arm, spec.seed, spec.run_id, "/tmp/sweep", state)
    if mode == "online":
        assert run.kwargs["resume_from"] == "abc-123?_step=3" and "resume" not in run.kwargs
        assert run.rows == []
    else:
        assert run.kwargs["resume"] == "allow" and run.kwargs["id"] == "abc-123"
        assert run.rows == [{"eval/accuracy": 0.5, "train/global_step": 0},
                            {"train/loss": 0.25, "train/global_step": 1},
                            {"train/loss": 0.5, "train/kl": 0.01, "train/global_step": 2}]
        assert state.wandb_step == 3
    fresh = start_run(spec.config, spec.arm, spec.seed, spec.run_id, "/tmp/sweep", RunState())
    assert fresh.kwargs["resume"] == "allow" and fresh.rows == []  # a first attempt: as ever
