"""grpo-ablate's sweeper (the default `hydra/sweeper`) for a plain Hydra app
(`python -m grpo_ablate.app -m ...`): it hands the sweep to grpo-ablate's one driver,
grpo_ablate.launch.driver.run_sweep, which `grpo-ablate sweep` calls too. A fixed sweep is
one launch of its jobs on the configured launcher; with `adaptive.enabled=true` the
pre-declared seed ladder runs one launch per rung, as the Optuna and Ax sweepers decide their
next batch from results; then the report. Hydra loads sweepers only from the hydra_plugins
package."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf


class LadderSweeper(BasicSweeper):
    def sweep(self, arguments: list[str]) -> Any:
        from grpo_ablate.errors import UserError
        from grpo_ablate.launch.driver import LaunchSettings, run_sweep  # pandas, scipy: here

        self._job_idx = 0
        every = [*self._parse_config(), *arguments]  # the sweep file's params, then the line's
        try:
            specs = self._specs(every)
        except UserError as exc:  # as `grpo-ablate sweep` says it: one line, exit 2
            print(f"grpo-ablate: error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        if run_sweep(specs, LaunchSettings(every, launch=self._launch, compose=self._specs)):
            raise RuntimeError("the adaptive sweep stopped: a rung's runs left no record")
        return []

    def _jobs(self, overrides: list[str]) -> list[list[str]]:
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        return self.split_arguments(parser.parse_overrides(overrides), None)[0]

    def _specs(self, overrides: list[str]) -> list:
        """Every job these overrides name, composed and validated as the jobs will be."""
        from grpo_ablate.config import check_layout, validate

        specs = [validate(self.hydra_context.config_loader.load_sweep_config(self.config, job))
                 for job in self._jobs(overrides)]
        check_layout([(s.arm, s.config) for s in specs])
        return specs

    def _launch(self, overrides: list[str]) -> None:
        jobs = self._jobs(overrides)
        for job in self.launcher.launch(jobs, initial_job_idx=self._job_idx):
            _ = job.return_value  # raises as the basic sweeper does when a job raised
        self._job_idx += len(jobs)
