"""An adaptive sweep: its plan, its next rung from the records on disk, and the loop that
runs the rungs.

The plan (rungs, boundaries, alpha spent per look, the arms) is written to the sweep folder
before the first run and cannot change afterwards: a ladder redesigned after looking at
results would void its error rates. Which runs come next is recomputed from the records
every time (`next_rung`), never held in memory, so a killed sweep resumes like any other,
under any launcher: each rung is one Hydra multirun of the open arms x the rung's seeds.
`run_ladder` is that loop; `grpo-ablate sweep` drives it with one Hydra call per rung, and a
plain Hydra app (`python -m grpo_ablate.app -m adaptive.enabled=true`) through its sweeper
(hydra_plugins/grpo_ablate_ladder), which launches each rung on the configured launcher.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_ablate.config import model_label
from grpo_ablate.errors import UserError
from grpo_ablate.launch import sweep
from grpo_ablate.results.plan_file import BASELINE, PLAN_NAME, write_plan
from grpo_ablate.results.table import load_results
from grpo_ablate.runtime import say
from grpo_ablate.stats.ladder_replay import replay_ladder
from grpo_ablate.stats.sequential import Design
from grpo_ablate.stats.stratum import Stratum
from grpo_ablate.stats.verdicts import default_direction


def design_from_config(block: dict, arms: list[str]) -> Design:
    return Design(rungs=tuple(block["rungs"]), alpha=float(block["alpha"]),
                  min_effect=float(block["min_effect"]), futility=float(block["futility"]),
                  metric=block["metric"], arms=tuple(arms), scope=block["scope"])


@dataclass(frozen=True)
class Rung:
    """The runs an adaptive sweep needs next: the open arms (and the baseline) x seeds."""

    look: int                  # 0-based look these runs complete
    arms: tuple[str, ...]      # open arms in some stratum, baseline first
    seeds: tuple[int, ...]     # seeds below the rung that some of those arms lack

    def overrides(self) -> list[str]:
        return [f"trick={','.join(self.arms)}", f"seed={','.join(map(str, self.seeds))}"]


def next_rung(sweep_dir: Path, design: Design, strata: list[tuple[str, str]],
              direction: str | None = None) -> Rung | None:
    """The first look, over all strata, whose runs are not all recorded; None when every
    stratum's ladder is finished. Recomputed from the records each time."""
    prompts = None
    if any(Path(sweep_dir).glob("runs/*/record.json")):
        df, _, prompts = load_results([Path(sweep_dir)], with_prompts=True)
    else:  # nothing recorded yet: the first rung
        df = pd.DataFrame(columns=["arm", "seed", "model", "task", "status"])
    df = df[df["arm"].isin([BASELINE, *design.arms])]
    direction = direction or default_direction(design.metric)
    wanted: dict[int, set[str]] = {}
    for model, task in strata:
        sub = df[(df["model"] == model) & (df["task"] == task)]
        if sub.empty or BASELINE not in set(sub["arm"]):
            wanted.setdefault(0, set()).update(design.arms)
            continue
        metrics = [design.metric] if design.metric in sub.columns else []
        mine = None if prompts is None else \
            prompts[(prompts["model"] == model) & (prompts["task"] == task)]
        ladder, pending = replay_ladder(Stratum(sub, BASELINE, metrics), design, direction,
                                        mine if mine is not None and len(mine) else None)
        if pending is not None:
            wanted.setdefault(pending, set()).update(ladder.open)
    if not wanted:
        return None
    look = min(wanted)
    arms = (BASELINE, *[a for a in design.arms if a in wanted[look]])
    n = design.rungs[look]
    have = {(a, int(s)) for a, s in zip(df["arm"], df["seed"], strict=True)} if strata and \
        len(strata) == 1 else set()
    seeds = tuple(s for s in range(n) if any((a, s) not in have for a in arms))
    return Rung(look, arms, seeds)


def failed_runs(sweep_dir: Path, design: Design, pending: Rung | None) -> dict[str, list[int]]:
    """Seeds per arm whose record says failed (a crash, a Slurm job cancelled), outside the
    rung about to run: a look counts them as missing, so they are retried once per command,
    as a fixed sweep retries its failed runs, and the looks are replayed with them."""
    if not any(Path(sweep_dir).glob("runs/*/record.json")):
        return {}
    df, _ = load_results([Path(sweep_dir)])
    df = df[(df["status"] == "failed") & df["arm"].isin([BASELINE, *design.arms])]
    out: dict[str, list[int]] = {}
    for arm, seed in sorted({(a, int(x)) for a, x in zip(df["arm"], df["seed"], strict=True)}):
        if pending is None or arm not in pending.arms or seed not in pending.seeds:
            out.setdefault(arm, []).append(seed)
    return out


