"""Simulated sweeps with known truth check the decision rules end to end.

1. Global null: 20 tricks x 5 matched seeds, seed-level noise of 4 points (the review's
   3-5): the family-wise rate of any improves/harms call stays <= alpha (+ MC error).
2. Planted effects: the paired test's empirical power matches the analytic power (0.03).
3. Equivalence: no_effect is called only where the truth lies inside +/- min-effect, and
   wrongly (truth outside) at most alpha of the time, also family-wise over 10 such arms
   (the TOST p-values are Holm-adjusted like the significance side).
4. The task scope (stats/crossed.py): a trick that helps some problems and hurts others,
   zero on average over the task's problems, evaluated on a fresh sample of 64 held-out
   prompts per simulated study. The seed-only test ("on these prompts") finds the sample's
   effect more often as seeds grow; the crossed test holds alpha at every seed count. Its
   cost: the power on a planted homogeneous effect under both scopes.
5. The task scope at the catalog's 24 arms (Holm) under the global null, where seed noise
   and per-prompt noise trade places: each regime (run sd, cell sd, per-prompt effect sd) at
   3, 5 and 10 seeds, 16, 40 and 200 fresh prompts, continuous and 0/1 outcomes; the
   family-wise error of both scopes with its Monte Carlo SE, and the power of each against
   one arm 0.1 better on every prompt (the other 23 null).
Prints fwer=, power_gap=, equiv_error=, false_no_effect=, task_fwer_<scope>_s<S>=,
task_power_<scope>=, many_arms_fwer[...]= and many_arms_power[...]= lines, and ends with
calibration=ok or names the failure.

    python scripts/check_calibration.py [--sims 400] [--task-sims 300] [--arm-studies 300]
        [--quick]
`--quick`: a few studies per check, so the script runs; its verdict means nothing then.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

from grpo_ablate.results.table import per_run_means
from grpo_ablate.stats.correct import holm_adjust
from grpo_ablate.stats.crossed import crossed_tests
from grpo_ablate.stats.decide import Settings, analyse
from grpo_ablate.stats.significance import paired_power


def simulate(effects: dict[str, float], seeds: int, rng, seed_sd=0.04, run_sd=0.01) -> pd.DataFrame:
    seed_effect = rng.normal(0, seed_sd, seeds)
    rows = [{"arm": arm, "seed": s, "model": "m", "task": "t", "status": "completed",
             "eval/accuracy": 0.6 + eff + seed_effect[s] + rng.normal(0, run_sd)}
            for arm, eff in effects.items() for s in range(seeds)]
    return pd.DataFrame(rows)


def simulate_prompts(seeds: int, prompts: int, rng, spread: float,
                     shift: float = 0.0) -> pd.DataFrame:
    """One study: per-prompt correct (0/1) of the baseline and arm x over seeds x prompts.
    Each problem's solve rate is U(0.3, 0.7); the trick moves it by U(-spread, spread) +
    shift (zero on the task's average when shift = 0); each run's seed moves the rate of
    all its problems by N(0, 0.02)."""
    base = rng.uniform(0.3, 0.7, prompts)
    effect = rng.uniform(-spread, spread, prompts) + shift
    rows = []
    for arm, moved in (("baseline", 0.0), ("x", 1.0)):
        for s in range(seeds):
            rate = np.clip(base + moved * effect + rng.normal(0, 0.02), 0, 1)
            hits = rng.random(prompts) < rate
            rows += [{"arm": arm, "seed": s, "model": "m", "task": "t", "status": "completed",
                      "prompt": f"p{j}", "eval/accuracy": float(hits[j])} for j in range(prompts)]
    return pd.DataFrame(rows)


def rejection_rate(sims: int, seeds: int, rng, scope: str, alpha: float, spread: float,
                   shift: float = 0.0) -> float:
    hits = 0
    for _ in range(sims):
        long = simulate_prompts(seeds, 64, rng, spread, shift)
        rep = analyse(per_run_means(long), Settings(alpha=alpha, scope=scope), prompts=long)
        hits += rep["strata"][0]["arms"][0]["verdict"] in ("improves", "harms")
    return hits / sims


def task_scope(sims: int, alpha: float, failures: list[str]) -> None:
    mc = 3 * math.sqrt(alpha * (1 - alpha) / sims)
    for seeds in (3, 10, 30):
        for scope in ("prompts", "task"):
            rate = rejection_rate(sims, seeds, np.random.default_rng(seeds), scope, alpha, 0.3)
            print(f"task_fwer_{scope}_s{seeds}={rate:.3f} (zero effect on the task, per-prompt "
                  f"effects U(-0.3, 0.3), 64 prompts; {'seed-only' if scope == 'prompts' else 'crossed'})")
            if scope == "task" and rate > alpha + mc:
                failures.append(f"task_fwer_task_s{seeds}")
    for scope in ("prompts", "task"):
        rate = rejection_rate(sims, 10, np.random.default_rng(7), scope, alpha, 0.0, shift=0.05)
        print(f"task_power_{scope}={rate:.3f} (a homogeneous +0.05 on every prompt, 10 seeds)")


# (run sd, cell sd, per-prompt effect sd): seed noise comparable to the per-prompt noise
# (the first two), and per-prompt noise dominating (the third). Binary outcomes draw 0/1 with
# these probabilities (the cell noise is then the Bernoulli draw's).
REGIMES = ((0.05, 0.10, 0.10), (0.05, 0.10, 0.05), (0.02, 0.15, 0.15))


def arm_tables(rng, arms: int, seeds: int, prompts: int, run_sd: float, cell_sd: float,
               effect_sd: float, binary: bool, shift: float) -> np.ndarray:
    """arms x seeds x prompts paired differences against one shared baseline; fresh prompts,
    fresh per-prompt arm effects (mean 0), each run its own offset; arm 0 shifted by `shift`."""
    base = rng.uniform(0.35, 0.65, prompts)

    def run(effect):
        level = base + effect + rng.normal(0, run_sd, (seeds, 1))
        if binary:
            return (rng.random((seeds, prompts)) < np.clip(level, 0.01, 0.99)).astype(float)
        return level + rng.normal(0, cell_sd, (seeds, prompts))

    baseline = run(0.0)
    effects = rng.normal(0, effect_sd, (arms, prompts))
    effects[0] += shift
    return np.stack([run(effects[k]) - baseline for k in range(arms)])


def many_arms(rng, studies: int, arms: int, seeds: int, prompts: int, regime: tuple,
              binary: bool, alpha: float, shift: float = 0.0) -> dict[str, float]:
    """Per scope: the share of studies with any Holm rejection (shift 0: the family-wise
    error), or with arm 0 rejected upwards (shift > 0: its power)."""
    hits = {"task": 0, "prompts": 0}
    for _ in range(studies):
        tables = arm_tables(rng, arms, seeds, prompts, *regime, binary, shift)
        for scope in hits:
            tests = crossed_tests(tables, 0.01, scope)
            adjusted = holm_adjust([t.p_value for t in tests])
            if shift:
                hits[scope] += bool(adjusted[0] < alpha and tests[0].ci_low > 0)
            else:
                hits[scope] += any(p < alpha for p in adjusted)
    return {scope: n / studies for scope, n in hits.items()}


def many_arms_check(studies: int, alpha: float, failures: list[str], arms: int = 24) -> None:
    """The 24-arm grid: family-wise error per regime, seeds, prompts and outcome kind (a
    task-scope rate over alpha + 2 Monte Carlo SEs is a failure), then power."""
    mc = math.sqrt(alpha * (1 - alpha) / studies)
    rng = np.random.default_rng(42)
    for binary in (False, True):
        kind = "binary" if binary else "continuous"
        for r, regime in enumerate(REGIMES):
            for seeds in (3, 5, 10):
                for prompts in (16, 40, 200):
                    rate = many_arms(rng, studies, arms, seeds, prompts, regime, binary, alpha)
                    name = f"{kind},r{r + 1},s{seeds},p{prompts}"
                    print(f"many_arms_fwer[{name}]=task {rate['task']:.3f} prompts "
                          f"{rate['prompts']:.3f} (MC SE {mc:.3f}; run/cell/effect sd "
                          f"{'/'.join(map(str, regime))})", flush=True)
                    if rate["task"] > alpha + 2 * mc:
                        failures.append(f"many_arms_fwer[{name}]")
        for seeds, prompts in ((3, 40), (5, 40), (10, 40), (5, 200)):
            power = many_arms(rng, studies, arms, seeds, prompts, REGIMES[0], binary, alpha,
                              shift=0.1)
            print(f"many_arms_power[{kind},r1,s{seeds},p{prompts}]=task {power['task']:.3f} "
                  f"prompts {power['prompts']:.3f} (one arm +0.1 on every prompt, 23 null)",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=400)
    ap.add_argument("--task-sims", type=int, default=300, help="studies per task-scope setting")
    ap.add_argument("--quick", action="store_true",
                    help="a few studies per check: the script runs (its verdict means nothing)")
    ap.add_argument("--arm-studies", type=int, default=300,
                    help="studies per 24-arm task-scope setting")
    ns = ap.parse_args()
    if ns.quick:
        ns.sims, ns.task_sims, ns.arm_studies = 10, 4, 1
    rng = np.random.default_rng(2026)
    alpha, failures = 0.05, []

    null = {"baseline": 0.0} | {f"t{i}": 0.0 for i in range(20)}
    hits = 0
    for _ in range(ns.sims):
        rep = analyse(simulate(null, 5, rng), Settings(alpha=alpha))
        hits += any(a["verdict"] in ("improves", "harms") for a in rep["strata"][0]["arms"])
    fwer = hits / ns.sims
    mc = 2 * math.sqrt(alpha * (1 - alpha) / ns.sims)
    print(f"fwer={fwer:.3f} (alpha {alpha}, MC error {mc:.3f})")
    if fwer > alpha + mc:
        failures.append("fwer")

    # One planted trick at a time: power of the paired test at alpha (k = 1).
    effect, n, run_sd = 0.012, 5, 0.01
    sd_diff = math.sqrt(2) * run_sd
    detected = 0
    for _ in range(ns.sims):
        rep = analyse(simulate({"baseline": 0.0, "x": effect}, n, rng, run_sd=run_sd),
                      Settings(alpha=alpha))
        detected += rep["strata"][0]["arms"][0]["verdict"] == "improves"
    analytic = paired_power(effect, sd_diff, n, alpha)
    # improves is one-sided: drop the (tiny) wrong-sign rejection mass from the analytic power
    gap = abs(detected / ns.sims - analytic)
    print(f"power_gap={gap:.3f} (empirical {detected / ns.sims:.3f}, analytic {analytic:.3f})")
    if gap > 0.03 + 2 * math.sqrt(analytic * (1 - analytic) / ns.sims):
        failures.append("power_gap")

    # Equivalence: truth just outside the band must rarely be called no_effect.
    margin, wrong, inside_calls = 0.01, 0, 0
    for _ in range(ns.sims):
        rep = analyse(simulate({"baseline": 0.0, "out": margin, "in": 0.0}, 10, rng, run_sd=0.003),
                      Settings(alpha=alpha, min_effect=margin))
        arms = {a["arm"]: a["verdict"] for a in rep["strata"][0]["arms"]}
        wrong += arms["out"] == "no_effect"
        inside_calls += arms["in"] == "no_effect"
    equiv_error = wrong / ns.sims
    print(f"equiv_error={equiv_error:.3f} (truth on the band edge called no_effect; <= alpha)")
    print(f"equiv_power={inside_calls / ns.sims:.3f} (truth 0 called no_effect)")
    if equiv_error > alpha + mc:
        failures.append("equivalence")

    # Family-wise false no_effect: 10 arms whose truth sits on the band edge (+-margin);
    # with the TOST p Holm-adjusted, any no_effect call among them is rare (<= alpha).
    edge = {"baseline": 0.0} | {f"e{i}": margin * (1 if i % 2 else -1) for i in range(10)}
    any_false = 0
    for _ in range(ns.sims):
        rep = analyse(simulate(edge, 10, rng, run_sd=0.003), Settings(alpha=alpha, min_effect=margin))
        any_false += any(a["verdict"] == "no_effect" for a in rep["strata"][0]["arms"])
    false_no_effect = any_false / ns.sims
    print(f"false_no_effect={false_no_effect:.3f} (10 arms on the band edge: any called no_effect; "
          "<= alpha)")
    if false_no_effect > alpha + mc:
        failures.append("false_no_effect")
    task_scope(ns.task_sims, alpha, failures)
    many_arms_check(ns.arm_studies, alpha, failures)
    print("calibration=ok" if not failures else f"calibration=failed: {', '.join(failures)}")


if __name__ == "__main__":
    main()
