"""Wall time of one sweep run serially and with the joblib launcher (2 workers, one torch
thread each), on fresh output folders: prints parallel_speedup=<serial wall / joblib wall>.
Target >= 1.6 on 2 cores. The default sweep (2 arms x 8 seeds, 40 steps: the demo's runs) is
long enough for the workers' start-up to be paid back; 6 short runs are not.
Usage: python scripts/bench_parallel.py [--seeds 8] [--steps 40] [--workers 2]"""

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
    ap.add_argument("--tricks", default="baseline,no_kl")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ns = ap.parse_args()
    common = [f"sweep={ns.sweep}", f"trick={ns.tricks}", f"seed=range(0,{ns.seeds})",
              f"trainer.max_steps={ns.steps}", "eval.every_steps=20", "run_cache=null"]
    with tempfile.TemporaryDirectory() as tmp:
        serial = wall([*common, f"out_root={tmp}/serial"])
        parallel = wall([*common, f"out_root={tmp}/joblib", "launcher=joblib",
                         f"hydra.launcher.n_jobs={ns.workers}"])
    print(f"serial_seconds={serial:.1f}")
    print(f"joblib_seconds={parallel:.1f} ({ns.workers} workers)")
    print(f"parallel_speedup={serial / parallel:.2f}")


if __name__ == "__main__":
    main()
