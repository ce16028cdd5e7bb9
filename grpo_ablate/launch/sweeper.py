"""What grpo-ablate's Hydra sweeper (hydra_plugins/grpo_ablate_ladder) does with a multirun:
every job of the sweep composed and validated once, here, with the composer `grpo-ablate
sweep` uses; then the one driver (driver.run_sweep) launches the jobs without a record on the
configured Hydra launcher (an adaptive sweep rung by rung) and reports. A launched job carries
its validated run id (`sweep.checked_override`), so it is not checked a second time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from grpo_ablate.config import RunSpec, specs_for
from grpo_ablate.config.compose import Composer
from grpo_ablate.errors import UserError
from grpo_ablate.launch.comparisons import check_comparisons
from grpo_ablate.launch.driver import LaunchSettings, run_sweep
from grpo_ablate.report.settings import ReportSettings

_OWN_SOURCES = ("hydra", "main", "schema")  # Hydra's, grpo-ablate's conf/, structured configs


def search_overrides(config: DictConfig) -> list[str]:
    """The app's extra config folders (--config-dir, hydra.searchpath) as the search path
    override grpo-ablate's own composition takes."""
    dirs = [s.path for s in config.hydra.runtime.config_sources
            if s.schema == "file" and s.provider not in _OWN_SOURCES]
    return [f"hydra.searchpath=[{','.join(f'file://{d}' for d in dirs)}]"] if dirs else []


def report_settings(logger: dict, asked: dict) -> ReportSettings | None:
    """The sweep's report: its logger's (W&B when its runs log there), with what
    `hydra.sweeper.report` sets (a confirmation's statistics); None when nothing is set."""
    if not asked:
        return None
    allowed = [f.name for f in fields(ReportSettings)]
    unknown = sorted(set(asked) - set(allowed))
    if unknown:
        raise UserError(f"hydra.sweeper.report.{unknown[0]}: unknown; allowed: "
                        f"{', '.join(allowed)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in asked.items()}
    return replace(ReportSettings.for_logger(logger), **values)


# The sweep files whose arms a design draws (the pair, the screening, the topologies):
# `grpo-ablate sweep` writes their trick files and sweeps them; Hydra's own road cannot.
DESIGN_SWEEPS = ("pair", "screening", "leave_one_out", "add_one")


def design_road_refusal(chosen: str | None) -> UserError | None:
    if chosen not in DESIGN_SWEEPS:
        return None
    return UserError(f"sweep={chosen}: its arms are drawn by the design, which `grpo-ablate "
                     f"sweep sweep={chosen} ...` writes as trick files; Hydra's own multirun "
                     f"runs only the baseline here; allowed: grpo-ablate sweep sweep={chosen} "
                     "(docs/verdicts.md)")


def check_design_road(config: DictConfig, specs: list[RunSpec]) -> None:
    """A design's sweep file run as a plain Hydra multirun (`python -m grpo_ablate.app -m
    sweep=screening`) has only the baseline to run: refused in one line, not a report of
    nothing compared."""
    chosen = OmegaConf.select(config, "hydra.runtime.choices.sweep", default=None)
    refusal = design_road_refusal(chosen)
    if refusal and {s.arm for s in specs} <= {"baseline"}:
        raise refusal


def check_design_arguments(arguments: list[str]) -> None:
    """The same refusal before Hydra parses a plain app's command line: a design's own keys
    (factors=, tricks=) are not in the config, and Hydra's error would not say why."""
    for a in arguments:
        key, _, value = a.lstrip("+~").partition("=")
        refusal = design_road_refusal(value) if key == "sweep" else None
        if refusal:
            raise refusal


def sweep(config: DictConfig, arguments: list[str], params: dict, report: dict,
          launch: Callable[[list[list[str]]], Any]) -> int:
    """Validate every job, train what the sweep lacks, report. Returns 0, or 1 when an
    adaptive rung's runs left no record. Raises UserError before anything is written."""
    search = search_overrides(config)
    composer = Composer()  # shared by the rungs of an adaptive sweep

    def compose(overrides: list[str]) -> list[RunSpec]:
        return specs_for([*search, *overrides], multirun=True, composer=composer,
                         params=params)

    specs = compose(arguments)
    check_design_road(config, specs)
    settings = report_settings(specs[0].config["logger"], report)
    check_comparisons(specs, settings.baseline if settings else "baseline")
    sweep_dir = Path(config.hydra.sweep.dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(config, sweep_dir / "multirun.yaml")  # as Hydra's basic sweeper keeps it
    return run_sweep(specs, LaunchSettings(arguments, launch=launch, compose=compose), settings)
