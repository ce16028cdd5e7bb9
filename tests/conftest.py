import os

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


@pytest.fixture(scope="session")
def tiny_policy():
    """The cached SFT checkpoint of the embedded policy (built once, minutes at most)."""
    from grpo_ablate.config import specs_for
    from grpo_ablate.tasks import get_task
    from grpo_ablate.train import resolve_model_path

    (spec,) = specs_for([], multirun=False)
    return resolve_model_path(spec.config, get_task(spec.config["task"]))
