"""The statistics stage at the end of a Hydra multirun, however it was launched.

`grpo-ablate sweep` reports once itself, after every rung of an adaptive sweep, so it turns
this off (GRPO_ABLATE_REPORTS=cli). A sweep started as a plain Hydra app
(`python -m grpo_ablate.app -m ...`, any launcher) gets its report here, in the launching
process, from the folder of records: workers share no memory, the records are the source.
"""

from __future__ import annotations

import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf


class ReportAtEnd(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from grpo_ablate.app import driven_by_cli

        if driven_by_cli():
            return
        from grpo_ablate.cli import cmd_report
        from grpo_ablate.errors import UserError

        sweep_dir = OmegaConf.select(config, "sweep_dir")
        logger = OmegaConf.select(config, "logger") or {}
        args = [str(sweep_dir)]
        if logger.get("backend") == "wandb" and logger.get("mode") != "disabled":
            args += ["--wandb", logger["mode"], "--wandb-project", logger["project"]]
        try:
            cmd_report(args)
        except UserError as exc:  # the runs are recorded; only the report could not be made
            print(f"grpo-ablate: report skipped: {exc}", file=sys.stderr)
