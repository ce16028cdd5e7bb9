"""The first use's long wait: building the embedded policy (`grpo-ablate fetch`, into an empty
cache), alone and with one other busy process beside it (a spinning Python loop, as another
job on the machine). Its threads are a sweep worker's share (runtime.build_threads), so a
busy core slows it in proportion, not many-fold. Prints `policy_build_seconds[alone]=`,
`policy_build_seconds[busy]=` and `policy_build_busy_ratio=` (target: at most 2).

Usage: python scripts/bench_policy_build.py [--steps N] [--quick]
`--quick`: 40 SFT steps (the figure is the same ratio, on a shorter build)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time


def build(steps: int) -> float:
    """One build of the policy into an empty cache, in a fresh process; its wall seconds."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "GRPO_ABLATE_CACHE": cache, "WANDB_MODE": "offline"}
        env.pop("GRPO_ABLATE_THREADS", None)  # a user's shell: no launcher's share
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "grpo_ablate.cli", "fetch",
                        f"model.sft.steps={steps}"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1500, help="SFT steps (the tiny preset's)")
    ap.add_argument("--quick", action="store_true")
    ns = ap.parse_args()
    steps = 40 if ns.quick else ns.steps
    alone = build(steps)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = build(steps)
    finally:
        spinner.kill()
    print(f"policy_build_seconds[alone]={alone:.1f}")
    print(f"policy_build_seconds[busy]={busy:.1f}")
    print(f"policy_build_busy_ratio={busy / alone:.2f}")


if __name__ == "__main__":
    main()
