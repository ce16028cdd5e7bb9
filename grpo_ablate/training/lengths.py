"""`grpo-ablate lengths [--prompts N] [--cap T] [overrides]`: sample the SFT policy once on
each of the first N train prompts, at the recipe's sampling settings, and print the
completion-length percentiles with the review's rule for the max completion length: its
95th percentile (the source review's monitoring rule).

The prompts are sampled together, one batch with a KV cache, and a row leaves the batch the
moment it ends: `generate` would keep computing ended rows until the longest sample stops,
so one runaway sample cost its whole batch the cap (and one prompt at a time reads every
weight once per token: 22 tokens/s for SmolLM2-135M on 2 cores). A progress line shows the
completions done, the tokens generated and an ETA."""

from __future__ import annotations

import math
import time

import torch
from transformers import AutoModelForCausalLM, DynamicCache
from transformers.generation import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from grpo_ablate.config import RunSpec
from grpo_ablate.runtime import say
from grpo_ablate.tasks import task_and_tokenizer
from grpo_ablate.tasks.evaluation import isolated_rng

PERCENTILES = (50, 90, 95, 99)
def percentile(values: list[int], q: float) -> int:
    """Nearest-rank percentile (an observed length, never an interpolated one)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def completion_lengths(spec: RunSpec, prompts: int, cap: int) -> list[int]:
    cfg = spec.config
    task, path, tokenizer = task_and_tokenizer(cfg)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    rows = task.train_rows()[:prompts]
    texts = [r["prompt"] if isinstance(r["prompt"], str) else tokenizer.apply_chat_template(
        r["prompt"], add_generation_prompt=True, tokenize=False) for r in rows]
    stops = {t for t in (tokenizer.eos_token_id, tokenizer.pad_token_id) if t is not None}
    stops |= set(_as_list(model.generation_config.eos_token_id))
    tr = cfg["trainer"]
    with isolated_rng(cfg["seed"]):
        return sample_lengths(model, tokenizer, texts, cap, stops, tr["temperature"],
                              tr["top_p"], tr["top_k"], Progress(len(texts)))


class Progress:
    """`lengths: 12/16 completions, 3472 tokens generated (58/s), ETA 1m05s`, every 5 s."""

    def __init__(self, total: int) -> None:
        self.total, self.start, self.last = total, time.perf_counter(), 0.0

    def __call__(self, done: int, tokens: int, active: int, final: bool = False) -> None:
        now = time.perf_counter()
        if not final and now - self.last < 5:
            return
        self.last = now
        rate = tokens / max(1e-9, now - self.start)
        # The rows still running need at least as many tokens again as the finished ones had.
        left = 0.0 if final else active * (tokens / max(1, self.total)) / max(rate, 1e-9)
        say(f"lengths: {done}/{self.total} completions, {tokens} tokens generated ({rate:.0f}/s), "
            f"{active} running, ETA {int(left // 60)}m{int(left % 60):02d}s")


@torch.no_grad()
def sampling_warpers(temperature: float, top_p: float, top_k: int | None) -> LogitsProcessorList:
    """The logits warpers of sampling at these settings, in transformers' order."""
    warpers = LogitsProcessorList([TemperatureLogitsWarper(temperature)])
    if top_k:
        warpers.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    return warpers


def prefill(model, tokenizer, texts: list[str]):
    """The left-padded batch, its positions, its KV cache and the next-token logits."""
    enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left").to(model.device)
    positions = (enc["attention_mask"].long().cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache()
    logits = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                   position_ids=positions, past_key_values=cache, use_cache=True).logits[:, -1, :]
    return enc, positions, cache, logits


def sample_lengths(model, tokenizer, texts: list[str], cap: int, stops: set[int],
                   temperature: float, top_p: float, top_k: int | None,
                   progress=None) -> list[int]:
    """One sampled completion per text, at these settings; each completion's length in
    tokens (its stop token included; `cap` when it never stopped). One batch, left-padded,
    with a KV cache; a row that stops leaves the batch (and the cache) at once."""
    warpers = sampling_warpers(temperature, top_p, top_k)
    enc, positions, cache, logits = prefill(model, tokenizer, texts)
    mask = enc["attention_mask"]
    alive = torch.arange(len(texts), device=model.device)
    last = positions[:, -1]
    stop_ids = torch.tensor(sorted(stops), device=model.device)
    lengths = [cap] * len(texts)
    tokens = 0
    for step in range(cap):
        scores = warpers(enc["input_ids"][alive], logits.float())
        nxt = torch.multinomial(torch.softmax(scores, dim=-1), 1).squeeze(1)
        tokens += len(alive)
        ended = torch.isin(nxt, stop_ids)
        for row in alive[ended].tolist():
            lengths[row] = step + 1
        keep = ~ended
        if step + 1 == cap or not keep.any():
            break
        if not keep.all():  # the ended rows leave the batch and the cache
            index = keep.nonzero().squeeze(1)
            alive, nxt, mask, last = alive[index], nxt[index], mask[index], last[index]
            cache.batch_select_indices(index)
        if progress is not None:
            progress(len(texts) - len(alive), tokens, len(alive))
        mask = torch.cat([mask, mask.new_ones(len(alive), 1)], dim=1)
        last = last + 1
        logits = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=last[:, None],
                       past_key_values=cache, use_cache=True).logits[:, -1, :]
    if progress is not None:
        progress(len(texts), tokens, 0, final=True)
    return lengths


def _as_list(x) -> list:
    return [] if x is None else list(x) if isinstance(x, list | tuple) else [x]


def main(spec: RunSpec, prompts: int = 64, cap: int = 1024) -> int:
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
