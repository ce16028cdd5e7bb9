"""The statistics stage at the end of a Hydra multirun, however it was launched.

`grpo-ablate sweep` reports once itself, after every rung of an adaptive sweep, so it turns
this off (runtime.driven_by_cli). A sweep started as a plain Hydra app
(`python -m grpo_ablate.app -m ...`, any launcher) gets its report here, in the launching
process, from the folder of records: workers share no memory, the records are the source.
"""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from grpo_ablate.runtime import driven_by_cli


class ReportAtEnd(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if driven_by_cli():
            return
        # heavy (pandas, scipy, matplotlib): the report stage loads only when it runs
        from grpo_ablate.report import report_or_skip

        logger = OmegaConf.select(config, "logger") or {}
        report_or_skip(str(OmegaConf.select(config, "sweep_dir")), report_args(logger))


def report_args(logger: dict) -> list[str]:
    """The report's W&B flags for a sweep's logger settings."""
    if logger.get("backend") == "wandb" and logger.get("mode") != "disabled":
        return ["--wandb", logger["mode"], "--wandb-project", logger["project"]]
    return []
