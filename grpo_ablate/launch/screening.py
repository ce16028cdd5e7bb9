"""`grpo-ablate sweep sweep=screening [factors=[A,B,...]] [resolution=4|5] [runs=N]` (or
`design=screening` beside a sweep file of your own): a two-level fractional factorial over
the factors (config/screening.py), each design point a trick file in the sweep folder's
`conf/trick/`, put on the search path and swept as `trick=` over the sweep's seeds, each seed
one replicate of the whole design. A point that is one trick alone is that trick's arm (its
runs are shared with a one-at-a-time sweep through the run cache); the all-baseline point is
the baseline. Everything is checked before the design is written: the factors, each pair,
each point."""

from __future__ import annotations

import math
from pathlib import Path

from omegaconf import OmegaConf

from grpo_ablate.config import compose, expand_jobs, override_key, specs_for
from grpo_ablate.config.fractional import draw, folded_over
from grpo_ablate.config.screening import (
    REVIEW_FACTORS,
    check_together,
    design_record,
    factors_for,
    read_design,
    write_design,
)
from grpo_ablate.errors import UserError

KEYS = ("factors", "resolution", "runs", "design")
DESIGNS = ("screening", "foldover")


def _value(overrides: list[str], key: str) -> str | None:
    given = [o.split("=", 1)[1].strip() for o in overrides if override_key(o) == key]
    return given[-1] if given else None


def _int(text: str | None, key: str, allowed: str) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise UserError(f"{key}={text}: not a whole number; allowed: {allowed}") from None


def wants_screening(overrides: list[str]) -> bool:
    return "sweep=screening" in overrides or _value(overrides, "design") is not None \
        or any(override_key(o) in ("factors", "resolution") for o in overrides)


def screening_sweep(overrides: list[str], search: list[str],
                    config_dirs: list[str] | None = None, into: Path | None = None,
                    ) -> tuple[list[str], Path | None]:
    """The overrides with the design's points as `trick=`, and the config dir holding their
    trick files (None: no screening asked for). `into`: the folder to write the design in
    instead of the sweep's (`plan`, which writes nothing of the sweep)."""
    if not wants_screening(overrides):
        return overrides, None
    design = _value(overrides, "design") or "screening"
    if design not in DESIGNS:
        raise UserError(f"design={design}: allowed: {'|'.join(DESIGNS)}")
    given = _value(overrides, "factors")
    if design == "foldover" and any(override_key(o) in ("factors", "resolution", "runs")
                                    for o in overrides):
        raise UserError("design=foldover: the factors and design are the screening's own "
                        "(its design.json); allowed: the screening sweep's own overrides "
                        "(its sweep_name) and design=foldover")
    names = [n.strip().strip("'\"") for n in given.strip("[]").split(",") if n.strip()] \
        if given else list(REVIEW_FACTORS)
    resolution = _int(_value(overrides, "resolution"), "resolution", "3, 4 or 5")
    points = _int(_value(overrides, "runs"), "runs", "the design's runs per seed, e.g. 32")
    rest = [o for o in overrides if override_key(o) not in (*KEYS, "trick")]
    if any(override_key(o) == "trick" for o in overrides):
        raise UserError("trick=: a screening sweep sets each run's tricks from its design; "
                        "allowed: factors=[A,B,...] (tricks of `grpo-ablate tricks`)")
    probe = [o for o in rest if override_key(o) != "seed"]
    (job, *_) = expand_jobs([*search, *probe, "trick=baseline", "seed=0"])
    (spec,) = specs_for(job, multirun=True)
    sweep_dir = Path(spec.sweep_dir).resolve()
    fractions = None
    if design == "foldover":
        held = read_design(sweep_dir)
        if held is None:
            raise UserError(f"design=foldover: {sweep_dir} holds no screening design "
                            "(design.json); allowed: the sweep_name (or sweep_dir) of a "
                            "screening sweep")
        factors = factors_for([f["name"] for f in held["factors"]], config_dirs)
        matrix, fractions, measured, how = folded_over(held)
    else:
        factors = factors_for(names, config_dirs)
        matrix, measured, how = draw(len(factors), resolution, points)
    full = compose(job)
    if OmegaConf.select(full, "adaptive.enabled") and design == "foldover":
        raise UserError("adaptive=true: a fold-over adds a fraction to a design whose looks "
                        "are over; allowed: design=foldover with a fixed number of seeds")
    base = OmegaConf.masked_copy(full, [k for k in full if k != "hydra"])
    check_together(factors, matrix, base)
    record = design_record(factors, matrix, measured, how, fractions)
    config_dir = write_design(into or sweep_dir, record, factors)
    points_named = list(dict.fromkeys(record["points"]))
    return [*rest, f"trick={','.join(points_named)}"], config_dir


def screening_cost(record: dict, seeds: int) -> list[str]:
    """`plan`'s lines beside its forecast: the screening's runs, and what one trick at a
    time needs for the same precision on each main effect (normal approximation: a main
    effect's se is 2 sigma / sqrt(points x seeds), an OVAT arm's paired difference
    sigma sqrt(2 / n), so n = points x seeds / 2 matched seeds per arm)."""
    k, points = len(record["factors"]), len(record["design"])
    runs = points * seeds
    n = math.ceil(points * seeds / 2)
    ovat = (k + 1) * n
    return [f"screening: {k} factors, a resolution {record['resolution']} design of {points} "
            f"points x {seeds} seed(s) = {runs} runs; each main effect from all {runs}",
            f"  one at a time, the same se on each main effect: {k + 1} arms x {n} matched "
            f"seeds = {ovat} runs ({ovat / runs:.1f}x); an adaptive ladder to {n} seeds "
            f"trains at most those {ovat}, fewer as arms settle (docs/verdicts.md, "
            "\"Adaptive sweeps\")",
            f"  the forecast above is the screening's time and GPU-hours; OVAT's runs cost "
            f"what the baseline's do: about {ovat / runs:.1f}x those"]
