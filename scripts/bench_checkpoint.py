"""What mid-run checkpoints cost: the same run and seed with and without them. Prints
name=value lines:

    checkpoint_overhead_ratio          wall with checkpoints at the default interval / none
    checkpoint_overhead_ratio_capped   wall with a save whenever the 3% cap allows / none
    checkpoint_seconds                 seconds per save, as the trainer timed it (median)
    checkpoint_seconds_by_wall         the same, from walls: (every step - none) / saves
    checkpoint_mib                     one checkpoint's size on disk

    python scripts/bench_checkpoint.py [--model tiny|smollm2-135m] [--steps 40] [--repeats 3]
        [--warmup 1] [--only default,capped,every_step] [--quick]

`--quick`: the tiny policy, 4 steps, 1 repeat, no warm-up: the script runs (figures meaningless).

The default interval (checkpoint.every_minutes=30) saves nothing in a run shorter than 30
minutes, so its ratio measures the bookkeeping alone; the capped run (every_minutes tiny)
saves as often as checkpoint.max_overhead=0.03 allows, the default's worst case. Runs are in
this process, alternated (each round in the reverse order of the last); a ratio is the median
over the rounds of a run's wall against the same round's run without checkpoints.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GSM8K = ["task=gsm8k", "task.dataset.train=fixture:math_train.jsonl",
         "task.dataset.eval=fixture:math_test.jsonl", "task.dataset.subset=null",
         "task.dataset.eval_size=4", "eval.sampled_k=1"]
SETTINGS = {
    "none": ["checkpoint.every_steps=null", "checkpoint.every_minutes=null"],
    "default": [],
    "capped": ["checkpoint.every_minutes=0.0001"],
    "every_step": ["checkpoint.every_steps=1", "checkpoint.every_minutes=null"],
}


class Saves(logging.Handler):
    """Counts the saves training/checkpoint.py logs, with their seconds and size."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[dict[str, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if msg.startswith("checkpoint saved:"):
            self.seen.append({k: float(v) for k, v in
                              (kv.split("=") for kv in msg.split(":", 1)[1].split())})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="uncounted first rounds")
    ap.add_argument("--only", default=",".join(SETTINGS),
                    help="settings to run, of: " + ", ".join(SETTINGS) + " (none is always run)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: the script runs")
    ns = ap.parse_args()
    if ns.quick:
        ns.model, ns.steps, ns.repeats, ns.warmup = "tiny", 4, 1, 0
    chosen = {"none", *ns.only.split(",")}

    from grpo_ablate.config import specs_for
    from grpo_ablate.runtime import quiet_libraries
    from grpo_ablate.training.train import train_one

    quiet_libraries()
    saves_log = Saves()
    ckpt_log = logging.getLogger("grpo_ablate.training.checkpoint")
    ckpt_log.addHandler(saves_log)
    ckpt_log.setLevel(logging.DEBUG)
    task = [] if ns.model == "tiny" else GSM8K
    walls: dict[str, list[float]] = {k: [] for k in SETTINGS}
    counts: dict[str, list[int]] = {k: [] for k in SETTINGS}
    per_save: list[float] = []
    mib = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(ns.repeats + ns.warmup):  # warm-up rounds are not counted
            # Alternated, each round's order reversed: a drift of the machine over a round
            # falls on both sides of each ratio.
            for name, overrides in list(SETTINGS.items())[::1 if rep % 2 else -1]:
                if name not in chosen:
                    continue
                out = Path(tmp) / f"{name}-{rep}"
                (spec,) = specs_for([f"model={ns.model}", *task, f"trainer.max_steps={ns.steps}",
                                     "eval.every_steps=0", "run_cache=null", f"out_root={out}",
                                     *overrides], multirun=False)
                saves_log.seen.clear()
                t0 = time.perf_counter()
                record, _ = train_one(spec)
                wall = time.perf_counter() - t0
                if record.status != "completed":
                    raise SystemExit(f"bench_checkpoint: {name} run {record.status}: {record.error}")
                if rep < ns.warmup:
                    continue
                walls[name].append(wall)
                counts[name].append(len(saves_log.seen))
                if name == "every_step":
                    per_save += [s["seconds"] for s in saves_log.seen]
                    mib = saves_log.seen[-1]["mib"]
    med = {k: statistics.median(v) for k, v in walls.items() if v}
    saves = {k: statistics.median(v) for k, v in counts.items() if v}
    # Each round's run against the same round's run without checkpoints, then the median.
    ratio = {k: statistics.median(w / n for w, n in zip(v, walls["none"], strict=True))
             for k, v in walls.items() if v}
    if "default" in med:
        print(f"checkpoint_overhead_ratio={ratio['default']:.3f} "
              f"(saves: {saves['default']:.0f})")
    if "capped" in med:
        print(f"checkpoint_overhead_ratio_capped={ratio['capped']:.3f} "
              f"(saves: {saves['capped']:.0f})")
    if "every_step" in med:
        print(f"checkpoint_seconds={statistics.median(per_save):.3f}")
        print(f"checkpoint_seconds_by_wall="
              f"{(med['every_step'] - med['none']) / saves['every_step']:.3f}")
        print(f"checkpoint_mib={mib:.1f}")
    print(f"# model={ns.model} steps={ns.steps} repeats={ns.repeats} "
          f"wall_none={med['none']:.2f}s")


if __name__ == "__main__":
    main()
