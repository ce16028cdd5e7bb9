"""Every arm of a sweep is compared with an arm: the baseline, or its trick file's `against`
(the arm its method acts beside: off-policy data, a token-level loss). A sweep that does not
run that arm would train every run and then compare the arm with the wrong one, or skip the
report: it is refused before anything trains, in one line naming what to add, unless the
sweep folder already holds runs of it (`grpo-ablate sweep ... +against` adds them)."""

from __future__ import annotations

import json
from pathlib import Path

from grpo_ablate.config import RunSpec
from grpo_ablate.config.catalog import load_catalog
from grpo_ablate.errors import UserError


def recorded_arms(sweep_dir: Path) -> set[str]:
    """The arms a sweep folder already holds records of (any status)."""
    arms = set()
    for path in sweep_dir.glob("runs/*/record.json"):
        try:
            arms.add(json.loads(path.read_text())["config"]["trick"]["id"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a record being written, or not one: the report says so
    return arms


def missing_comparisons(specs: list[RunSpec], baseline: str = "baseline") -> dict[str, str]:
    """{arm: the arm it is compared with} for each arm whose comparison arm neither the sweep
    nor its folder has; the report needs the baseline too ({baseline: baseline} when it is
    missing). None for a sweep of its baseline alone."""
    arms = {s.arm for s in specs}
    against = {s.arm: s.config["trick"].get("against") or baseline for s in specs
               if s.arm != baseline}
    needed = {a: b for a, b in against.items() if b not in arms}
    if against and baseline not in arms:
        needed[baseline] = baseline
    if not needed:
        return {}
    on_disk = set().union(*(recorded_arms(d) for d in {s.sweep_dir for s in specs}))
    return {a: b for a, b in sorted(needed.items()) if b not in on_disk}


def check_comparisons(specs: list[RunSpec], baseline: str = "baseline") -> None:
    """Refuse, in one line, a sweep that lacks an arm one of its arms is compared with."""
    missing = missing_comparisons(specs, baseline)
    if not missing:
        return
    add = sorted(set(missing.values()))
    pairs = [f"{a} with {b}" for a, b in missing.items() if a != baseline]
    said = "; ".join(pairs[:3]) + ("; ..." if len(pairs) > 3 else "")
    unsaid = baseline in missing and baseline not in [b for a, b in missing.items() if a != baseline]
    what = (f"the sweep compares {said}" if pairs else "the sweep") + \
        (f"{' and' if pairs else ''} reports against {baseline}" if unsaid else "")
    raise UserError(f"{what}, which it does not run; allowed: add trick=...,{','.join(add)} "
                    "or +against")


def with_comparison_arms(tricks: list[str], baseline: str = "baseline",
                         config_dirs: list[str] | None = None) -> list[str]:
    """The arms, then the arms they are compared with (the baseline first), each once."""
    against = {t["id"]: t.get("against") for t in load_catalog(config_dirs)}
    return list(dict.fromkeys([baseline, *tricks, *(against[t] for t in tricks
                                                     if against.get(t))]))
