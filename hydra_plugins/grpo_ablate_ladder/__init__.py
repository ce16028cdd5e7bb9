"""grpo-ablate's sweeper (the default `hydra/sweeper`): Hydra's basic sweeper, except that a
multirun with `adaptive.enabled=true` runs the pre-declared seed ladder, one launch per rung
on whatever launcher is configured, as the Optuna and Ax sweepers decide their next batch
from results. Hydra loads sweepers only from the hydra_plugins package; the ladder itself is
grpo_ablate.launch.adaptive.run_ladder, which `grpo-ablate sweep` drives the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf


class LadderSweeper(BasicSweeper):
    def sweep(self, arguments: list[str]) -> Any:
        from grpo_ablate.runtime import driven_by_cli

        adaptive = OmegaConf.select(self.config, "adaptive")
        # `grpo-ablate sweep` runs the ladder itself and hands Hydra one rung at a time.
        if driven_by_cli() or not (
                isinstance(adaptive, DictConfig) and adaptive.get("enabled") is True):
            return super().sweep(arguments)
        from grpo_ablate.launch.adaptive import run_ladder, swept_key  # pandas, scipy: here only

        self._job_idx = 0
        every = [*self._parse_config(), *arguments]  # the sweep file's params, then the line's
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        code = run_ladder(self._specs(every),
                          [o for o in every if swept_key(o) not in ("trick", "seed")],
                          compose=self._specs, launch=self._launch)
        if code:
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
