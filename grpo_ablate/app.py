"""The Hydra application: `grpo-ablate run|sweep` hand the command line to it, so Hydra's
own flags and launchers (joblib, submitit) work as for any `@hydra.main` app. Each job,
in whatever process a launcher starts it, validates its config and executes one run."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from grpo_ablate.config import CONF_DIR, validate
from grpo_ablate.launch.sweep import execute


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> str:
    return execute(validate(cfg))


if __name__ == "__main__":  # a plain Hydra app: python -m grpo_ablate.app [-m] [overrides]
    hydra_main()
