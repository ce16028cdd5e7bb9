"""Would runs that stop early, once their learning curves settle the final-budget question,
keep the verdicts honest? Simulated on planted learning curves before any run stops.

Each sweep: a baseline and 3 arms of one planted family, 5 matched seeds each, every run
evaluated 20 times over its budget (R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B), R0 = 0.5,
B = 2; each evaluation with noise sd 0.015, each seed's own A, sd 0.01, and C_mid, sd 15%:
the tiny policy's noise, as in scripts/check_curves.py). The question is the verdict at the
full budget: is the arm's final metric above or below the baseline's? The families, by the
arm's curve against the baseline's (A 0.75, C_mid at 25% of the budget):
- null: the same curve (any call is a false positive);
- speed_only: C_mid x 0.5 (ahead at every budget, a little at the end);
- ceiling_only: A + 0.06;
- crossing: a slow start to a higher ceiling (C_mid x 2, A + 0.06): behind at the looks,
  ahead at the end;
- fast_low: a fast start to a lower ceiling (C_mid x 0.4, A - 0.04): ahead at the looks,
  behind at the end;
- unbent: both arms far from bending (C_mid at 4x the budget), the arm's A + 0.06.
The rules, at looks at 25% and 50% of the steps, then the full budget, each taken by the code
`grpo-ablate sweep early_stop=true` runs (stats/early_stop.py: the ladder's O'Brien-Fleming-
type spending over the three, Holm over the arms in its sequentially rejective form,
efficacy only before the end; at the end the ladder's last look):
- full: no early look; the paired t on the final values, Holm over the arms (today's rule);
- extrapolated: at a look, each run's curve fitted on its evaluations so far
  (stats/curves.py, with its identifiability rule); where every seed of the arm and the
  baseline is readable, the paired t on each run's predicted final value (the extrapolation's
  noise is in the seeds' spread of the predictions); a decided arm stops its runs
  (`early_stop.rule=extrapolated`, the default when early stopping is on);
- extrapolated_raw: the same, from every fit, readable or not (what trusting the fitted
  curve wherever it converged would do);
- observed: at a look, the paired t on the values observed at the look (what stopping on
  the curve so far without extrapolating would do; `early_stop.rule=observed`).
The baseline's runs stop when every arm has stopped. First, on 400 baseline curves: the
share readable at each early look (`readable[look]=`) and how far their predicted final
values land from the runs' final values (`prediction_bias[look]=`, `prediction_sd[look]=`).
Per family and rule: `fwer` (null: a sweep with any call), `wrong_direction` (calls against
the sign of the true final difference, per arm), `power` (right calls, per arm where the
final difference is not 0), `steps_saved` (the share of the sweep's run-steps not run) and
`gpu_hours_saved` (per sweep, each full run costing --run-gpu-hours). A rule may become the
default only where it holds fwer <= alpha and makes no more wrong-direction calls than
`full` on every family: `default_ok[rule]=`; `default_rule=` is the one of those that saves
the most steps over the families, if that is at least 5% of them, or `none` (no run stops
early by default: the curves are reported, not acted on).

    python scripts/check_early_stop.py [--quick: 12 sweeps a family] [--sweeps N]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grpo_ablate.stats.curves import fit_raw, judge, saturating  # noqa: E402
from grpo_ablate.stats.early_stop import StopPlan  # noqa: E402
from grpo_ablate.stats.sequential import Ladder, take_look  # noqa: E402
from grpo_ablate.stats.significance import paired_compare  # noqa: E402

R0, A, MID, NOISE, SEED_A, SEED_MID = 0.5, 0.75, 250.0, 0.015, 0.01, 0.15
COMPUTE = np.linspace(0, 1000, 21)  # the start and 20 evaluations
LOOKS = (0.25, 0.5, 1.0)
ALPHA, ARMS, SEEDS = 0.05, 3, 5
FAMILIES = {"null": (0.0, 1.0, MID), "speed_only": (0.0, 0.5, MID),
            "ceiling_only": (0.06, 1.0, MID), "crossing": (0.06, 2.0, MID),
            "fast_low": (-0.04, 0.4, MID), "unbent": (0.06, 1.0, 4000.0)}
RULES = ("full", "extrapolated", "extrapolated_raw", "observed")
MIN_SAVING = 0.05  # a default that stops runs must save at least this share of steps


def curve(rng: np.random.Generator, a: float, mid: float) -> np.ndarray:
    a = a + rng.normal(0, SEED_A)
    mid = mid * float(np.exp(rng.normal(0, SEED_MID)))
    v = saturating(np.maximum(COMPUTE, 1e-9), R0, a, 2.0, mid) + rng.normal(0, NOISE, len(COMPUTE))
    v[0] = R0 + rng.normal(0, NOISE)
    return v


def true_final(gain: float, speed: float, mid: float) -> float:
    """The arm's final value minus the baseline's, from the central curves."""
    c = COMPUTE[-1:]
    return float(saturating(c, R0, A + gain, 2.0, mid * speed)[0]
                 - saturating(c, R0, A, 2.0, mid)[0])


def predicted_finals(values: np.ndarray, upto: int) -> tuple[float, float]:
    """A run's final value predicted from its first `upto` points: (where its curve shows
    its ceiling, else NaN; from the fit wherever one converged, else NaN)."""
    raw = fit_raw(COMPUTE[:upto], values[:upto])
    if raw.short or not np.isfinite(raw.asymptote):
        return math.nan, math.nan
    pred = float(saturating(COMPUTE[-1:], raw.start, raw.asymptote, raw.exponent,
                            raw.midpoint)[0])
    return (pred if judge(raw).identifiable else math.nan), pred


def paired_p(d: np.ndarray) -> tuple[float, float]:
    """(two-sided p, mean) of the paired t on the differences."""
    sd = d.std(ddof=1)
    if not np.all(np.isfinite(d)) or sd == 0:
        return math.nan, float(d.mean())
    t = d.mean() / (sd / math.sqrt(len(d)))
    return float(2 * stats.t.sf(abs(t), len(d) - 1)), float(d.mean())


def one_sweep(rng: np.random.Generator, gain: float, speed: float, mid: float,
              seeds: int = SEEDS) -> dict[str, tuple[list[int], float]]:
    """Each rule's calls (+1 above, -1 below, 0 none) per arm and its share of steps run."""
    base = np.array([curve(rng, A, mid) for _ in range(seeds)])
    arms = [np.array([curve(rng, A + gain, mid * speed) for _ in range(seeds)])
            for _ in range(ARMS)]
    out = {}
    final = [paired_p(arm[:, -1] - base[:, -1]) for arm in arms]
    holm = holm_calls([p for p, _ in final], ALPHA)
    out["full"] = ([int(np.sign(m)) if h else 0 for (_, m), h in zip(final, holm, strict=True)],
                   1.0)
    preds = {}  # (look, run) -> (judged, raw): each run's fit at each look, once
    for k, fraction in enumerate(LOOKS[:-1]):
        upto = int(round(fraction * (len(COMPUTE) - 1))) + 1
        for j, runs in enumerate([base, *arms]):
            preds[k, j] = np.array([predicted_finals(v, upto) for v in runs])
    for rule in RULES[1:]:
        looks = []  # per look: (the baseline's values, each arm's), NaN where unreadable
        for k, fraction in enumerate(LOOKS):
            upto = int(round(fraction * (len(COMPUTE) - 1))) + 1
            if k == len(LOOKS) - 1 or rule == "observed":
                looks.append((base[:, upto - 1], [arm[:, upto - 1] for arm in arms]))
            else:
                col = 0 if rule == "extrapolated" else 1
                looks.append((preds[k, 0][:, col], [preds[k, i + 1][:, col]
                                                    for i in range(ARMS)]))
        out[rule] = shipped_looks(looks, seeds)
    return out


