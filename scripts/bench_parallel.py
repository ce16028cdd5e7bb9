"""Wall time of one sweep under the joblib launcher with 1 worker (using every core's torch
threads) and with N workers (cores/N threads each), on fresh output folders: prints
parallel_speedup=<1-worker wall / N-worker wall> (target >= 1.6 with 2 workers on 2 cores),
and with --serial also the in-process (serial launcher) wall for reference. The default sweep
(2 arms x 8 seeds, 40 steps: the demo's runs) is long enough for the workers' start-up to be
paid back; 6 short runs are not.
Usage: python scripts/bench_parallel.py [--seeds 8] [--steps 40] [--workers 2] [--serial] [--quick]
`--quick`: 1 seed of 2 steps of the baseline alone (the serial launcher too only with
--serial): the script runs (figures meaningless)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time


def wall(args: list[str]) -> float:
    env = {**os.environ, "WANDB_MODE": "disabled"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grpo_ablate.cli", "sweep", *args], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", default="smoke")
    ap.add_argument("--tricks", default="baseline,kl_off")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--serial", action="store_true", help="also time the serial launcher")
    ap.add_argument("--quick", action="store_true", help="1 seed of 2 steps of the baseline: the script runs")
    ns = ap.parse_args()
    if ns.quick:
        ns.seeds, ns.steps, ns.tricks = 1, 2, "baseline"
    common = [f"sweep={ns.sweep}", f"trick={ns.tricks}", f"seed=range(0,{ns.seeds})",
              f"trainer.max_steps={ns.steps}", "eval.every_steps=20", "run_cache=null"]
    with tempfile.TemporaryDirectory() as tmp:
        one = wall([*common, f"out_root={tmp}/one", "launcher=joblib", "hydra.launcher.n_jobs=1"])
        many = wall([*common, f"out_root={tmp}/many", "launcher=joblib",
                     f"hydra.launcher.n_jobs={ns.workers}"])
        serial = wall([*common, f"out_root={tmp}/serial"]) if ns.serial else None
    print(f"one_worker_seconds={one:.1f}")
    print(f"workers_seconds={many:.1f} ({ns.workers} workers)")
    if serial is not None:
        print(f"serial_seconds={serial:.1f} (in-process; serial/workers={serial / many:.2f})")
    print(f"parallel_speedup={one / many:.2f}")


if __name__ == "__main__":
    main()
