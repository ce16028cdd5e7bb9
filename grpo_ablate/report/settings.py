"""What a report is asked for: the statistics' settings, where it goes, figures and W&B.
One typed object from the command line (`grpo-ablate report ...`) or from a sweep's logger
settings (the report at the end of `grpo-ablate sweep`), never argv strings between layers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from grpo_ablate.errors import UserError

if TYPE_CHECKING:
    from grpo_ablate.stats.decide import Settings


@dataclass(frozen=True)
class ReportSettings:
    metric: str = "eval/accuracy"
    direction: str | None = None      # higher | lower; None: from the metric's name
    baseline: str = "baseline"
    alpha: float = 0.05
    correction: str = "holm"          # holm | bh
    min_effect: float = 0.01
    min_effect_of: str | None = None  # None: metric units; mean | sd: relative (5%, 0.2sd)
    inert_below: float = 0.05
    scope: str | None = None          # task | prompts (stats/crossed.py); None: from the source
    runs: str | None = None           # matched | independent; None: from the source
    arms: str | None = None           # tricks | methods; None: from the arms' names
    prompts_pool: int | None = None   # the prompts that exist (caps the prompts route)
    source: str | None = None         # lm-eval: the harness's sample logs; None: folders or a CSV
    manifest: str | None = None       # lm-eval: path,arm,seed per run folder
    out: str | None = None            # None: the sweep folder, or beside a CSV
    figures: bool = True
    wandb: str | None = None          # offline | online: also the W&B summary run
    wandb_project: str = "grpo-ablate"
    wandb_entity: str | None = None
    # Folders whose single-trick runs a combined arm's additivity reads (a confirmation's
    # sweep): read for that alone, never for verdicts.
    components_from: tuple[str, ...] = ()
    beside: str | None = None  # a screening report: an OVAT report of the same recipe beside it
    verbose: bool = False  # the terminal gets the whole report, not its summary
    design: str | None = None  # a two-level experiment's table (report/design_table.py)
    factors: tuple[str, ...] = ()  # its factor columns (default: all but the metric, block)

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise UserError(f"--alpha {self.alpha}: must be in (0, 1)")
        if not self.min_effect > 0:
            raise UserError(f"--min-effect {self.min_effect}: must be > 0")
        if self.prompts_pool is not None and self.prompts_pool < 2:
            raise UserError(f"--prompts-pool {self.prompts_pool}: must be at least 2")
        if not 0 <= self.inert_below < 1:
            raise UserError(f"--inert-below {self.inert_below}: must be in [0, 1)")

    @classmethod
    def for_logger(cls, logger: dict) -> ReportSettings:
        """A sweep's own report: W&B when its runs log to W&B (offline or online)."""
        if logger.get("backend") == "wandb" and logger.get("mode") != "disabled":
            return cls(wandb=logger["mode"], wandb_project=logger["project"])
        return cls()

    def stats(self, runs: str = "matched", scope: str = "task",
              arms: str = "tricks") -> Settings:
        """The statistics stage's part, with how the results were made
        (results/provenance.py) where the user left it open."""
        from grpo_ablate.stats.decide import Settings  # heavy: numpy, pandas, scipy

        return Settings(metric=self.metric, baseline=self.baseline, alpha=self.alpha,
                        correction=self.correction, min_effect=self.min_effect,
                        min_effect_of=self.min_effect_of, direction=self.direction,
                        inert_below=self.inert_below, scope=self.scope or scope,
                        runs=self.runs or runs, arms=self.arms or arms)


MIN_EFFECT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(%|sd)?\s*$")


def parse_min_effect(text: str) -> tuple[float, str | None]:
    """`--min-effect`: 0.01 (metric units), 5% (of the baseline's |mean|), 0.2sd (of the
    baseline's sd over runs)."""
    found = MIN_EFFECT.match(str(text))
    if not found:
        raise UserError(f"--min-effect {text}: not a margin; allowed: a number in the metric's "
                        "units (0.01), a percentage of the baseline's mean (5%), or a multiple "
                        "of the baseline's sd over runs (0.2sd)")
    value, unit = float(found.group(1)), found.group(2)
    if unit == "%":
        return value / 100, "mean"
    return value, "sd" if unit == "sd" else None