def shipped_looks(looks: list, seeds: int) -> tuple[list[int], float]:
    """The looks as `grpo-ablate sweep early_stop=true` takes them (stats/early_stop.py:
    the ladder's take_look with efficacy only before the end): each arm's call and the share
    of the sweep's run-steps trained (a settled arm's runs stop at its look, the baseline's
    with the last arm's)."""
    plan = StopPlan(looks=LOOKS[:-1], seeds=seeds, alpha=ALPHA,
                    arms=tuple(str(i) for i in range(ARMS)))
    ladder = Ladder(plan, list(plan.arms))
    last = len(LOOKS) - 1
    for k, (base, arms) in enumerate(looks):
        if ladder.finished:
            break
        comps = {a: paired_compare(arms[int(a)], base, plan.min_effect, robust=False)
                 for a in ladder.open
                 if k == last or (np.isfinite(arms[int(a)]).all() and np.isfinite(base).all())}
        take_look(ladder, comps, "higher", stop_equivalent=k == last)
    calls = [{"improves": 1, "harms": -1}.get(ladder.settled[a].verdict, 0)
             if a in ladder.settled else 0 for a in plan.arms]
    reached = [LOOKS[ladder.settled[a].look - 1] if a in ladder.settled else 1.0
               for a in plan.arms]
    return calls, (sum(reached) + max(reached)) / (ARMS + 1)


