import os

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


@pytest.fixture(scope="session")
def tiny_policy():
    """The cached SFT checkpoint of the embedded policy (built once, minutes at most)."""
    from grpo_ablate.config import specs_for
    from grpo_ablate.models import resolve_model_path
    from grpo_ablate.tasks import get_task

    (spec,) = specs_for([], multirun=False)
    return resolve_model_path(spec.config, get_task(spec.config["task"]))


@pytest.fixture(scope="session")
def smoke_sweep(tmp_path_factory, tiny_policy):
    """`grpo-ablate sweep sweep=smoke logger=wandb`, never interrupted, run once for the tests
    that need it (its output, its records, or a reference to compare another launcher's or a
    resumed sweep's report with). Tests may re-run it but must not change its records."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("smoke") / "out"
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    res = subprocess.run([sys.executable, "-m", "grpo_ablate.cli", "sweep", "sweep=smoke",
                          f"out_root={out}", "logger=wandb"], capture_output=True, text=True,
                         env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    return res, out
