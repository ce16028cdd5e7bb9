"""The statistics stage at the end of a Hydra multirun run by another sweeper than
grpo-ablate's own (e.g. `hydra/sweeper=optuna`). grpo-ablate's sweeper and `grpo-ablate sweep`
report through the one driver (launch/driver.py), so this callback stands aside for them:
the sweep command launches without it, and the sweeper is recognised by its target. The
report is made in the launching process from the folder of records: workers share no memory,
the records are the source.
"""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

OWN_SWEEPER = "hydra_plugins.grpo_ablate_ladder.LadderSweeper"


class ReportAtEnd(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if OmegaConf.select(config, "hydra.sweeper._target_") == OWN_SWEEPER:
            return  # run_sweep reported
        # heavy (pandas, scipy, matplotlib): the report stage loads only when it runs
        from grpo_ablate.report import report_or_skip
        from grpo_ablate.report.settings import ReportSettings

        logger = OmegaConf.to_container(OmegaConf.select(config, "logger") or {})
        report_or_skip(str(OmegaConf.select(config, "sweep_dir")),
                       ReportSettings.for_logger(logger))
