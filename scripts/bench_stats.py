"""Time the statistics stage (report without figures) on 1,500 synthetic records:
25 arms x 10 seeds x 6 strata with 200-step histories. Prints stats_seconds=<s>.
Target <= 5 s on 2 cores.  Usage: python scripts/bench_stats.py"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

from grpo_ablate.report import main as report_main
from grpo_ablate.store import RunRecord, write_record


def build(root: Path) -> None:
    rng = random.Random(0)
    for model in ("s", "m", "l"):
        for task in ("math", "code"):
            for a in range(25):
                arm = "baseline" if a == 0 else f"trick_{a}"
                for seed in range(10):
                    acc = 0.5 + 0.01 * (a % 5) + rng.gauss(0, 0.03)
                    hist = [{"step": s, "loss": rng.random(), "reward": rng.random(), "kl": rng.random(),
                             "entropy": 1 - s / 400, "completions/mean_length": 10 + s / 50,
                             "grad_norm": rng.random()} for s in range(1, 201)]
                    rec = RunRecord(
                        run_id=f"{model}{task}{a}_{seed}", sweep="bench", arm=arm, seed=seed,
                        model=model, task=task, status="completed", error=None, config={},
                        metrics={"eval/accuracy": acc, "eval/reward_mean": acc * 0.9},
                        stability={"kl_final": rng.random(), "kl_max": rng.random() + 1,
                                   "entropy_ratio_final": 0.5, "length_growth": rng.random() * 0.3,
                                   "grad_norm_max": rng.random() * 3, "reward_volatility": rng.random(),
                                   "checkpoint_regret": rng.random() * 0.05},
                        diagnostics=[], steps=200, wall_seconds=1.0, cost={"completions": 1},
                        versions={}, git_sha=None)
                    write_record(root / "runs" / rec.run_id, rec, hist)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root)
        t0 = time.perf_counter()
        report_main([str(root), "--no-figures", "--out", str(root / "out")])
        print(f"stats_seconds={time.perf_counter() - t0:.2f}")


if __name__ == "__main__":
    main()
