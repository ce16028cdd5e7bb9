"""The Hydra application: `grpo-ablate run|sweep` hand the command line to it, so Hydra's
own flags (--cfg job, -m, --help, --info) keep working."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from grpo_ablate import config as _config  # noqa: F401 - registers resolvers and sweeps
from grpo_ablate.config import CONF_DIR, validate
from grpo_ablate.sweep import execute


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> str:
    return execute(validate(cfg))
