"""LoRA against full fine-tuning on one checkpoint, same config and seed: peak resident memory
of the run's process and training seconds per optimizer step (the run's wall time less its
held-out evaluations, over its steps). Prints name=value lines:

    lora_peak_rss_ratio            peak RSS with LoRA / without
    lora_seconds_per_step_ratio    seconds per step with LoRA / without

    python scripts/bench_lora.py [--model smollm2-135m] [--steps 4] [--repeats 1] [--quick]

`--quick`: the tiny policy (LoRA r=4 on its attention), 2 steps: the script runs.

Each run is its own process (os.wait4 gives its peak RSS). The baseline keeps the review's
KL penalty, so full fine-tuning holds a reference copy of the model and LoRA does not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

GSM8K = ["task=gsm8k", "task.dataset.train=fixture:math_train.jsonl",
         "task.dataset.eval=fixture:math_test.jsonl", "task.dataset.subset=null",
         "task.dataset.eval_size=4", "eval.sampled_k=1"]


# The tiny policy has no -lora preset: its adapter is given as the block a user would write.
TINY_LORA = ["model.lora={r:4,alpha:8,dropout:0.0,target_modules:[q_proj,v_proj]}"]


def one_run(model: str, lora: bool, steps: int, out: Path) -> tuple[float, float]:
    """(peak RSS in MiB, training seconds per step) of one run in its own process."""
    if model == "tiny":
        chosen = ["model=tiny", *(TINY_LORA if lora else [])]
    else:
        chosen = [f"model={model}-lora" if lora else f"model={model}", *GSM8K]
    cmd = [sys.executable, "-m", "grpo_ablate.cli", "run", *chosen,
           f"trainer.max_steps={steps}", "run_cache=null", f"out_root={out}"]
    env = {**os.environ, "WANDB_MODE": "disabled", "GRPO_ABLATE_START_EVAL_CACHE": "0"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench_lora: {model} failed:\n{err[-2000:]}")
    (path,) = out.glob("adhoc/runs/*/record.json")
    record = json.loads(path.read_text())
    if record["status"] != "completed":
        raise SystemExit(f"bench_lora: {model} {record['status']}: {record['error']}")
    train = record["wall_seconds"] - record["cost"].get("eval_seconds", 0.0)
    return usage.ru_maxrss / 1024, train / record["steps"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="the tiny policy, 2 steps: the script runs")
    ns = p.parse_args()
    if ns.quick:
        ns.model, ns.steps = "tiny", 2
    rows = {"full": [], "lora": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(ns.repeats):
            for name in ("full", "lora"):
                rows[name].append(one_run(ns.model, name == "lora", ns.steps,
                                          Path(tmp) / f"{name}{i}"))
    rss = {k: max(r[0] for r in v) for k, v in rows.items()}
    sps = {k: statistics.median(r[1] for r in v) for k, v in rows.items()}
    print(f"full_peak_rss_mib={rss['full']:.0f}")
    print(f"lora_peak_rss_mib={rss['lora']:.0f}")
    print(f"full_seconds_per_step={sps['full']:.2f}")
    print(f"lora_seconds_per_step={sps['lora']:.2f}")
    print(f"lora_peak_rss_ratio={rss['lora'] / rss['full']:.3f}")
    print(f"lora_seconds_per_step_ratio={sps['lora'] / sps['full']:.3f}")


if __name__ == "__main__":
    main()
