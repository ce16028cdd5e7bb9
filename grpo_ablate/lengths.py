"""`grpo-ablate lengths [overrides]`: sample the SFT policy on the task's train prompts and
print the completion-length percentiles, with the review's rule for the max completion
length: its 95th percentile (shared/seed/DIGEST.md, monitoring)."""

from __future__ import annotations

import math

PERCENTILES = (50, 90, 95, 99)


def percentile(values: list[int], q: float) -> int:
    """Nearest-rank percentile (an observed length, never an interpolated one)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def completion_lengths(spec, prompts: int, cap: int) -> list[int]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_ablate.tasks import get_task
    from grpo_ablate.tasks.evaluation import isolated_rng
    from grpo_ablate.train import resolve_model_path

    cfg = spec.config
    task = get_task(cfg["task"])
    path = resolve_model_path(cfg, task)
    tokenizer = AutoTokenizer.from_pretrained(path)
    task.use_tokenizer(tokenizer)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    rows = task.train_rows()[:prompts]
    texts = [r["prompt"] if isinstance(r["prompt"], str) else tokenizer.apply_chat_template(
        r["prompt"], add_generation_prompt=True, tokenize=False) for r in rows]
    lengths = []
    tr = cfg["trainer"]
    with isolated_rng(cfg["seed"]), torch.no_grad():
        for i in range(0, len(texts), 16):
            enc = tokenizer(texts[i:i + 16], return_tensors="pt", padding=True,
                            padding_side="left").to(model.device)
            out = model.generate(**enc, max_new_tokens=cap, do_sample=True,
                                 temperature=tr["temperature"], top_p=tr["top_p"],
                                 top_k=tr["top_k"] or None, pad_token_id=tokenizer.pad_token_id)
            for seq in out[:, enc["input_ids"].shape[1]:].tolist():
                ends = [j for j, t in enumerate(seq) if t in (tokenizer.eos_token_id,
                                                              tokenizer.pad_token_id)]
                lengths.append(ends[0] + 1 if ends else len(seq))
    return lengths


def main(spec, prompts: int = 64, cap: int = 4096) -> int:
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
