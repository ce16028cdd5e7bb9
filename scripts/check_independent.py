"""Independent runs through the whole statistics stage, on planted normal data.

1. The Welch path's power: studies of independent runs (equal and unequal counts, a planted
   difference), each reported as a CSV without a design is (`runs="independent"`). The
   share called `improves` is compared with scipy's Welch t-test on the same draws: the
   decisions must agree draw by draw, so the two powers are one; and with the analytic
   power the MDE and the seeds-needed column use (`welch_power`, integrated over the two
   sample variances), within Monte Carlo error (3 SE). Beside it, the pooled t's power
   (statsmodels' TTestIndPower), which overstates Welch's at a few runs per arm.
2. The false-positive rate under no difference: at most alpha plus 3 Monte Carlo SE.
3. What pairing by run number costs: the same 3-run draws of a large difference, paired by
   their numbers (as a CSV read as matched would be) and by Welch.
Prints welch_power[na,nb]=, welch_power_matches_scipy=, max_gap=, null_rate=,
power_paired_by_number= and power_welch= lines, and ends with independent=ok or names the
failure.

    python scripts/check_independent.py [--sims 2000] [--quick]
`--quick`: a few studies per check, so the script runs; its verdict means nothing then.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.power import TTestIndPower

from grpo_ablate.stats.decide import Settings, analyse
from grpo_ablate.stats.significance import welch_power

DESIGNS = ((3, 3), (5, 5), (10, 30), (30, 10))
ALPHA = 0.05


def study(rng, na: int, nb: int, diff: float) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """One study: the arm's na and the baseline's nb runs, numbered 1..n in each arm."""
    a, b = rng.normal(diff, 1.0, na), rng.normal(0.0, 1.0, nb)
    rows = [{"arm": "x", "seed": i + 1, "model": "m", "task": "t", "status": "completed",
             "score": float(v)} for i, v in enumerate(a)]
    rows += [{"arm": "baseline", "seed": i + 1, "model": "m", "task": "t",
              "status": "completed", "score": float(v)} for i, v in enumerate(b)]
    return pd.DataFrame(rows), a, b


def verdict_of(df: pd.DataFrame, runs: str) -> str:
    rep = analyse(df, Settings(metric="score", runs=runs, min_effect=0.1))
    return rep["strata"][0]["arms"][0]["verdict"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--quick", action="store_true")
    ns = ap.parse_args(argv)
    sims = 30 if ns.quick else ns.sims
    rng = np.random.default_rng(20261204)
    failures, gaps, agree = [], [], True
    for na, nb in DESIGNS:
        diff = 1.2 if min(na, nb) < 5 else 0.8
        ours = theirs = 0
        for _ in range(sims):
            df, a, b = study(rng, na, nb, diff)
            called = verdict_of(df, "independent") == "improves"
            ref = stats.ttest_ind(a, b, equal_var=False)
            scipy_says = ref.pvalue < ALPHA and a.mean() > b.mean()
            agree &= called == scipy_says
            ours += called
            theirs += scipy_says
        analytic = welch_power(diff, 1.0, na, ALPHA, n_base=nb)
        pooled = TTestIndPower().power(diff, nobs1=na, ratio=nb / na, alpha=ALPHA)
        rate = ours / sims
        se = math.sqrt(analytic * (1 - analytic) / sims)
        gaps.append(abs(rate - analytic))
        print(f"welch_power[{na},{nb}]={rate:.3f} (scipy's Welch {theirs / sims:.3f} on the same "
              f"draws; analytic {analytic:.3f}, MC SE {se:.3f}; the pooled t's {pooled:.3f}; "
              f"true difference {diff} sd)")
        if abs(rate - analytic) > 3 * se and not ns.quick:
            failures.append(f"welch_power[{na},{nb}]")
    print(f"welch_power_matches_scipy={'yes' if agree else 'no'} (the same decision on every draw)")
    print(f"max_gap={max(gaps):.3f} (largest |empirical - analytic| Welch power)")
    if not agree:
        failures.append("welch_power_matches_scipy")
    false_calls = sum(verdict_of(study(rng, 5, 5, 0.0)[0], "independent") in ("improves", "harms")
                      for _ in range(sims))
    null_se = math.sqrt(ALPHA * (1 - ALPHA) / sims)
    print(f"null_rate={false_calls / sims:.3f} (no difference, 5 + 5 runs; alpha {ALPHA}, "
          f"MC SE {null_se:.3f})")
    if false_calls / sims > ALPHA + 3 * null_se and not ns.quick:
        failures.append("null_rate")
    paired = welch = 0
    for _ in range(sims):
        df, _, _ = study(rng, 3, 3, 2.5)
        paired += verdict_of(df, "matched") == "improves"
        welch += verdict_of(df, "independent") == "improves"
    print(f"power_paired_by_number={paired / sims:.3f} power_welch={welch / sims:.3f} (3 + 3 "
          "independent runs, a true difference of 2.5 sd)")
    print("independent=" + ("ok" if not failures else "FAILED: " + ", ".join(failures)))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
