"""What every task's held-out evaluation shares: it must never change the training run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def isolated_rng(seed: int) -> Iterator[None]:
    """Seed the evaluation's sampling, and restore every RNG the seeding touches afterwards:
    the CPU generator and every CUDA device's. (`fork_rng(devices=[])` alone restores only
    the CPU, while `manual_seed` reseeds CUDA too: evaluations would perturb GPU training.)"""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices, device_type="cuda"):
        torch.manual_seed(seed)
        yield


EVAL_BATCH = 64  # prompts per generate() call in a held-out evaluation


def generate(model, tokenizer, texts: list[str], max_new_tokens: int,
             temperature: float | None, batch: int = EVAL_BATCH) -> list[str]:
    """Completions for prompt texts, `batch` prompts per call: greedy when temperature is
    None, else sampled (top_p 1, no top_k)."""
    out: list[str] = []
    kwargs = dict(do_sample=False) if temperature is None else dict(
        do_sample=True, temperature=temperature, top_p=1.0, top_k=0)
    for i in range(0, len(texts), batch):
        enc = tokenizer(texts[i:i + batch], return_tensors="pt", padding=True,
                        padding_side="left").to(model.device)
        ids = model.generate(**enc, max_new_tokens=max_new_tokens,
                             pad_token_id=tokenizer.pad_token_id, **kwargs)
        out += tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return out
