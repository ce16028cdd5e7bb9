"""Seconds per optimizer step on the real SmolLM2-135M-Instruct checkpoint (model=smollm2-135m,
fetched and converted on first use), grpo-ablate against a bare trl.GRPOTrainer on the same
GRPOConfig, model and seed, alternated in one process so machine noise hits both alike.

grpo-ablate's step time is its run's wall time minus its held-out evaluations (reported
apart: a user sets their size), over the steps; bare TRL's is its train() wall time, the
trainer built inside the timing as a run builds it. Prints real_seconds_per_step_grpo_ablate=,
real_seconds_per_step_trl=, real_eval_seconds=, and real_overhead_ratio= (target <= 1.05).

Usage: python scripts/bench_real.py [--steps 3] [--repeats 2] [--trick baseline] [--quick]
`--quick`: the tiny policy on its own task, 1 step, 1 repeat: the script's code runs without
the real checkpoint (its figures then say nothing about SmolLM2)."""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
import warnings

os.environ.setdefault("WANDB_MODE", "disabled")
warnings.filterwarnings("ignore")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--trick", default="baseline", help="baseline: beta 0.04, a reference model")
    ap.add_argument("--quick", action="store_true", help="the tiny policy, 1 step: the script runs")
    ns = ap.parse_args()
    if ns.quick:
        ns.steps, ns.repeats = 1, 1
    model = ["model=tiny"] if ns.quick else \
        ["model=smollm2-135m", "task=gsm8k", "task.dataset.subset=null",
         "task.dataset.train=fixture:math_train.jsonl",
         "task.dataset.eval=fixture:math_test.jsonl", "task.dataset.eval_size=4"]

    from grpo_ablate.runtime import quiet_libraries

    quiet_libraries()
    from datasets import Dataset
    from transformers import AutoTokenizer
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_ablate.config import grpo_kwargs, specs_for
    from grpo_ablate.models import resolve_model_path
    from grpo_ablate.tasks import get_task
    from grpo_ablate.training.train import train_one

    (spec,) = specs_for([*model, f"trainer.max_steps={ns.steps}", "eval.every_steps=0",
                         f"trick={ns.trick}", "run_cache=null"], multirun=False)
    task = get_task(spec.config["task"])
    path = resolve_model_path(spec.config, task)
    gc.collect()
    gc.freeze()  # as a sweep's worker does once its libraries are loaded: both sides gain

    def bare() -> float:
        tokenizer = AutoTokenizer.from_pretrained(path)
        task.use_tokenizer(tokenizer)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            trainer = GRPOTrainer(model=path, reward_funcs=task.reward,
                                  args=GRPOConfig(**grpo_kwargs(spec.config, tmp)),
                                  train_dataset=Dataset.from_list(task.train_rows()),
                                  processing_class=tokenizer)
            trainer.remove_callback(PrinterCallback)
            trainer.train()
            return (time.perf_counter() - t0) / ns.steps

    evals: list[float] = []

    def ours() -> float:
        record, _ = train_one(spec)
        assert record.status == "completed", record.error
        evals.append(record.cost["eval_seconds"])
        return (record.wall_seconds - record.cost["eval_seconds"]) / record.steps

    mine, theirs = [], []
    for i in range(ns.repeats):
        for fn in ([ours, bare] if i % 2 == 0 else [bare, ours]):
            (mine if fn is ours else theirs).append(fn())
        print(f"repeat {i}: grpo-ablate {mine[-1]:.2f} s/step, bare TRL {theirs[-1]:.2f} s/step "
              f"(grpo-ablate's start and end evaluations: {evals[-1]:.1f}s)", flush=True)
    a, b = statistics.median(mine), statistics.median(theirs)
    print(f"real_seconds_per_step_grpo_ablate={a:.2f}")
    print(f"real_seconds_per_step_trl={b:.2f}")
    print(f"real_eval_seconds={statistics.median(evals):.1f} (4 held-out prompts, greedy and 1 "
          "sampled, at start and end; the start one reused from the cache after the first run)")
    print(f"real_overhead_ratio={a / b:.3f}")


if __name__ == "__main__":
    main()
