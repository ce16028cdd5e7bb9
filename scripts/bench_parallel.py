"""Wall time of one sweep run serially and with the joblib launcher (2 workers, one torch
thread each), on fresh output folders: prints parallel_speedup=<serial wall / joblib wall>.
Target >= 1.6 on 2 cores.  Usage: python scripts/bench_parallel.py [--sweep smoke] [--steps 20]"""

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
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ns = ap.parse_args()
    common = [f"sweep={ns.sweep}", f"trainer.max_steps={ns.steps}", "eval.every_steps=0"]
    with tempfile.TemporaryDirectory() as tmp:
        serial = wall([*common, f"out_root={tmp}/serial"])
        parallel = wall([*common, f"out_root={tmp}/joblib", "launcher=joblib",
                         f"hydra.launcher.n_jobs={ns.workers}"])
    print(f"serial_seconds={serial:.1f}")
    print(f"joblib_seconds={parallel:.1f} ({ns.workers} workers)")
    print(f"parallel_speedup={serial / parallel:.2f}")


if __name__ == "__main__":
    main()
