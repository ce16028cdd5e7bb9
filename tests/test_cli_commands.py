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
def test_smoke_sweep_records_report_wandb_and_resume(smoke_sweep):
    res, out = smoke_sweep  # grpo-ablate sweep sweep=smoke logger=wandb
    sweep = out / "smoke"
    records = sorted(sweep.glob("runs/*/record.json"))
    assert len(records) == 6
    arms = {json.loads(p.read_text())["arm"] for p in records}
    assert arms == {"baseline", "kl_off", "reward_clamp_task"}
    assert all((p.parent / "history.jsonl").is_file() for p in records)
    assert "6/6 runs" in res.stderr and "ETA" in res.stderr
    report = json.loads((sweep / "report.json").read_text())
    assert report["metric"] == "eval/accuracy" and len(report["strata"][0]["arms"]) == 2
    assert (sweep / "report.md").is_file() and (sweep / "figures" / "forest.png").is_file()
    wandb_runs = list((sweep / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(wandb_runs) == 7  # one per arm x seed, and the report's summary run
    assert len([p for p in wandb_runs if "-summary-" in p.parent.name]) == 1
    before = {p: p.read_bytes() for p in records}
    again = cli("sweep", "sweep=smoke", f"out_root={out}", "logger=wandb")
    # Finished runs are skipped before any launcher, worker or model starts.
    assert again.returncode == 0 and "6 runs (3 arms x 2 seeds), 0 to train" in again.stderr
    assert "training" not in again.stderr
    assert {p: p.read_bytes() for p in records} == before


def test_tricks_lists_the_catalog_with_verdicts():
    res = cli("tricks")
    assert res.returncode == 0
    assert "reuse_2x_ratio_clip_off" in res.stdout and "essential" in res.stdout


def test_report_on_csv(tmp_path):
    root = Path(__file__).resolve().parent.parent
    res = cli("report", str(root / "tests/fixtures/results.csv"), "--out", str(tmp_path),
              "--min-effect", "0.02", "--runs", "matched")  # the per-seed figure joins seeds
    assert res.returncode == 0, res.stderr
    rep = json.loads((tmp_path / "report.json").read_text())
    verdicts = {a["arm"]: a["verdict"] for a in rep["strata"][0]["arms"]}
    assert verdicts["helps"] == "improves"
    assert {"forest.png", "seeds.png", "mde.png"} <= {p.name for p in (tmp_path / "figures").iterdir()}


# ---------------------------------------------------------------------------- a Hydra app
def user_conf(tmp_path):
    """A user's own folder: one trick and one sweep, no fork of grpo-ablate."""
    (tmp_path / "trick").mkdir(parents=True)
    (tmp_path / "sweep").mkdir(parents=True)
    (tmp_path / "trick" / "kl_0.2.yaml").write_text(
        "# @package _global_\ntrick:\n  id: kl_0.2\n  family: kl\n  changes: beta 0.2\n"
        "  verdict: mine\n  keys: [trainer.beta]\ntrainer:\n  beta: 0.2\n")
    (tmp_path / "sweep" / "mine.yaml").write_text(
        "# @package _global_\nsweep_name: mine\nhydra:\n  mode: MULTIRUN\n  sweeper:\n"
        "    params:\n      trick: baseline,kl_0.2\n      seed: range(0,2)\n")
    return tmp_path


def run_main(capsys, *args):
    from grpo_ablate import cli as cli_module

    code = cli_module.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_version_and_closed_pipe():
    assert cli("--version").stdout.strip() == "grpo-ablate 0.1.0"
    res = subprocess.run(f"{sys.executable} -c 'from grpo_ablate.cli import entry; import sys; "
                         "sys.argv=[\"grpo-ablate\", \"tricks\"]; entry()' | head -1",
                         shell=True, capture_output=True, text=True, env=ENV, timeout=300)
    assert res.stdout.startswith("id ") and res.stderr == ""


# Hydra configures logging for the process it runs in: these go through real processes.
@pytest.mark.slow
def test_config_dir_adds_users_tricks_and_sweeps(tmp_path, capsys):
    conf = user_conf(tmp_path / "mine")
    code, out, _ = run_main(capsys, "tricks", "--config-dir", str(conf))
    assert code == 0 and "kl_0.2" in out and "kl_off" in out
    res = cli("run", "-cd", str(conf), "trick=kl_0.2", "--cfg", "job", cwd=tmp_path)
    assert res.returncode == 0 and "beta: 0.2" in res.stdout and "id: kl_0.2" in res.stdout
    res = cli("sweep", f"--config-dir={conf}", "sweep=mine", "--cfg", "job", cwd=tmp_path)
    assert res.returncode == 0 and "# 4 jobs" in res.stderr and "sweep_name: mine" in res.stdout


@pytest.mark.slow
def test_multirun_flags_and_show_flags_behave_like_hydra():
    res = cli("run", "-m", "trick=baseline,kl_off", "--cfg", "job")
    assert res.returncode == 0 and "# 2 jobs" in res.stderr  # what it is given, not the catalog
    res = cli("sweep", "-m", "sweep=smoke", "--cfg", "job")
    assert res.returncode == 0 and "# 6 jobs" in res.stderr
    res = cli("run", "--info", "searchpath")
    lines = [ln for ln in res.stdout.splitlines() if ln.strip().strip("-*")]  # not the rules
    assert res.returncode == 0 and "grpo_ablate/conf" in res.stdout
    assert len(lines) == len(set(lines))  # nothing printed twice


@pytest.mark.parametrize("args,message", [
    (["run", "--cfg", "job", "trainer.betta=1"], "trainer.betta=1: unknown key; did you mean"),
    (["run", "--config-name", "other"], "--config-name: not supported"),
    (["run", "--config-dir", "/no/such/dir"], "--config-dir /no/such/dir: no such folder"),
    (["run", "--bogus"], "--bogus: unknown flag"),
    (["tricks", "trick=x"], "allowed: no arguments, ARM..., --pairs, --fidelity, or --config-dir DIR"),
])
def test_hydra_line_errors_are_one_line(capsys, args, message):
    code, _, err = run_main(capsys, *args)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and message in lines[0], err


@pytest.mark.slow
def test_a_failed_run_exits_nonzero_and_keeps_its_record(tmp_path, tiny_policy, capfd):
    from grpo_ablate.cli import main

    capfd.readouterr()  # in this process: main's return is the command's exit status
    code = main(["run", "trainer.max_steps=2", "faults.reward_raises_at_step=0",
                 f"out_root={tmp_path}"])
    assert code == 1 and "the run failed: RuntimeError: injected fault" in capfd.readouterr().err
    (record,) = (tmp_path / "adhoc" / "runs").glob("*/record.json")
    assert json.loads(record.read_text())["status"] == "failed"


def test_report_expands_a_quoted_glob_of_sweep_folders(tmp_path):
    from grpo_ablate import cli as cli_module
    from grpo_ablate.errors import UserError
    from grpo_ablate.report import expand_paths

    for name in ("sweep-b", "sweep-a", "other"):
        (tmp_path / name).mkdir()
    assert expand_paths([str(tmp_path / "sweep-*")]) == [tmp_path / "sweep-a", tmp_path / "sweep-b"]
    assert expand_paths([str(tmp_path / "other")]) == [tmp_path / "other"]
    with pytest.raises(UserError, match="no folder matches"):
        expand_paths([str(tmp_path / "nope-*")])
    with pytest.raises(UserError, match="need --out DIR"):
        cli_module.cmd_report([str(tmp_path / "sweep-*")])


def test_trl_refuses_a_trainer_value_before_anything_is_written(tmp_path, capsys, monkeypatch):
    """TRL's own GRPOConfig checks run where a run would train (not for --cfg, which must not
    import TRL); a section TRL accepted is remembered, one it refused never is."""
    monkeypatch.setenv("GRPO_ABLATE_CACHE", str(tmp_path / "cache"))
    code, _, err = run_main(capsys, "run", f"out_root={tmp_path}/out",
                            "trainer.lr_scheduler_type=bogus")
    assert code == 2 and err.count("\n") == 1
    assert "trainer: bogus is not a valid SchedulerType" in err
    assert not (tmp_path / "out").exists()
    assert not list((tmp_path / "cache").rglob("accepted/*"))
    from grpo_ablate.config import specs_for
    from grpo_ablate.config.trainer import check_with_trl

    (spec,) = specs_for([], multirun=False)
    check_with_trl(spec.config)
    assert len(list((tmp_path / "cache").rglob("accepted/*"))) == 1


def test_run_help_lists_the_same_groups_as_hydras_own_help():
    """`grpo-ablate run --help` shares one config repository among Hydra's listings (the
    copies were most of its time): what it prints is Hydra's own `--help`, byte for byte."""
    import subprocess
    import sys

    ours = subprocess.run([sys.executable, "-m", "grpo_ablate.cli", "run", "--help"],
                          capture_output=True, text=True, check=True).stdout
    hydras = subprocess.run([sys.executable, "-m", "grpo_ablate.app", "--help"],
                            capture_output=True, text=True, check=True).stdout
    assert ours == hydras and "trick: " in ours and "== Config ==" in ours
