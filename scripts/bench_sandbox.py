"""Sandbox throughput: 64 simple correct solutions (MBPP-style, 3 asserts each) scored in
parallel through `grpo_ablate.sandbox.run_many`. Prints sandbox_per_second= (target >= 50
on 2 cores), sandbox_correct=<passed programs>/64 and the isolation used.

    python scripts/bench_sandbox.py [--n 64] [--workers N] [--quick]

`--quick`: 4 programs: the script runs (its rate means nothing then).
"""

from __future__ import annotations

import argparse
import time

from grpo_ablate.sandbox import isolation_available, run_many


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--quick", action="store_true", help="4 programs: the script runs")
    ns = ap.parse_args()
    if ns.quick:
        ns.n = 4
    jobs = [(f"def solve(x):\n    return x * {k} + {k}\n",
             "\n".join(f"assert solve({x}) == {x * k + k}" for x in (0, 1, 7)) + "\n")
            for k in range(ns.n)]
    run_many(jobs[:2])  # warm the file cache, as a training run would be
    t0 = time.perf_counter()
    results = run_many(jobs, timeout_s=10.0, workers=ns.workers)
    wall = time.perf_counter() - t0
    correct = sum(r.status == "ok" and r.passed == r.total for r in results)
    print(f"isolation={isolation_available()}")
    print(f"sandbox_seconds={wall:.2f}")
    print(f"sandbox_per_second={ns.n / wall:.1f}")
    print(f"sandbox_correct={correct}/{ns.n}")


if __name__ == "__main__":
    main()
