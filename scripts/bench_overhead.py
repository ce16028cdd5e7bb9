"""grpo-ablate's overhead over a bare trl.GRPOTrainer, same GRPOConfig, model and seed.

Alternates the two in one process (so machine noise hits both alike) and prints the
median ratio of their training times as its last line: overhead_ratio=<ratio>.
Target: <= 1.05.  Usage: python scripts/bench_overhead.py [--repeats 5] [--steps 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings

os.environ.setdefault("WANDB_MODE", "disabled")
warnings.filterwarnings("ignore")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40)
    ns = ap.parse_args()

    import transformers
    from datasets import Dataset
    from transformers import AutoTokenizer
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_ablate.config import grpo_kwargs, specs_for
    from grpo_ablate.tasks import get_task
    from grpo_ablate.train import resolve_model_path, train_one

    transformers.logging.set_verbosity_error()
    # Periodic evals are an extra grpo-ablate does on purpose; compare the training itself.
    (spec,) = specs_for([f"trainer.max_steps={ns.steps}", "eval.every_steps=0"], multirun=False)
    task = get_task(spec.config["task"])
    path = resolve_model_path(spec.config, task)
    tok = AutoTokenizer.from_pretrained(path)

    def bare() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()  # like train_one: building the trainer counts
            t = GRPOTrainer(model=path, reward_funcs=task.reward,
                            args=GRPOConfig(**grpo_kwargs(spec.config, tmp)),
                            train_dataset=Dataset.from_list(task.train_rows()), processing_class=tok)
            t.remove_callback(PrinterCallback)  # train_one does the same: no per-step printing
            t.train()
            return time.perf_counter() - t0

    def ours() -> float:
        record, _ = train_one(spec)
        assert record.status == "completed", record.error
        return record.wall_seconds

    ratios = []
    for i in range(ns.repeats):
        a, b = (ours(), bare()) if i % 2 == 0 else tuple(reversed((bare(), ours())))
        ratios.append(a / b)
        print(f"repeat {i}: grpo-ablate {a:.2f}s  bare TRL {b:.2f}s  ratio {a / b:.3f}", flush=True)
    print("note: grpo-ablate's time includes loading, its start and end evaluations and the record")
    print(f"overhead_ratio={statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
