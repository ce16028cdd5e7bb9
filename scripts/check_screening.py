"""Screening designs through the report's own analysis (report/screening.py), on planted
normal data: 12 two-level factors (the review's families), a resolution IV fraction of 32
points drawn by pyDOE3, at 32 runs (one replicate: Lenth's PSE) and 64 runs (two seeds as
blocks: the residual error). Each run: the planted means + a seed effect (sd 0.5) + noise
(sd 1).

1. Family-wise error under the global null: the share of studies with any effect called
   (Holm-adjusted p < alpha), at most alpha within Monte Carlo error (2 SE).
2. Power under planted main effects and two-trick interactions, against one-at-a-time
   (13 arms, matched seeds, paired t, Holm over 12 arms) at the same number of runs
   (floor(runs / 13) seeds per arm), on OVAT's own estimand (each trick on the baseline);
   and the runs OVAT needs to match the screening's power on each main effect. OVAT cannot
   estimate an interaction: its power there is printed as n/a.
3. A resolution III fraction (16 points x 2 seeds) with an interaction planted on the
   column a main effect shares: the report must call that main `aliased`, naming the
   interaction, never improves or harms.
Prints `fwer[...]`, `screening_power[...]`, `ovat_power[...]`, `runs_for_equal_power[...]`
and `aliased[...]` lines and ends with `screening=ok`, or names the failure.

    python scripts/check_screening.py [--sims 2000] [--quick]
`--quick`: a few studies per check, so the script runs; its figures mean little then.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
import pandas as pd
from scipy import stats

from grpo_ablate.config.fractional import draw
from grpo_ablate.config.screening import REVIEW_FACTORS, Factor, design_record
from grpo_ablate.report.screening import screening_report
from grpo_ablate.stats.correct import holm_adjust

ALPHA = 0.05
SEED_SD, NOISE_SD = 0.5, 1.0
NAMES = list(REVIEW_FACTORS)
FACTORS = [Factor(name=n, family=n, settings={"k": n}) for n in NAMES]
INDEX = {n: i for i, n in enumerate(NAMES)}
# Planted: three main effects and two interactions of temperature (the review's conditional
# tricks: the entropy bonus with temperature, temperature traded off with group size).
MAINS = {"kl_off": 1.2, "grad_norm_off": -1.2, "temperature_0.6": 1.2}
INTERACTIONS = {("entropy_coef_0.01", "temperature_0.6"): 1.2,
                ("group_size_8", "temperature_0.6"): -1.2}


def means(levels: np.ndarray, mains: dict, inter: dict) -> np.ndarray:
    """The planted mean of each row: an effect e is e/2 per -1/+1 unit."""
    mu = np.zeros(len(levels))
    for n, e in mains.items():
        mu += e / 2 * levels[:, INDEX[n]]
    for (a, b), e in inter.items():
        mu += e / 2 * levels[:, INDEX[a]] * levels[:, INDEX[b]]
    return mu


def study(rng, design: dict, replicates: int, mains: dict, inter: dict) -> dict:
    levels = np.asarray(design["design"])
    rows = []
    for seed in range(replicates):
        y = means(levels, mains, inter) + rng.normal(0, SEED_SD) + rng.normal(
            0, NOISE_SD, len(levels))
        rows += [{"arm": p, "seed": seed, "status": "completed", "score": float(v)}
                 for p, v in zip(design["points"], y, strict=True)]
    return screening_report(pd.DataFrame(rows), design, "score", ALPHA, 0.1, None, "higher")


def found(rep: dict) -> dict[str, bool]:
    """Each planted effect found: a main called in its direction, an interaction's chain
    called `interacts`."""
    by_head = {r["name"].split(" = ")[0]: r for r in rep["effects"]}
    out = {n: by_head[n]["verdict"] == ("improves" if e > 0 else "harms")
           for n, e in MAINS.items()}
    for a, b in INTERACTIONS:
        chain = next(r for r in rep["effects"] if f"{a} x {b}" in r["name"]
                     or f"{b} x {a}" in r["name"])
        out[f"{a} x {b}"] = chain["verdict"] == "interacts"
    return out


def ovat_power(rng, seeds: int, sims: int) -> dict[str, float]:
    """One-at-a-time at `seeds` matched seeds: each trick on the baseline, paired t, Holm."""
    k = len(NAMES)
    points = -np.ones((k + 1, k))
    points[np.arange(1, k + 1), np.arange(k)] = 1
    mu = means(points, MAINS, INTERACTIONS)
    y = mu[None, :, None] + rng.normal(0, SEED_SD, (sims, 1, seeds)) + rng.normal(
        0, NOISE_SD, (sims, k + 1, seeds))
    d = y[:, 1:, :] - y[:, :1, :]
    t = d.mean(2) / (d.std(2, ddof=1) / math.sqrt(seeds))
    p = 2 * stats.t.sf(np.abs(t), seeds - 1)
    adj = np.array([holm_adjust(row.tolist()) for row in p])
    truth = mu[1:] - mu[0]
    hit = (adj < ALPHA) & (np.sign(t) == np.sign(truth))
    return {n: float(hit[:, INDEX[n]].mean()) for n in MAINS}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--quick", action="store_true")
    ns = ap.parse_args(argv)
    sims = 40 if ns.quick else ns.sims
    rng = np.random.default_rng(20261206)
    matrix, res, how = draw(len(NAMES), 4)
    design = design_record(FACTORS, matrix, res, how)
    print(f"design: {how}, {len(matrix)} points, resolution {res}, 12 factors")
    failures = []
    mc = 2 * math.sqrt(ALPHA * (1 - ALPHA) / sims)
    for reps in (1, 2):
        runs = reps * len(matrix)
        calls = [any(r["p_adjusted"] < ALPHA for r in study(rng, design, reps, {}, {})
                     ["effects"]) for _ in range(sims)]
        fwer = float(np.mean(calls))
        print(f"fwer[{runs} runs]={fwer:.3f} (alpha {ALPHA}, MC 2 SE {mc:.3f})")
        if fwer > ALPHA + mc and not ns.quick:
            failures.append(f"fwer[{runs}]={fwer:.3f}")
        hits = [found(study(rng, design, reps, MAINS, INTERACTIONS)) for _ in range(sims)]
        power = {n: float(np.mean([h[n] for h in hits])) for n in hits[0]}
        seeds = max(2, runs // (len(NAMES) + 1))
        ovat = ovat_power(rng, seeds, sims)
        for name, pw in power.items():
            o = ovat.get(name)
            print(f"screening_power[{runs} runs, {name}]={pw:.3f}  ovat_power[{seeds} seeds = "
                  f"{seeds * 13} runs]=" + (f"{o:.3f}" if o is not None else
                                            "n/a (OVAT cannot estimate an interaction)"))
        need: dict[str, int | None] = dict.fromkeys(MAINS)
        for n in range(2, 81):  # OVAT's seeds per arm until it matches each main's power
            at_n = ovat_power(rng, n, max(sims // 2, 20))
            for name in MAINS:
                if need[name] is None and at_n[name] >= power[name]:
                    need[name] = n
            if all(v is not None for v in need.values()):
                break
        for name, n in need.items():
            ratio = runs / (13 * n) if n else 0.0
            print(f"runs_for_equal_power[{runs} runs, {name}]: screening {runs}, OVAT "
                  f"{13 * n if n else '>1040'} ({n} seeds x 13 arms); screening/OVAT "
                  f"= {ratio:.2f} (target < 0.5)")
            if not ns.quick and (n is None or ratio >= 0.5):
                failures.append(f"runs_for_equal_power[{runs}, {name}] ratio {ratio:.2f}")
    failures += aliased_check(rng, sims, ns.quick)
    print("screening=ok" if not failures else "screening=FAILED: " + "; ".join(failures))
    return 0 if not failures else 1


def aliased_check(rng, sims: int, quick: bool) -> list[str]:
    """Resolution III: an interaction planted on a main effect's column."""
    matrix, res, how = draw(len(NAMES), 3)
    design = design_record(FACTORS, matrix, res, how)
    chain = next(c for c in design["chains"] if len(c[0]["term"]) == 1 and len(c) > 1)
    main, (a, b) = chain[0]["term"][0], chain[1]["term"]
    words = []
    for _ in range(sims):
        rep = study(rng, design, 2, {}, {(a, b): 2.0})
        row = next(r for r in rep["effects"] if r["name"].split(" = ")[0] == main)
        words.append((row["verdict"], f"{a} x {b}" in row["name"]))
    wrong = np.mean([w in ("improves", "harms") for w, _ in words])
    named = np.mean([w == "aliased" and n for w, n in words])
    print(f"aliased[{how}, {len(matrix)} points x 2 seeds: {a} x {b} = 2.0 planted on "
          f"{main}'s column]: called aliased naming it {named:.3f}, a wrong main-effect "
          f"verdict {wrong:.3f}")
    out = []
    if wrong > 0:
        out.append(f"aliased: {main} called improves/harms in {wrong:.3f}")
    if not quick and named < 0.8:
        out.append(f"aliased: named in only {named:.3f}")
    return out


if __name__ == "__main__":
    sys.exit(main())
