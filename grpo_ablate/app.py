"""The Hydra application: `grpo-ablate run|sweep` hand the command line to it, so Hydra's
own flags and launchers (joblib, submitit) work as for any `@hydra.main` app. Each job,
in whatever process a launcher starts it, executes one run: validated once, before launch
(by grpo-ablate's sweeper or `grpo-ablate run`), or here when nothing validated it before
(Hydra's basic sweeper, a plain `python -m grpo_ablate.app` run)."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from grpo_ablate.config import CONF_DIR, lora_keys_alone
from grpo_ablate.errors import UserError
from grpo_ablate.launch.sweep import execute, job_spec
from grpo_ablate.runtime import say


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> str:
    try:
        spec, checked = job_spec(cfg)
    except UserError as exc:  # a plain Hydra run's bad input: one line, exit 2, nothing run
        say(f"grpo-ablate: error: {exc}")
        sys.exit(2)
    return execute(spec, checked)


if __name__ == "__main__":  # a plain Hydra app: python -m grpo_ablate.app [-m] [overrides]
    from grpo_ablate.launch.sweeper import check_design_arguments

    try:
        check_design_arguments(sys.argv[1:])
    except UserError as exc:
        say(f"grpo-ablate: error: {exc}")
        sys.exit(2)
    sys.argv[1:] = lora_keys_alone(sys.argv[1:])  # as the grpo-ablate command line does
    hydra_main()
