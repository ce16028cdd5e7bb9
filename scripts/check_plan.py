"""Is `grpo-ablate plan` honest? Plans the demo sweep (adaptive, joblib on this machine's
cores) in a fresh output folder, runs it, and compares: the predicted wall time at the number
of runs the ladder actually trained against the measured wall time of the sweep, and whether
that number fell inside the plan's range. Prints name=value lines:

    plan_cost_from, plan_per_run_seconds, plan_runs_null, plan_runs_min_effect, plan_runs_max, actual_runs,
    runs_in_range, predicted_seconds, actual_seconds, plan_error (predicted / actual - 1)

    python scripts/check_plan.py [sweep=demo] [overrides...]
    python scripts/check_plan.py --quick     the smoke sweep's 2 arms x 1 seed at 2 steps, one
                                             after the other: the script runs (its error
                                             means little then)
    python scripts/check_plan.py --launcher slurm [--quick] [overrides...]
                                             plan (its pilot as Slurm jobs) and sweep through
                                             launcher=slurm; as many runs at once as this
                                             machine has cores, unless
                                             hydra.launcher.array_parallelism says otherwise
Target: |plan_error| <= 0.20 here. The starting checkpoint is built before the clock starts
(`grpo-ablate fetch`), as the plan does not predict a first-use policy build.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grpo_ablate.launch.estimate import forecast, wall_seconds


def main() -> None:
    args = sys.argv[1:]
    launcher = ["launcher=joblib"]
    if "--launcher" in args:
        at = args.index("--launcher")
        name = args[at + 1] if at + 1 < len(args) else ""
        if name not in ("joblib", "slurm"):
            raise SystemExit(f"check_plan: --launcher {name or '(nothing)'}: allowed: joblib, "
                             "slurm")
        del args[at:at + 2]
        launcher = [f"launcher={name}"]
        if name == "slurm" and not any(a.startswith("hydra.launcher.array_parallelism=")
                                       for a in args):
            launcher.append(f"hydra.launcher.array_parallelism={os.cpu_count() or 1}")
    if "--quick" in args:
        args = [a for a in args if a != "--quick"] + [
            "sweep=smoke", "trick=baseline,kl_off", "seed=0", "trainer.max_steps=2",
            "eval.every_steps=0", "run_cache=null"]
        if "--launcher" not in sys.argv:  # the serial launcher: no worker processes to start
            launcher = ["launcher=serial"]
    # `fetch` builds one run's starting checkpoint: a sweep's choices (a,b or range()) are not
    # one run's values, so it gets the overrides that are.
    one_run = [a for a in args if not a.startswith(("sweep=", "hydra.", "launcher="))
               and "," not in a and "range(" not in a]
    sweep = next((a.split("=", 1)[1] for a in args if a.startswith("sweep=")), "demo")
    rest = [a for a in args if not a.startswith("sweep=")]
    with tempfile.TemporaryDirectory(prefix="check-plan-") as tmp:
        overrides = [f"sweep={sweep}", *launcher, f"out_root={tmp}", *rest]
        fetched = subprocess.run([sys.executable, "-m", "grpo_ablate.cli", "fetch",
                                  f"out_root={tmp}", *one_run], capture_output=True, text=True)
        if fetched.returncode != 0:
            raise SystemExit(f"check_plan: fetch failed:\n{fetched.stderr[-2000:]}")
        f = forecast(overrides)
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-m", "grpo_ablate.cli", "sweep", *overrides],
                             capture_output=True, text=True)
        actual = time.perf_counter() - t0
        if res.returncode != 0:
            raise SystemExit(f"check_plan: the sweep failed:\n{res.stderr[-2000:]}")
        runs = len(list(Path(tmp).glob("*/runs/*/record.json")))
    predicted = wall_seconds(runs, f.per_run, f.launch.workers, f.extra)
    low, high = min(f.runs.values()), max(f.runs.values())
    print(f"plan_cost_from={f.cost.source}")
    print(f"plan_per_run_seconds={f.per_run:.2f}")
    for name, n in f.runs.items():
        print(f"plan_runs_{name.replace(' ', '_').replace('-', '_')}={n:.0f}")
    print(f"actual_runs={runs}")
    print(f"runs_in_range={low <= runs <= high}")
    print(f"predicted_seconds={predicted:.0f}")
    print(f"actual_seconds={actual:.0f}")
    print(f"plan_error={predicted / actual - 1:+.3f}")


if __name__ == "__main__":
    main()
