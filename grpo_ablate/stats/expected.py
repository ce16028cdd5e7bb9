"""How many runs an adaptive ladder trains, by simulation through the same looks a real sweep
takes (`take_look` on paired comparisons): a pure function of the design, the number of
arms, a planted effect per arm and the spread of one run's metric. Used by `grpo-ablate plan`
before anything trains, and by scripts/check_adaptive.py on its simulated catalogs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpo_ablate.stats.sequential import Design, Ladder, take_look
from grpo_ablate.stats.significance import paired_compare


@dataclass(frozen=True)
class LadderRuns:
    """The runs one simulated ladder trained, and the verdict each arm settled on."""

    runs: int
    settled: dict


def ladder_runs(base: np.ndarray, arms: np.ndarray, design: Design) -> LadderRuns:
    """Take the design's looks on one sweep's metrics (base: seeds; arms: arms x seeds, seed
    order matched) and count the runs trained: each arm's seeds when it settled, plus the
    baseline's, which runs as long as the longest arm."""
    names = [str(i) for i in range(len(arms))]
    ladder = Ladder(design, names)
    for n in design.rungs:
        if ladder.finished:
            break
        take_look(ladder, {a: paired_compare(arms[int(a)][:n], base[:n], design.min_effect,
                                             robust=False) for a in ladder.open})
    seeds = [s.seeds for s in ladder.settled.values()]
    return LadderRuns(runs=max(seeds) + sum(seeds), settled=dict(ladder.settled))


def simulate_sweep(rng: np.random.Generator, effects: list[float], n: int, seed_sd: float,
                   noise_sd: float, mean: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """One sweep's metrics: mean + the seed's effect (shared by every arm on that seed:
    matched seeds) + each run's noise, + the arm's planted effect."""
    seed_effect = rng.normal(0, seed_sd, n)
    base = mean + seed_effect + rng.normal(0, noise_sd, n)
    arms = mean + np.asarray(effects, float)[:, None] + seed_effect + rng.normal(
        0, noise_sd, (len(effects), n))
    return base, arms


def expected_ladder_runs(design: Design, arms: int, effect: float, seed_sd: float,
                         noise_sd: float, sims: int = 200, seed: int = 0) -> tuple[float, float]:
    """(mean runs, its Monte-Carlo standard error) of the ladder when every one of `arms`
    arms has `effect` (signs alternating), over `sims` simulated sweeps."""
    rng = np.random.default_rng(seed)
    effects = [effect if i % 2 == 0 else -effect for i in range(arms)]
    runs = np.array([ladder_runs(*simulate_sweep(rng, effects, design.rungs[-1], seed_sd,
                                                 noise_sd), design).runs for _ in range(sims)])
    return float(runs.mean()), float(runs.std(ddof=1) / np.sqrt(sims)) if sims > 1 else 0.0
