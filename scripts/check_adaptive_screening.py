"""Adaptive screening against fixed screening and adaptive one-at-a-time (OVAT) at the same
precision, on simulated sweeps with known truth: family-wise error, power, expected runs.

The design: 6 tricks in a resolution IV 2^(6-2) (16 points), replicates at looks of
2 -> 3 -> 4 seeds (the fixed screening runs all 4). OVAT at equal precision: a main
effect's se is 2 sigma / sqrt(points x replicates), a paired arm's sigma sqrt(2 / n), so
n = points x replicates / 2 matched seeds per arm at each look (16 -> 24 -> 32, 7 arms with
the baseline). A run's metric: mean + the seed's shift (shared by every run of that seed) +
noise, 3 points of accuracy each, as scripts/check_adaptive.py. Scenarios: the global null
(every trick does nothing), and two tricks with +-0.025 (the others 0). Every design goes
through the code a real sweep runs (screen, screening_looks, take_look).

    python scripts/check_adaptive_screening.py [--sims 1000] [--quick: 20 sweeps]
Prints fwer_*, power_*, runs_* per design and runs_saved=<adaptive against fixed
screening, under the alternative>. Targets: FWER <= alpha within Monte-Carlo error; the
adaptive screening's power within 0.05 of fixed screening's."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grpo_ablate.config.fractional import draw  # noqa: E402
from grpo_ablate.config.screening import Factor, design_record  # noqa: E402
from grpo_ablate.report.screening import columns_of  # noqa: E402
from grpo_ablate.stats.expected import ladder_runs, simulate_sweep  # noqa: E402
from grpo_ablate.stats.screening_expected import (  # noqa: E402
    CALLED,
    adaptive_screening_run,
    fixed_screening_run,
    simulate_screening,
)
from grpo_ablate.stats.sequential import Design  # noqa: E402

SEED_SD, NOISE_SD, ALPHA, MARGIN, EFFECT = 0.03, 0.03, 0.05, 0.01, 0.025
RUNGS = (2, 3, 4)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="20 sweeps: the script runs")
    sims = 20 if ap.parse_args().quick else ap.parse_args().sims
    matrix, res, how = draw(6, 4)
    factors = [Factor(name=f"t{i}", family=f"t{i}", settings={f"k{i}": 1}) for i in range(6)]
    design = design_record(factors, matrix, res, how)
    matrix, columns = np.asarray(design["design"]), columns_of(design)
    mains = [i for i, c in enumerate(columns) if c.is_main]
    points = len(matrix)
    plan = Design(rungs=RUNGS, alpha=ALPHA, min_effect=MARGIN, futility=0.10,
                  arms=tuple(str(i) for i in range(len(columns))), scope="prompts")
    ovat = Design(rungs=tuple(points * r // 2 for r in RUNGS), alpha=ALPHA, min_effect=MARGIN,
                  futility=0.10, arms=tuple(str(i) for i in range(6)), scope="prompts")
    rng = np.random.default_rng(20261207)
    print(f"design: {points} points ({how}, resolution {res}), {len(columns)} effects; "
          f"screening replicates {RUNGS}, OVAT seeds per arm {ovat.rungs}; {sims} sweeps")
    for scenario, planted in (("null", [0.0] * 6),
                              ("two_active", [EFFECT, -EFFECT, 0.0, 0.0, 0.0, 0.0])):
        planted = np.array(planted)
        active = [j for j, i in enumerate(mains) if planted[j] != 0]
        stats = {d: {"fp": 0, "hits": 0, "runs": 0.0} for d in ("fixed", "adaptive", "ovat")}
        for _ in range(sims):
            y, pts, seeds = simulate_screening(rng, matrix, planted, RUNGS[-1], SEED_SD,
                                               NOISE_SD)
            runs = {"fixed": fixed_screening_run(y, pts, seeds, matrix, columns, ALPHA,
                                                 MARGIN),
                    "adaptive": adaptive_screening_run(y, pts, seeds, matrix, columns, plan)}
            for d, r in runs.items():
                called = [v in CALLED for v in r.verdicts]
                # a false positive: a null main effect or a chain of nulls called
                stats[d]["fp"] += any(c for j, c in enumerate(called)
                                      if j not in [mains[a] for a in active])
                stats[d]["hits"] += sum(called[mains[a]] for a in active)
                stats[d]["runs"] += points * r.replicates
            base, arms = simulate_sweep(rng, list(planted), ovat.rungs[-1], SEED_SD, NOISE_SD)
            lad = ladder_runs(base, arms, ovat)
            verdicts = [lad.settled[str(i)].verdict for i in range(6)]
            stats["ovat"]["fp"] += any(v in CALLED for i, v in enumerate(verdicts)
                                       if planted[i] == 0)
            stats["ovat"]["hits"] += sum(verdicts[i] in CALLED for i in range(6) if planted[i])
            stats["ovat"]["runs"] += lad.runs
        for d, s in stats.items():
            fwer = s["fp"] / sims
            se = math.sqrt(max(fwer * (1 - fwer), 1e-9) / sims)
            line = f"fwer_{d}[{scenario}]={fwer:.3f} (mc se {se:.3f}) runs_{d}[{scenario}]=" \
                f"{s['runs'] / sims:.1f}"
            if active:
                line += f" power_{d}[{scenario}]={s['hits'] / (sims * len(active)):.3f}"
            print(line)
        if active:
            saved = 1 - stats["adaptive"]["runs"] / stats["fixed"]["runs"]
            print(f"runs_saved={saved:.3f}")


if __name__ == "__main__":
    main()
