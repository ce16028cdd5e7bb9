"""What an adaptive screening trains and calls, by simulation through the same looks a real
sweep takes (stats/screening_looks.py): a pure function of the design, the plan, planted
main effects and the spread of one run's metric. `grpo-ablate plan` uses it before anything
trains; scripts/check_adaptive_screening.py compares it with fixed screening and OVAT."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpo_ablate.stats.screening import Term, screen
from grpo_ablate.stats.screening_looks import screening_looks
from grpo_ablate.stats.sequential import Design

CALLED = ("improves", "harms", "interacts", "aliased", "negligible")


@dataclass(frozen=True)
class ScreeningRun:
    """One simulated screening: the replicates trained and each effect's verdict."""

    replicates: int
    verdicts: tuple[str, ...]


def simulate_screening(rng: np.random.Generator, matrix: np.ndarray, mains: np.ndarray,
                       replicates: int, seed_sd: float, noise_sd: float,
                       mean: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, point index, seed) of every point x replicate: mean + the seed's shift (shared
    by every point of that seed) + half of each on factor's planted effect (an effect is
    the mean at + minus the mean at -) + each run's noise."""
    matrix = np.asarray(matrix, float)
    points = np.tile(np.arange(len(matrix)), replicates)
    seeds = np.repeat(np.arange(replicates), len(matrix))
    y = mean + rng.normal(0, seed_sd, replicates)[seeds] + matrix[points] @ (mains / 2) \
        + rng.normal(0, noise_sd, len(points))
    return y, points, seeds


def adaptive_screening_run(y: np.ndarray, points: np.ndarray, seeds: np.ndarray,
                           matrix: np.ndarray, columns: list[Term], plan: Design,
                           direction: str = "higher") -> ScreeningRun:
    names = [str(i) for i in range(len(columns))]
    looks = screening_looks(y, np.asarray(matrix)[points], points, seeds, seeds.astype(str),
                            len(matrix), columns, names, plan, plan.min_effect, direction)
    rows = looks.settled_rows(names)
    return ScreeningRun(plan.rungs[len(looks.rows) - 1], tuple(r["verdict"] for r in rows))


def fixed_screening_run(y: np.ndarray, points: np.ndarray, seeds: np.ndarray,
                        matrix: np.ndarray, columns: list[Term], alpha: float, margin: float,
                        direction: str = "higher") -> ScreeningRun:
    _, rows = screen(y, np.asarray(matrix)[points], seeds.astype(str), columns, alpha, margin,
                     direction)
    return ScreeningRun(int(seeds.max()) + 1, tuple(r["verdict"] for r in rows))


def expected_screening_runs(matrix: np.ndarray, columns: list[Term], plan: Design,
                            effect: float, seed_sd: float, noise_sd: float, sims: int = 200,
                            seed: int = 0) -> tuple[float, float]:
    """(mean runs, its Monte-Carlo standard error) of the adaptive screening when every
    main effect is `effect` (signs alternating), over `sims` simulated screenings."""
    rng = np.random.default_rng(seed)
    k = np.asarray(matrix).shape[1]
    mains = np.array([effect if i % 2 == 0 else -effect for i in range(k)])
    runs = np.array([
        len(matrix) * adaptive_screening_run(
            *simulate_screening(rng, matrix, mains, plan.rungs[-1], seed_sd, noise_sd),
            matrix, columns, plan).replicates for _ in range(sims)], float)
    return float(runs.mean()), float(runs.std(ddof=1) / np.sqrt(sims)) if sims > 1 else 0.0
