"""`grpo-ablate confirm PATH`: the recommended recipe of a finished sweep run against its
baseline, over the baseline's matched seeds, with the sweep's own model, task, recipe,
launcher and run cache (the baseline's runs are reused from it), and for an adaptive sweep
the same ladder. The runs go to `PATH/confirm/` under the sweep's name (its W&B group); the
recipe's trick file is kept beside them (`PATH/confirm/conf/trick/recipe_<sweep>.yaml`). The
report there gives the recipe's verdict against the baseline under the sweep's statistics
settings, and whether its tricks add up (their single-trick runs read from PATH)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from grpo_ablate.config import computation_key, specs_for
from grpo_ablate.config.combination import Combination
from grpo_ablate.errors import UserError
from grpo_ablate.records import atomic_write_text, scan_records
from grpo_ablate.report.recipe import read_report, recipe_comment, recipe_name, recipe_of

CONFIRM_DIR = "confirm"
# What a confirmation sets itself: the arms, the seeds, the folder.
CONFIRM_SETS = ("trick", "seed", "sweep_name", "sweep_dir", "out_root")


@dataclass(frozen=True)
class Confirmation:
    recipe: Combination
    trick_file: Path
    trick_text: str                # the trick file, its header saying where it came from
    overrides: list[str]           # the confirmation sweep's, the recipe's config dir aside
    config_dir: Path
    sweep_dir: Path
    report: dict = field(default_factory=dict)  # ReportSettings fields for its report


def sweep_overrides(path: Path) -> list[str]:
    """The overrides the sweep was launched with (its multirun.yaml), less what a
    confirmation sets itself."""
    file = path / "multirun.yaml"
    if not file.is_file():
        raise UserError(f"confirm {path}: no multirun.yaml; allowed: a sweep folder that "
                        "`grpo-ablate sweep` wrote")
    task = ((yaml.safe_load(file.read_text()) or {}).get("hydra") or {}).get(
        "overrides", {}).get("task") or []
    return [o for o in task if o.split("=", 1)[0].lstrip("+~") not in CONFIRM_SETS]


def baseline_seeds(path: Path, baseline: str) -> tuple[list[int], list]:
    records = [r for r in scan_records(path)[0] if r.arm == baseline and r.status == "completed"]
    if not records:
        raise UserError(f"confirm {path}: no completed run of the baseline; allowed: a sweep "
                        "folder with the baseline's records")
    return sorted({r.seed for r in records}), records


def confirmation(path: Path, extra: list[str], config_dirs: list[str],
                 search: list[str]) -> Confirmation:
    """Compose the recipe and the confirmation sweep; refuse in one line, before anything
    is written, what cannot be confirmed. `search`: the user's config dirs as a Hydra
    search-path override."""
    path = Path(path).resolve()
    report = read_report(path)
    name = recipe_name(path)
    combined = recipe_of(report, name, config_dirs)
    seeds, base_records = baseline_seeds(path, report["baseline"])
    sweep_dir = path / CONFIRM_DIR
    config_dir = sweep_dir / "conf"
    given = sweep_overrides(path)
    own_seeds = any(o.split("=", 1)[0] == "seed" for o in extra)
    overrides = [*given, *extra, f"sweep_dir={sweep_dir}", f"out_root={path.parent}"]
    # The baseline's config must come out as the sweep's: else its runs are another recipe's.
    (probe,) = specs_for([*search, *overrides, "trick=baseline", f"seed={seeds[0]}"],
                         multirun=True)
    keys = {computation_key(r.config) for r in base_records if r.config}
    if keys and computation_key(probe.config) not in keys:
        raise UserError(f"confirm {path}: the sweep's overrides ({' '.join(given) or 'none'}) "
                        "no longer compose its baseline's config; allowed: add the overrides "
                        "that differ after PATH")
    adaptive = probe.config["adaptive"]["enabled"]
    arms = [f"trick=baseline,{name}"]
    if not adaptive and not own_seeds:
        arms.append(f"seed={','.join(map(str, seeds))}")
    return Confirmation(
        recipe=combined, trick_file=config_dir / "trick" / f"{name}.yaml",
        trick_text=combined.trick_yaml(recipe_comment(report, path, combined)),
        overrides=[*overrides, *arms], config_dir=config_dir, sweep_dir=sweep_dir,
        report={"metric": report["metric"], "baseline": report["baseline"],
                "alpha": report["alpha"], "correction": report["correction"],
                "min_effect": report["min_effect"], "inert_below": report["inert_below"],
                "scope": report.get("scope", "task"), "components_from": (str(path),)})


def write_trick_file(c: Confirmation) -> bool:
    """The recipe's trick file in the confirmation's config dir; False when it was there
    already with the same settings (a confirmation run again)."""
    if c.trick_file.is_file() and \
            yaml.safe_load(c.trick_file.read_text()) == yaml.safe_load(c.trick_text):
        return False
    atomic_write_text(c.trick_file, c.trick_text)
    return True
