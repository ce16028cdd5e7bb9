"""A regular (non-editable) install works from any folder: the wheel carries the Hydra
configs and sweep files. The fresh venv borrows the dependencies (torch, TRL...) of the
test's own environment through a .pth line, so only grpo-ablate itself is installed."""

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from grpo_ablate.config.catalog import load_catalog

ROOT = Path(__file__).resolve().parent.parent
TRICK_FILES = sorted((ROOT / "grpo_ablate" / "conf" / "trick").glob("*.yaml"))  # the checkout's
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(tmp / "dist")], check=True)
    (wheel,) = (tmp / "dist").glob("grpo_ablate-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True)
    return wheel, venv


def cli(venv, *args, cwd):
    env = {**os.environ, "WANDB_MODE": "offline"}
    return subprocess.run([str(venv / "bin" / "grpo-ablate"), *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)


def test_wheel_holds_configs_sweeps_and_py_typed(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"grpo_ablate/py.typed", "grpo_ablate/conf/config.yaml",
            "grpo_ablate/conf/trick/kl_off.yaml", "grpo_ablate/sweeps/demo.yaml",
            "grpo_ablate/conf/hydra/hydra_logging/quiet.yaml",
            "grpo_ablate/conf/launcher/joblib.yaml", "grpo_ablate/conf/hydra/sweeper/ladder.yaml",
            "hydra_plugins/grpo_ablate_ladder/__init__.py",
            "hydra_plugins/grpo_ablate_slurm/__init__.py",
            "hydra_plugins/grpo_ablate_configs/__init__.py"} <= names
    assert {n for n in names if n.startswith("grpo_ablate/conf/trick/")} == \
        {f"grpo_ablate/conf/trick/{p.name}" for p in TRICK_FILES}
    assert {f"grpo_ablate/tasks/fixtures/{t}_{s}.jsonl" for t in ("math", "code", "chat")
            for s in ("train", "test")} <= names


def test_installed_cli_works_from_an_unrelated_folder(installed, tmp_path, tiny_policy):
    _, venv = installed
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import grpo_ablate; print(grpo_ablate.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert str(venv) in where  # the installed copy, not the checkout
    tricks = cli(venv, "tricks", cwd=tmp_path)
    assert tricks.returncode == 0, tricks.stderr
    # A header, a line a trick (a former name's file is not a trick of its own).
    assert len(tricks.stdout.splitlines()) == len(load_catalog()) + 1
    job = cli(venv, "run", "--cfg", "job", "trick=kl_off", cwd=tmp_path)
    assert job.returncode == 0 and "beta: 0.0" in job.stdout, job.stderr
    # The packaged config source: a sweep file and a former trick name, from the wheel.
    old = cli(venv, "run", "--cfg", "job", "trick=no_kl", "sweep=smoke", cwd=tmp_path)
    assert old.returncode == 0 and "sweep_name: smoke" in old.stdout, old.stderr
    assert "id: kl_off" in old.stdout and "trick=no_kl is now trick=kl_off" in old.stderr
    for task in ("math", "code", "chat"):  # the shipped fixtures are found and validated
        shown = cli(venv, "run", "--cfg", "job", f"task={task}", cwd=tmp_path)
        assert shown.returncode == 0 and f"name: {task}" in shown.stdout, shown.stderr
    # A multirun: every sweep goes through the packaged sweeper plugin (hydra/sweeper=ladder).
    run = cli(venv, "run", "-m", "trainer.max_steps=1", "eval.every_steps=0",
              f"out_root={tmp_path}/o", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    (record,) = (tmp_path / "o" / "adhoc" / "runs").glob("*/record.json")
    data = json.loads(record.read_text())
    assert data["status"] == "completed" and data["git_sha"] is None
    assert cli(venv, "--version", cwd=tmp_path).stdout.startswith("grpo-ablate 0.1.0")
