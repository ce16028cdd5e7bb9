"""grpo-ablate's overhead over a bare trl.GRPOTrainer, same GRPOConfig, model and seed.

Alternates the two in one process (so machine noise hits both alike) and prints the
median ratio of their training times as its last line: overhead_ratio=<ratio>.
Target: <= 1.05.  Usage: python scripts/bench_overhead.py [--repeats 11] [--steps 40]
[--override trainer.use_cpu=false --override trainer.bf16=true]  (the GPU check's form)
`--quick`: 1 repeat of 2 steps, to check that the script runs (its figures mean nothing then).
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
    ap.add_argument("--repeats", type=int, default=11)  # 5 proved too noisy here
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--override", action="append", default=[],
                    help="a config override for all three, e.g. trainer.use_cpu=false (GPU check)")
    ap.add_argument("--quick", action="store_true", help="1 repeat of 2 steps: the script runs")
    ns = ap.parse_args()
    if ns.quick:
        ns.repeats, ns.steps = 1, 2

    import transformers
    from datasets import Dataset
    from transformers import AutoTokenizer
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_ablate.config import grpo_kwargs, specs_for
    from grpo_ablate.models import resolve_model_path
    from grpo_ablate.tasks import get_task
    from grpo_ablate.training.train import build_trainer, train_one

    transformers.logging.set_verbosity_error()
    # Periodic evals are an extra grpo-ablate does on purpose; compare the training itself.
    (spec,) = specs_for([f"trainer.max_steps={ns.steps}", "eval.every_steps=0",
                         "run_cache=null", *ns.override], multirun=False)
    task = get_task(spec.config["task"])
    path = resolve_model_path(spec.config, task)
    tok = AutoTokenizer.from_pretrained(path)

    task.use_tokenizer(tok)

    def timed_training(build) -> float:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()  # like train_one: building the trainer counts
            t = build(tmp)
            t.remove_callback(PrinterCallback)  # train_one does the same: no per-step printing
            t.train()
            return time.perf_counter() - t0

    def bare() -> float:
        return timed_training(lambda tmp: GRPOTrainer(
            model=path, reward_funcs=task.reward, args=GRPOConfig(**grpo_kwargs(spec.config, tmp)),
            train_dataset=Dataset.from_list(task.train_rows()), processing_class=tok))

    def hooked() -> float:  # grpo-ablate's trainer as a run builds it: no evals or record
        return timed_training(lambda tmp: build_trainer(spec, path, tok, task, tmp, []))

    def ours() -> float:
        record, _ = train_one(spec)
        assert record.status == "completed", record.error
        eval_shares.append(record.cost["eval_seconds"] / record.wall_seconds)
        return record.wall_seconds

    import gc

    gc.collect()
    gc.freeze()  # as a sweep's worker does once its libraries are loaded: both sides gain
    ratios, trainer_ratios, eval_shares = [], [], []
    for i in range(ns.repeats):
        order = [ours, bare, hooked] if i % 2 == 0 else [hooked, bare, ours]
        times = {fn.__name__: fn() for fn in order}
        a, b, h = times["ours"], times["bare"], times["hooked"]
        ratios.append(a / b)
        trainer_ratios.append(h / b)
        print(f"repeat {i}: grpo-ablate run {a:.2f}s  its trainer alone {h:.2f}s  bare TRL {b:.2f}s",
              flush=True)
    print("note: a grpo-ablate run also loads the tokenizer, evaluates held-out prompts at start "
          "and end, and writes nothing here (the record is built, not saved)")
    print(f"trainer_overhead_ratio={statistics.median(trainer_ratios):.3f}")
    print(f"overhead_ratio={statistics.median(ratios):.3f}")
    print(f"eval_share={statistics.median(eval_shares):.3f} (held-out evaluations / run wall; "
          "the start-of-run one reused from the cache after the first run)")


if __name__ == "__main__":
    main()
