"""Time the statistics stage on 1,500 synthetic records (25 arms x 10 seeds x 6 strata,
200-step histories; report without figures), then the whole report with figures on a
10,000-row CSV (25 arms x 100 seeds x 4 strata).

Prints stats_seconds=<s> (target <= 1) and report_10k_seconds=<s> (target < 10).
Usage: python scripts/bench_stats.py [--quick]
`--quick`: 5 arms x 3 seeds x 2 strata, 20-step histories, a 500-row CSV: the script runs."""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import tempfile
import time
from pathlib import Path

import pandas as pd

from grpo_ablate.records import RunRecord, write_record
from grpo_ablate.report import main as report_main


def build(root: Path, arms: int = 25, seeds: int = 10, models: tuple = ("s", "m", "l"),
          steps: int = 200) -> None:
    rng = random.Random(0)
    for model in models:
        for task in ("math", "code"):
            for a in range(arms):
                arm = "baseline" if a == 0 else f"trick_{a}"
                for seed in range(seeds):
                    acc = 0.5 + 0.01 * (a % 5) + rng.gauss(0, 0.03)
                    hist = [{"step": s, "loss": rng.random(), "reward": rng.random(), "kl": rng.random(),
                             "entropy": 1 - s / 400, "completions/mean_length": 10 + s / 50,
                             "grad_norm": rng.random()} for s in range(1, steps + 1)]
                    rec = RunRecord(
                        run_id=f"{model}{task}{a}_{seed}", sweep="bench", arm=arm, seed=seed,
                        model=model, task=task, status="completed", error=None, config={},
                        metrics={"eval/accuracy": acc, "eval/reward_mean": acc * 0.9},
                        stability={"kl_final": rng.random(), "kl_max": rng.random() + 1,
                                   "entropy_ratio_final": 0.5, "length_growth": rng.random() * 0.3,
                                   "grad_norm_max": rng.random() * 3, "reward_volatility": rng.random(),
                                   "checkpoint_regret": rng.random() * 0.05},
                        diagnostics=[], steps=steps, wall_seconds=1.0, cost={"completions": 1}, activity={},
                        versions={}, git_sha=None)
                    write_record(root / "runs" / rec.run_id, rec, hist)


def big_csv(path: Path, seeds: int = 100) -> None:
    rng = random.Random(1)
    rows = [{"arm": "baseline" if a == 0 else f"trick_{a}", "seed": seed, "task": task,
             "eval/accuracy": 0.5 + 0.01 * (a % 5) + rng.gauss(0, 0.03)}
            for task in ("math", "code", "chat", "gsm") for a in range(25) for seed in range(seeds)]
    pd.DataFrame(rows).to_csv(path, index=False)


def timed(args: list[str]) -> float:
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        report_main(args)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small inputs: the script runs")
    quick = ap.parse_args().quick
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if quick:
            build(root, arms=5, seeds=3, models=("s",), steps=20)
        else:
            build(root)
        print(f"stats_seconds={timed([str(root), '--no-figures', '--out', str(root / 'out')]):.2f}")
        big_csv(root / "big.csv", seeds=5 if quick else 100)
        print(f"report_10k_seconds={timed([str(root / 'big.csv'), '--out', str(root / 'big')]):.2f}")


if __name__ == "__main__":
    main()
