"""The statistics stage at the end of a Hydra multirun run by a sweeper that does not report
itself (e.g. `hydra/sweeper=basic` or `optuna`). grpo-ablate's sweeper reports through the one
driver (launch/driver.py) and says so by its `hydra.sweeper.report` block (the settings of its
report), so this callback stands aside for it. The report is made in the launching process from
the folder of records: workers share no memory, the records are the source.
"""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf


class ReportAtEnd(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if OmegaConf.select(config, "hydra.sweeper.report") is not None:
            return  # the sweeper reports itself, with these settings
        # heavy (pandas, scipy, matplotlib): the report stage loads only when it runs
        from grpo_ablate.report import report_or_skip
        from grpo_ablate.report.settings import ReportSettings

        logger = OmegaConf.to_container(OmegaConf.select(config, "logger") or {})
        report_or_skip(str(OmegaConf.select(config, "sweep_dir")),
                       ReportSettings.for_logger(logger))
