"""How many run-steps an early-stop sweep trains, by simulation through the looks a real
sweep takes (`take_look` on paired comparisons, efficacy only before the end): a pure
function of the plan, the number of arms, a planted effect and the spread of one run's
metric. `grpo-ablate plan` prints it beside the cost without early stopping.

The effect is planted at every look as at the end: what a look sees when a trick's gain shows
from its first steps, so the most that stopping early can save at that effect. A trick that
only learns faster, or whose curve cannot be read yet (the `extrapolated` rule), stops later
or not at all (scripts/check_early_stop.py plants those curves)."""

from __future__ import annotations

import numpy as np

from grpo_ablate.stats.early_stop import StopPlan
from grpo_ablate.stats.expected import simulate_sweep
from grpo_ablate.stats.sequential import Ladder, take_look
from grpo_ablate.stats.significance import paired_compare


def stopped_share(base: np.ndarray, arms: np.ndarray, plan: StopPlan) -> float:
    """The share of the sweep's run-steps one simulated sweep trains. base: looks x seeds
    (the early looks, then the end); arms: arms x looks x seeds."""
    names = [str(i) for i in range(len(arms))]
    ladder = Ladder(plan, names)
    last = len(plan.fractions) - 1
    for k in range(last + 1):
        if ladder.finished:
            break
        take_look(ladder, {a: paired_compare(arms[int(a)][k], base[k], plan.min_effect,
                                             robust=False) for a in ladder.open},
                  stop_equivalent=k == last)
    reached = [plan.fractions[s.look - 1] for s in ladder.settled.values()]
    reached += [1.0] * len(ladder.open)
    return (sum(reached) + max(reached)) / (len(arms) + 1)


def expected_stop_share(plan: StopPlan, arms: int, effect: float, seed_sd: float,
                        noise_sd: float, sims: int = 200, seed: int = 0) -> float:
    """The mean share of the run-steps trained when each of `arms` arms has `effect` (signs
    alternating) at every look, over `sims` simulated sweeps."""
    rng = np.random.default_rng(seed)
    effects = [effect if i % 2 == 0 else -effect for i in range(arms)]
    shares = []
    for _ in range(sims):
        looks = [simulate_sweep(rng, effects, plan.seeds, seed_sd, noise_sd)
                 for _ in plan.fractions]
        base = np.array([b for b, _ in looks])
        per_arm = np.stack([a for _, a in looks], axis=1)
        shares.append(stopped_share(base, per_arm, plan))
    return float(np.mean(shares))
