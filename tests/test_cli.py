"""The command line as a user runs it: real subprocesses, real Hydra multirun, real W&B
offline files; bad input exits 2 with one line and writes nothing."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ENV = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}


def cli(*args, cwd=None, timeout=900):
    return subprocess.run([sys.executable, "-m", "grpo_ablate.cli", *args], capture_output=True,
                          text=True, env=ENV, cwd=cwd, timeout=timeout)


@pytest.mark.slow
def test_smoke_sweep_records_report_wandb_and_resume(tmp_path, tiny_policy):
    out = tmp_path / "out"
    res = cli("sweep", "sweep=smoke", f"out_root={out}", "logger=wandb")
    assert res.returncode == 0, res.stderr[-2000:]
    sweep = out / "smoke"
    records = sorted(sweep.glob("runs/*/record.json"))
    assert len(records) == 6
    arms = {json.loads(p.read_text())["arm"] for p in records}
    assert arms == {"baseline", "no_kl", "reward_clip"}
    assert all((p.parent / "history.jsonl").is_file() for p in records)
    assert "6/6 runs" in res.stderr and "ETA" in res.stderr
    report = json.loads((sweep / "report.json").read_text())
    assert report["metric"] == "eval/accuracy" and len(report["strata"][0]["arms"]) == 2
    assert (sweep / "report.md").is_file() and (sweep / "figures" / "forest.png").is_file()
    wandb_runs = list((sweep / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(wandb_runs) == 6
    before = {p: p.read_bytes() for p in records}
    again = cli("sweep", "sweep=smoke", f"out_root={out}", "logger=wandb")
    assert again.returncode == 0
    assert again.stderr.count("skipped (record exists)") == 6
    assert {p: p.read_bytes() for p in records} == before


def test_tricks_lists_the_catalog_with_verdicts():
    res = cli("tricks")
    assert res.returncode == 0
    assert "reuse_2x_no_clip" in res.stdout and "essential" in res.stdout


def test_report_on_csv(tmp_path):
    root = Path(__file__).resolve().parent.parent
    res = cli("report", str(root / "tests/fixtures/results.csv"), "--out", str(tmp_path),
              "--min-effect", "0.02")
    assert res.returncode == 0, res.stderr
    rep = json.loads((tmp_path / "report.json").read_text())
    verdicts = {a["arm"]: a["verdict"] for a in rep["strata"][0]["arms"]}
    assert verdicts["helps"] == "improves"
    assert {"forest.png", "seeds.png", "mde.png"} <= {p.name for p in (tmp_path / "figures").iterdir()}
