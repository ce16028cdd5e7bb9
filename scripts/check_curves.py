"""The curve fit's identifiability rule and the ceiling/speed verdicts, on planted learning
curves with known truth (stats/curves.py, stats/curve_verdicts.py).

Planted families, each R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) on 10 evaluations over the
budget, R0 = 0.5, each evaluation with noise sd 0.015 (the tiny policy's held-out accuracy
varies by about that between evaluations of nearby checkpoints) and each seed's own A
(sd 0.01) and C_mid (sd 15%):
- bent: C_mid at 25% of the budget (the curve flattens inside it), A = 0.75;
- late: C_mid at 60% of the budget, A = 0.75 (bending at the end);
- unbent: C_mid at 4x the budget (a near-straight rise: A is not in the data);
- flat: no learning (A = R0).
Part 1, each rule (the largest standard error of A taken as read off the data, with and
without the midpoint inside the budget) on 400 fits per family: the share called
identifiable, and among those the share whose A misses the truth by more than 0.05.
Part 2, verdicts on 5 seeds per arm, Holm over the arms and both parameters, 300 sweeps:
- speed only: the arm's C_mid half the baseline's, the same A: "raises/lowers the
  ceiling" is a false call (its rate is the ceiling's error), "learns faster" the power;
- ceiling only: A + 0.06, the same C_mid;
- crossing: a slow start with a higher ceiling (C_mid x 2, A + 0.06);
- null: the same curve: any call is an error.

    python scripts/check_curves.py [--quick: 40 fits, 30 sweeps]
Prints identifiable[family,rule]=, wrong_ceiling[family,rule]=, then per scenario
ceiling_false_calls=, speed_power= (or ceiling_power=), wrong_direction=."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grpo_ablate.stats import curves  # noqa: E402
from grpo_ablate.stats.curve_verdicts import ceiling_or_speed, run_fits  # noqa: E402

R0, A, NOISE, SEED_A, SEED_MID = 0.5, 0.75, 0.015, 0.01, 0.15
COMPUTE = np.linspace(0, 1000, 11)  # the start and 10 evaluations
FAMILIES = {"bent": (A, 250.0), "late": (A, 600.0), "unbent": (A, 4000.0), "flat": (R0, 250.0)}
RULES = {f"se<={se} mid<={'-' if at is None else f'{at:g}budget'} F={'-' if bp is None else bp}":
         (se, at, bp) for se in (0.02, 0.03, 0.05) for at in (None, 1.0, 0.5)
         for bp in (None, 0.05, 0.01)}
WRONG_MAX = 0.05  # of all fits of a family, the share given an A that misses by over 0.05


def curve(rng: np.random.Generator, a: float, mid: float, b: float = 2.0) -> np.ndarray:
    a = a + rng.normal(0, SEED_A) if a != R0 else a
    mid = mid * float(np.exp(rng.normal(0, SEED_MID)))
    c = np.maximum(COMPUTE, 1e-9)
    v = R0 + (a - R0) / (1 + (mid / c) ** b) + rng.normal(0, NOISE, len(c))
    v[0] = R0 + rng.normal(0, NOISE)
    return v


def part_one(rng: np.random.Generator, fits: int) -> None:
    """Each rule's yield and error per family; the chosen rule: the largest yield on the
    bent family among the rules that give a wrong A (off by more than 0.05) on at most
    WRONG_MAX of any family's fits."""
    raws = {family: [curves.fit_raw(COMPUTE, curve(rng, a, mid)) for _ in range(fits)]
            for family, (a, mid) in FAMILIES.items()}
    scores = {}
    for rule, (se_max, bend_at, bend_p) in RULES.items():
        worst, yields = 0.0, {}
        for family, (a, _) in FAMILIES.items():
            called = [f for f in (curves.judge(r, se_max, bend_at, bend_p)
                                  for r in raws[family]) if f.identifiable]
            wrong = sum(abs(f.asymptote - a) > 0.05 for f in called) / fits
            yields[family] = len(called) / fits
            worst = max(worst, wrong)
            print(f"identifiable[{family},{rule}]={len(called) / fits:.3f} "
                  f"wrong_number[{family},{rule}]={wrong:.3f}")
        scores[rule] = (worst, yields["bent"])
    fine = {r: y for r, (w, y) in scores.items() if w <= WRONG_MAX}
    chosen = max(fine, key=fine.get) if fine else min(scores, key=lambda r: scores[r][0])
    default = (curves.SE_MAX, curves.BEND_AT, curves.BEND_P)
    print(f"chosen_rule={chosen} (worst wrong-number rate {scores[chosen][0]:.3f}, bent yield "
          f"{scores[chosen][1]:.3f})")
    print(f"defaults_match={RULES[chosen] == default}")


def part_two(rng: np.random.Generator, sweeps: int, seeds: int = 5) -> None:
    scenarios = {"speed_only": (0.0, 0.5), "ceiling_only": (0.06, 1.0),
                 "crossing": (0.06, 2.0), "null": (0.0, 1.0)}
    for name, (gain, speed) in scenarios.items():
        counts = {"ceiling_calls": 0, "ceiling_wrong": 0, "speed_calls": 0,
                  "speed_wrong": 0, "unidentified": 0}
        for _ in range(sweeps):
            rows = []
            for arm, a, mid in (("baseline", A, 250.0), ("trick", A + gain, 250.0 * speed)):
                for s in range(seeds):
                    v = curve(rng, a, mid)
                    rows += [{"model": "m", "task": "t", "arm": arm, "seed": s, "step": i,
                              "compute": c, "value": x} for i, (c, x) in
                             enumerate(zip(COMPUTE, v, strict=True))]
            fits = run_fits(pd.DataFrame(rows))
            (row,) = ceiling_or_speed(fits, "baseline", 0.05, 0.02)
            c, s = row["ceiling"]["verdict"], row["speed"]["verdict"]
            counts["unidentified"] += c == "not_identifiable"
            called_c = c in ("improves", "harms")
            counts["ceiling_calls"] += called_c
            counts["ceiling_wrong"] += called_c and (gain == 0 or (c == "harms") == (gain > 0))
            called_s = s in ("improves", "harms")
            counts["speed_calls"] += called_s
            faster = speed < 1
            counts["speed_wrong"] += called_s and (speed == 1 or (s == "improves") != faster)
        n = sweeps
        print(f"scenario[{name}]: ceiling_calls={counts['ceiling_calls'] / n:.3f} "
              f"ceiling_false_or_wrong={counts['ceiling_wrong'] / n:.3f} "
              f"speed_calls={counts['speed_calls'] / n:.3f} "
              f"speed_false_or_wrong={counts['speed_wrong'] / n:.3f} "
              f"not_identifiable={counts['unidentified'] / n:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(20261207)
    part_one(rng, 40 if args.quick else 400)
    part_two(rng, 30 if args.quick else 300)


if __name__ == "__main__":
    main()
