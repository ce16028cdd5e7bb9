"""The Hydra application: `grpo-ablate run|sweep` hand the command line to it, so Hydra's
own flags and launchers (joblib, submitit) work as for any `@hydra.main` app. Each job,
in whatever process a launcher starts it, validates its config and executes one run."""

from __future__ import annotations

import contextlib
import io
import os
import warnings

import hydra
from omegaconf import DictConfig

from grpo_ablate.config import CONF_DIR, validate


def quiet_libraries() -> None:
    """Library chatter (deprecations, weight-loading bars, W&B banners) is not for our users;
    called in the CLI and again in every launcher worker."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="transformers|trl|torch")
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with contextlib.redirect_stdout(io.StringIO()):  # "[INFO] Running in WANDB offline mode"
        import transformers.integrations.integration_utils  # noqa: F401
    import datasets
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def driven_by_cli() -> bool:
    """Whether `grpo-ablate run|sweep` started this Hydra app: it reports once itself and
    hands Hydra an adaptive sweep one rung at a time. As a plain Hydra app, the Hydra callback
    (grpo_ablate/hydra_callbacks.py) reports and the sweeper (hydra_plugins/) runs the ladder."""
    return os.environ.get("GRPO_ABLATE_REPORTS") == "cli"


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> str:
    from grpo_ablate.sweep import execute

    quiet_libraries()
    threads = os.environ.get("GRPO_ABLATE_THREADS")  # set per worker by parallel launchers
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    return execute(validate(cfg))


if __name__ == "__main__":  # a plain Hydra app: python -m grpo_ablate.app [-m] [overrides]
    quiet_libraries()
    hydra_main()
