"""Adaptive seed ladder against fixed n with the same maximum, on simulated sweeps with
known truth: family-wise false-positive rate, power at the planted effects, mean runs.

Each simulated sweep has 24 arms (like the catalog): 16 null, 5 small effects and 3 large
ones, signs mixed. A run's metric is mean + seed effect + noise: the seed effect is shared
by every arm on that seed (matched seeds), each part 3 points of accuracy, so one run
varies by about 4.2 points (the review: the same checkpoint differs by 3-5 points). Both
designs go through the same code as a real sweep (paired t per arm; Holm; for the ladder
`take_look` with its spending boundaries).

    python scripts/check_adaptive.py [--sims 2000] [--quick: 20 sweeps, the script runs]
Prints: fwer_fixed=, fwer_adaptive=, fwer_global_null_*=, power_*, runs_*, and last
runs_saved=<fraction>. Targets: FWER <= alpha within Monte-Carlo error, power within 0.05
of fixed n, runs_saved >= 0.30.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from grpo_ablate.stats.correct import holm_adjust
from grpo_ablate.stats.expected import ladder_runs, simulate_sweep
from grpo_ablate.stats.sequential import Design
from grpo_ablate.stats.significance import paired_compare
from grpo_ablate.stats.verdicts import verdict

SEED_SD, NOISE_SD = 0.03, 0.03
EFFECTS = [0.0] * 16 + [0.04, -0.04, 0.04, -0.04, 0.04] + [0.10, -0.10, 0.10]


def simulate(rng: np.random.Generator, effects: list[float], n: int) -> tuple[np.ndarray, np.ndarray]:
    return simulate_sweep(rng, effects, n, SEED_SD, NOISE_SD)


def rejected_sign(v: str) -> int:
    return {"improves": 1, "harms": -1, "negligible": 2}.get(v, 0)


def fixed_n(base: np.ndarray, arms: np.ndarray, design: Design) -> list[int]:
    comps = [paired_compare(a, base, design.min_effect, robust=False) for a in arms]
    p_adj = holm_adjust([c.p_value for c in comps])
    return [rejected_sign(verdict(p, c.ci_low, c.ci_high, math.nan, design.alpha,
                                  design.min_effect)) for c, p in zip(comps, p_adj, strict=True)]


def adaptive(base: np.ndarray, arms: np.ndarray, design: Design) -> tuple[list[int], int]:
    done = ladder_runs(base, arms, design)
    signs = [rejected_sign(done.settled[str(a)].verdict)
             if done.settled[str(a)].reason == "efficacy" else 0 for a in range(len(arms))]
    return signs, done.runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="20 sweeps: the script runs")
    ns = ap.parse_args()
    if ns.quick:
        ns.sims = 20
    design = Design(arms=tuple(str(i) for i in range(len(EFFECTS))))
    n_max = design.rungs[-1]
    rng = np.random.default_rng(ns.seed)
    truth = np.sign(EFFECTS)
    planted = {"small": [i for i, e in enumerate(EFFECTS) if 0 < abs(e) < 0.05],
               "large": [i for i, e in enumerate(EFFECTS) if abs(e) >= 0.05]}
    nulls = [i for i, e in enumerate(EFFECTS) if e == 0]
    out = {k: {"fwer": 0, "runs": 0, "null_fwer": 0, **{c: 0 for c in planted}}
           for k in ("fixed", "adaptive")}
    for _ in range(ns.sims):
        base, arms = simulate(rng, EFFECTS, n_max)
        for kind, (signs, runs) in (("fixed", (fixed_n(base, arms, design),
                                                (len(EFFECTS) + 1) * n_max)),
                                    ("adaptive", adaptive(base, arms, design))):
            o = out[kind]
            o["runs"] += runs
            o["fwer"] += any(signs[i] != 0 for i in nulls)
            for c, idx in planted.items():
                o[c] += sum(signs[i] == truth[i] for i in idx) / len(idx)
        # the global null: every arm null, the strictest case for the family-wise rate
        base, arms = simulate(rng, [0.0] * len(EFFECTS), n_max)
        out["fixed"]["null_fwer"] += any(fixed_n(base, arms, design))
        out["adaptive"]["null_fwer"] += any(adaptive(base, arms, design)[0])
    mc = 2 * math.sqrt(design.alpha * (1 - design.alpha) / ns.sims)
    print(f"design: rungs {list(design.rungs)}, alpha {design.alpha}, futility "
          f"{design.futility}; {len(nulls)} null, {len(planted['small'])} small (4 points), "
          f"{len(planted['large'])} large (10 points) arms; run sd "
          f"{math.hypot(SEED_SD, NOISE_SD) * 100:.1f} points; {ns.sims} sweeps per design")
    for kind, o in out.items():
        print(f"fwer_{kind}={o['fwer'] / ns.sims:.4f} fwer_global_null_{kind}="
              f"{o['null_fwer'] / ns.sims:.4f} power_small_{kind}={o['small'] / ns.sims:.3f} "
              f"power_large_{kind}={o['large'] / ns.sims:.3f} runs_{kind}={o['runs'] / ns.sims:.1f}")
    print(f"alpha={design.alpha} monte_carlo_2se={mc:.4f}")
    print(f"runs_saved={1 - out['adaptive']['runs'] / out['fixed']['runs']:.3f}")


if __name__ == "__main__":
    main()