def holm_calls(pvalues: list[float], alpha: float) -> list[bool]:
    """Holm's step-down at `alpha` (NaN: never rejected)."""
    order = sorted((p, i) for i, p in enumerate(pvalues) if np.isfinite(p))
    out = [False] * len(pvalues)
    for rank, (p, i) in enumerate(order):
        if p >= alpha / (len(order) - rank):
            break
        out[i] = True
    return out


def readable_at_looks(rng: np.random.Generator, runs: int) -> None:
    """How often a baseline curve is readable at each early look, and how far its predicted
    final value lands from the run's final value."""
    curves = [curve(rng, A, MID) for _ in range(runs)]
    for fraction in LOOKS[:-1]:
        upto = int(round(fraction * (len(COMPUTE) - 1))) + 1
        miss = np.array([predicted_finals(v, upto)[0] - v[-1] for v in curves])
        read = miss[np.isfinite(miss)]
        print(f"readable[{fraction:g}]={len(read) / runs:.3f} prediction_bias[{fraction:g}]="
              f"{read.mean() if len(read) else math.nan:+.4f} prediction_sd[{fraction:g}]="
              f"{read.std(ddof=1) if len(read) > 1 else math.nan:.4f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sweeps", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=SEEDS)
    ap.add_argument("--run-gpu-hours", type=float, default=1.0,
                    help="what one full-length run costs (gpu_hours_saved is per sweep)")
    args = ap.parse_args()
    sweeps = 12 if args.quick else args.sweeps
    rng = np.random.default_rng(20261208)
    readable_at_looks(rng, 40 if args.quick else 400)
    table = StopPlan(looks=LOOKS[:-1], seeds=args.seeds, alpha=ALPHA).table(ARMS)
    print("looks=" + ",".join(f"{f:g}" for f in LOOKS) + " p_boundary_at_alpha_over_arms="
          + ",".join(f"{r['p_boundary']:.2g}" for r in table))
    worse = {rule: False for rule in RULES[1:]}
    saved_total = {rule: 0.0 for rule in RULES[1:]}
    for family, (gain, speed, mid) in FAMILIES.items():
        truth = int(np.sign(round(true_final(gain, speed, mid), 6)))
        tally = {rule: {"any": 0, "wrong": 0, "right": 0, "share": 0.0} for rule in RULES}
        for _ in range(sweeps):
            for rule, (calls, share) in one_sweep(rng, gain, speed, mid, args.seeds).items():
                t = tally[rule]
                t["any"] += any(calls)
                t["wrong"] += sum(c != 0 and c != truth for c in calls) if truth else 0
                t["right"] += sum(c == truth for c in calls) if truth else 0
                t["share"] += share
        print(f"family[{family}]: true_final_diff={true_final(gain, speed, mid):+.4f}")
        for rule in RULES:
            t = tally[rule]
            saved = 1 - t["share"] / sweeps
            fwer = t["any"] / sweeps if truth == 0 else math.nan
            wrong = t["wrong"] / (sweeps * ARMS)
            print(f"fwer[{family},{rule}]={fwer:.3f} wrong_direction[{family},{rule}]="
                  f"{wrong:.3f} power[{family},{rule}]={t['right'] / (sweeps * ARMS):.3f} "
                  f"steps_saved[{family},{rule}]={saved:.3f} gpu_hours_saved[{family},{rule}]="
                  f"{saved * (ARMS + 1) * args.seeds * args.run_gpu_hours:.2f}")
            if rule != "full":
                saved_total[rule] += saved
                full_wrong = tally["full"]["wrong"] / (sweeps * ARMS)
                worse[rule] |= (truth == 0 and fwer > ALPHA) or wrong > full_wrong
    for rule in RULES[1:]:
        print(f"default_ok[{rule}]={not worse[rule]} steps_saved_mean[{rule}]="
              f"{saved_total[rule] / len(FAMILIES):.3f}")
    fine = [r for r in RULES[1:]
            if not worse[r] and saved_total[r] / len(FAMILIES) >= MIN_SAVING]
    print(f"default_rule={max(fine, key=saved_total.get) if fine else 'none'}")


if __name__ == "__main__":
    main()
