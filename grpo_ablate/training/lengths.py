"""`grpo-ablate lengths [--prompts N] [--cap T] [overrides]`: sample the SFT policy once on
each of the first N train prompts, at the recipe's sampling settings, and print the
completion-length percentiles with the review's rule for the max completion length: its
95th percentile (shared/seed/DIGEST.md, monitoring).

One generate call per prompt: a batch would keep computing rows that have ended until its
longest sample stops, so one runaway sample would cost the whole batch the cap. A progress
line shows the prompts done, the tokens generated and an ETA."""

from __future__ import annotations

import math
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_ablate.config import RunSpec
from grpo_ablate.models import resolve_model_path
from grpo_ablate.runtime import say
from grpo_ablate.tasks import get_task
from grpo_ablate.tasks.evaluation import isolated_rng

PERCENTILES = (50, 90, 95, 99)
def percentile(values: list[int], q: float) -> int:
    """Nearest-rank percentile (an observed length, never an interpolated one)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def completion_lengths(spec: RunSpec, prompts: int, cap: int) -> list[int]:
    cfg = spec.config
    task = get_task(cfg["task"])
    path = resolve_model_path(cfg, task)
    tokenizer = AutoTokenizer.from_pretrained(path)
    task.use_tokenizer(tokenizer)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    rows = task.train_rows()[:prompts]
    texts = [r["prompt"] if isinstance(r["prompt"], str) else tokenizer.apply_chat_template(
        r["prompt"], add_generation_prompt=True, tokenize=False) for r in rows]
    stops = {t for t in (tokenizer.eos_token_id, tokenizer.pad_token_id) if t is not None}
    stops |= set(_as_list(model.generation_config.eos_token_id))
    tr = cfg["trainer"]
    lengths: list[int] = []
    start, last_line = time.perf_counter(), 0.0
    with isolated_rng(cfg["seed"]), torch.no_grad():
        for i, text in enumerate(texts):
            enc = tokenizer(text, return_tensors="pt").to(model.device)
            out = model.generate(**enc, max_new_tokens=cap, do_sample=True,
                                 temperature=tr["temperature"], top_p=tr["top_p"],
                                 top_k=tr["top_k"] or None, pad_token_id=tokenizer.pad_token_id)
            seq = out[0, enc["input_ids"].shape[1]:].tolist()
            ends = [j for j, t in enumerate(seq) if t in stops]
            lengths.append(ends[0] + 1 if ends else len(seq))
            now = time.perf_counter()
            if now - last_line > 5 or i + 1 == len(texts):
                last_line = now
                left = (len(texts) - i - 1) * (now - start) / (i + 1)
                say(f"lengths: {i + 1}/{len(texts)} prompts, {sum(lengths)} tokens generated "
                    f"({sum(lengths) / (now - start):.0f}/s), ETA {int(left // 60)}m{int(left % 60):02d}s")
    return lengths


def _as_list(x) -> list:
    return [] if x is None else list(x) if isinstance(x, list | tuple) else [x]


def main(spec: RunSpec, prompts: int = 64, cap: int = 2048) -> int:
    lengths = completion_lengths(spec, prompts, cap)
    stats = {q: percentile(lengths, q) for q in PERCENTILES}
    cfg = spec.config
    print(f"{cfg['model']['name']} on {cfg['task']['name']}: {len(lengths)} sampled completions "
          f"(temperature {cfg['trainer']['temperature']}, cap {cap} tokens)")
    print("  ".join(f"p{q}={v}" for q, v in stats.items()))
    capped = sum(n >= cap for n in lengths)
    if capped:
        print(f"{capped} completions reached the cap: raise --cap for a true tail")
    print(f"suggested trainer.max_completion_length={stats[95]} (the 95th percentile; now "
          f"{cfg['trainer']['max_completion_length']})")
    return 0