def swept_key(override: str) -> str:
    """The config key an override sets (`+trick=a,b` -> trick)."""
    return override.split("=")[0].lstrip("+~")


def arms_against_the_baseline(specs: list, what: str, scheduler: str) -> list[str]:
    """The arms (less the baseline) of a sweep whose looks `scheduler` takes: the baseline
    and at least one trick, each compared with the baseline, in one folder (the plan's)."""
    arms = list(dict.fromkeys(s.arm for s in specs))
    if BASELINE not in arms or len(arms) < 2:
        raise UserError(f"{what}: the sweep's arms are {', '.join(arms)}; allowed: the "
                        "baseline and at least one trick")
    against = sorted({(s.arm, s.config["trick"]["against"]) for s in specs
                      if s.config["trick"].get("against")})
    if against:
        arm, other = against[0]
        raise UserError(f"{what}: trick={arm} is compared with {other} (its trick.against), "
                        f"which {scheduler} does not schedule; allowed: a fixed-n sweep for "
                        "arms compared with another arm than the baseline")
    if len({str(s.sweep_dir) for s in specs}) > 1:
        raise UserError(f"{what}: the sweep writes to several folders; allowed: one "
                        "sweep_dir per sweep (its plan lives there)")
    return [a for a in arms if a != BASELINE]


def run_ladder(specs: list, fixed: list[str], compose: Callable[[list[str]], list],
               launch: Callable[[list[list[str]]], Any]) -> int:
    """Run an adaptive sweep to its end. `specs` are every job the sweep names (their arms,
    strata and folder), `fixed` its overrides other than trick and seed; `compose` turns
    overrides into the RunSpecs they name and `launch` runs jobs on the Hydra launcher.
    Returns 0, or 1 when a rung's runs left no record (held by another sweep, or killed)."""
    arms = arms_against_the_baseline(specs, "adaptive=true", "the ladder")
    design = design_from_config(specs[0].config["adaptive"], arms)
    sweep_dir = specs[0].sweep_dir
    strata = sorted({(model_label(s.config), s.config["task"]["name"]) for s in specs})
    plan = write_plan(sweep_dir, design)
    say(f"adaptive: {len(arms)} arms, rungs {' -> '.join(map(str, design.rungs))} seeds, "
              f"alpha {design.alpha} on {design.metric}; boundary p per look at alpha/arms: "
              + ", ".join(f"{r['p_boundary']:.2g}" for r in plan["looks"])
              + f" (plan: {sweep_dir / PLAN_NAME})")
    def train(overrides: list[str], what: str) -> int:
        """Launch the runs these overrides name that have no final record; how many."""
        return sweep.launch_unfinished(
            compose(overrides), launch,
            lambda todo, reused: f"{what}: {todo} to train"
            + (f", {reused} reused from the run cache" if reused else ""))

    t0, trained, last = time.perf_counter(), 0, None
    for arm, seeds in failed_runs(sweep_dir, design, next_rung(sweep_dir, design, strata)).items():
        trained += train([*fixed, f"trick={arm}", f"seed={','.join(map(str, seeds))}"],
                         f"adaptive: retrying the failed runs of {arm}, seeds {seeds}")
    while (rung := next_rung(sweep_dir, design, strata)) is not None:
        if rung == last:  # the launcher ran, yet the runs left no record
            say(f"grpo-ablate: adaptive look {rung.look + 1}: runs of "
                      f"{', '.join(rung.arms)} on seeds {list(rung.seeds)} left no record (held "
                      "by another sweep, or killed); run the same command again to resume")
            return 1
        trained += train([*fixed, *rung.overrides()],
                         f"adaptive look {rung.look + 1}/{len(design.rungs)}: "
                         f"{len(rung.arms) - 1} open arms + baseline, seeds < "
                         f"{design.rungs[rung.look]}")
        last = rung
    say(f"adaptive sweep finished in {time.perf_counter() - t0:.0f}s ({trained} runs "
              "trained this time)")
    return 0
