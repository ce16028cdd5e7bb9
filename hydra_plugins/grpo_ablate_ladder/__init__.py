"""grpo-ablate's sweeper (the default `hydra/sweeper`): a multirun of grpo-ablate's app,
whether started as `grpo-ablate sweep` or as a plain Hydra app (`python -m grpo_ablate.app -m
...`), composes and validates every job once and hands the sweep to grpo-ablate's one driver
(grpo_ablate/launch/sweeper.py). A fixed sweep is one launch of its unfinished jobs on the
configured launcher; with `adaptive.enabled=true` the pre-declared seed ladder runs one launch
per rung, as the Optuna and Ax sweepers decide their next batch from results; then the report,
with the settings in `hydra.sweeper.report`. Hydra loads sweepers only from the hydra_plugins
package, and imports this module whenever it scans plugins: grpo-ablate loads only in sweep()."""

from __future__ import annotations

import sys
from typing import Any

from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf


class LadderSweeper(Sweeper):
    def __init__(self, max_batch_size: int | None = None, params: dict | None = None,
                 report: dict | None = None) -> None:
        self.max_batch_size = max_batch_size
        self.params = dict(params or {})
        self.report = OmegaConf.to_container(report) if isinstance(report, DictConfig) \
            else dict(report or {})
        self.config: DictConfig | None = None
        self.launcher: Any = None
        self._job_idx = 0

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        from grpo_ablate.errors import UserError
        from grpo_ablate.launch.sweeper import sweep  # pandas, scipy: here, not at plugin scan

        try:
            code = sweep(self.config, list(arguments), self.params, self.report, self._launch)
        except UserError as exc:  # as every grpo-ablate command says it: one line, exit 2
            print(f"grpo-ablate: error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        if code:
            raise SystemExit(code)  # the driver said why
        return []

    def _launch(self, jobs: list[list[str]]) -> None:
        """Launch these jobs, at most max_batch_size at once, as Hydra's basic sweeper does."""
        size = self.max_batch_size or len(jobs)
        for start in range(0, len(jobs), size):
            batch = jobs[start:start + size]
            for job in self.launcher.launch(batch, initial_job_idx=self._job_idx):
                _ = job.return_value  # raises as the basic sweeper does when a job raised
            self._job_idx += len(batch)
