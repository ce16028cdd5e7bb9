"""Wall time of the commands a user waits on, each run as a fresh process (the median of
--repeats runs): --version, run --help, sweep --help, run --cfg job, and the re-run of a
finished sweep (sweep=smoke, trained once first in a temporary folder) and, with --demo-out,
of a finished demo (run once first when the folder holds none). Prints one
`cli_seconds[<command>]=<s>` line each; then what `run --help` imports (`python -X
importtime`): the top-level imports that cost most (`cli_import_seconds[<module>]=`) and the
heavy packages among everything it imports (`cli_heavy_imports=none`, or their names: torch,
transformers, TRL, scipy, pandas, matplotlib and datasets load only where a command needs
them). Targets: 1.5 s for --help and --cfg job,
10 s for a re-run of a finished sweep or demo, figures included.

Usage: python scripts/bench_cli.py [--repeats 3] [--demo-out DIR] [--quick]
`--quick`: one repeat, 2 runs of the smoke sweep at 2 steps: the script runs (figures meaningless)."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ENV = {**os.environ, "WANDB_MODE": "offline"}


def cli(*args: str) -> float:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "grpo_ablate.cli", *args], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"grpo-ablate {' '.join(args)} failed: {res.stderr[-500:]}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--demo-out", default=None, help="out_root of a demo (run first if missing)")
    ap.add_argument("--quick", action="store_true", help="1 repeat, a 2-step sweep: the script runs")
    ns = ap.parse_args()
    short = ["trick=baseline,kl_off", "seed=0", "trainer.max_steps=2", "eval.every_steps=0",
             "run_cache=null"] if ns.quick else []
    if ns.quick:
        ns.repeats = 1
    with tempfile.TemporaryDirectory() as tmp:
        cli("sweep", "sweep=smoke", f"out_root={tmp}", *short)  # trains it once
        commands = {"--version": ["--version"], "run --help": ["run", "--help"],
                    "sweep --help": ["sweep", "--help"],
                    "run --cfg job": ["run", "--cfg", "job", "trick=kl_off"],
                    "finished sweep": ["sweep", "sweep=smoke", f"out_root={tmp}", *short]}
        if ns.demo_out:
            if not os.path.isdir(os.path.join(ns.demo_out, "demo", "runs")):
                cli("demo", f"out_root={ns.demo_out}")
            commands["finished demo"] = ["demo", f"out_root={ns.demo_out}"]
        for name, args in commands.items():
            times = [cli(*args) for _ in range(ns.repeats)]
            print(f"cli_seconds[{name}]={statistics.median(times):.2f}", flush=True)
    import_profile("run", "--help")


HEAVY = ("torch", "transformers", "trl", "scipy", "pandas", "matplotlib", "datasets")


def import_profile(*args: str, top: int = 5) -> None:
    """The imports one command pays for, from Python's -X importtime."""
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "grpo_ablate.cli", *args],
                         env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rows = []
    for line in res.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, cumulative, name = line.split("|", 2)
        depth = (len(name) - len(name.lstrip())) // 2
        rows.append((int(cumulative) / 1e6, depth, name.strip()))
    for seconds, _, name in sorted((r for r in rows if r[1] <= 1), reverse=True)[:top]:
        print(f"cli_import_seconds[{name}]={seconds:.3f}")
    heavy = sorted({n.split(".")[0] for _, _, n in rows if n.split(".")[0] in HEAVY})
    print(f"cli_heavy_imports={','.join(heavy) or 'none'}")


if __name__ == "__main__":
    main()
