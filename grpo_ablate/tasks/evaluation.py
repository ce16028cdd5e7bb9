"""What every task's held-out evaluation shares: batched generation (split over the processes
of a multi-process run, or on TRL's vLLM engine), in an isolated RNG, so it never changes the
training run. torch is imported inside the functions: the config layer imports the tasks
to check their data, and must not load torch to do so."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar


@contextmanager
def isolated_rng(seed: int) -> Iterator[None]:
    """Seed the evaluation's sampling, and restore every RNG the seeding touches afterwards:
    the CPU generator and every CUDA device's. (`fork_rng(devices=[])` alone restores only
    the CPU, while `manual_seed` reseeds CUDA too: evaluations would perturb GPU training.)"""
    import torch  # heavy: loaded where a model is evaluated

    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices, device_type="cuda"):
        torch.manual_seed(seed)
        yield


@contextmanager
def evaluating(model, seed: int) -> Iterator[None]:
    """The model in eval mode without gradients, in an isolated RNG (so an evaluation never
    changes the training run), back in its own mode afterwards."""
    import torch  # heavy: loaded where a model is evaluated

    was_training = model.training
    model.eval()
    try:
        with isolated_rng(seed), torch.no_grad():
            yield
    finally:
        model.train(was_training)


def prompt_outcomes(ids: list[str], greedy: list[bool], sampled: list[bool] | None,
                    rewards: list[float], pool: int | None = None) -> dict:
    """One held-out evaluation per prompt, columnwise (the record's `prompts`): its stable
    id, greedy correct (0/1), the share of its k samples that were correct (None when not
    sampled), and its greedy completion's reward. `sampled` holds the k samples of every
    prompt in turn (prompts x k, the prompt list repeated k times). `pool`: how many prompts
    the task's data could hold out (with the training rows as they are), when it knows."""
    n = len(ids)
    shares = None
    if sampled is not None:
        k = len(sampled) // n
        shares = [sum(sampled[i + j * n] for j in range(k)) / k for i in range(n)]
    out = {"ids": list(ids), "greedy": [int(g) for g in greedy], "sampled": shares,
           "reward": [float(r) for r in rewards]}
    return out if pool is None else {**out, "pool": int(pool)}


def prompt_id(text: str) -> str:
    """A held-out prompt's stable id: the same question gets the same id in every run, arm
    and machine (the prompt's text as the dataset gives it, hashed)."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


EVAL_BATCH = 64  # prompts per generate() call in a held-out evaluation

# The generation backend of a run that trains with vLLM (trainer.use_vllm): (texts,
# max_new_tokens, temperature or None for greedy) -> completions. None: the model's generate.
Backend = Callable[[list[str], int, "float | None"], list[str]]
_BACKEND: ContextVar[Backend | None] = ContextVar("generation_backend", default=None)


@contextmanager
def generation_backend(backend: Backend | None) -> Iterator[None]:
    """Evaluate with `backend` (the engine training generates with) inside this block."""
    token = _BACKEND.set(backend)
    try:
        yield
    finally:
        _BACKEND.reset(token)


def generate(model, tokenizer, texts: list[str], max_new_tokens: int,
             temperature: float | None, batch: int = EVAL_BATCH) -> list[str]:
    """Completions for prompt texts, `batch` prompts per call: greedy when temperature is
    None, else sampled (top_p 1, no top_k). In a multi-process run every process generates
    its own share and the shares are gathered once, so each process returns the whole list."""
    rank, world = process_group()
    if world == 1:
        return _generate(model, tokenizer, texts, max_new_tokens, temperature, batch)
    import torch.distributed as dist

    share = -(-len(texts) // world)
    mine = texts[rank * share:(rank + 1) * share]
    # Equal shares (padded with a repeat), so every process makes the same generate calls:
    # under ZeRO-3 each forward pass gathers parameters from all of them.
    padded = mine + [texts[-1]] * (share - len(mine)) if texts else []
    out = _generate(model, tokenizer, padded, max_new_tokens, temperature, batch,
                    synced=True)[:len(mine)]
    parts: list[list[str]] = [[] for _ in range(world)]
    dist.all_gather_object(parts, out)
    return [c for part in parts for c in part]


def process_group() -> tuple[int, int]:
    """(rank, world size) of a multi-process run; (0, 1) alone."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _generate(model, tokenizer, texts: list[str], max_new_tokens: int,
              temperature: float | None, batch: int, synced: bool = False) -> list[str]:
    backend = _BACKEND.get()
    if backend is not None:  # vLLM batches and schedules the whole share itself
        return backend(texts, max_new_tokens, temperature) if texts else []
    out: list[str] = []
    kwargs = dict(do_sample=False) if temperature is None else dict(
        do_sample=True, temperature=temperature, top_p=1.0, top_k=0)
    if synced:
        from transformers.integrations import is_deepspeed_zero3_enabled

        # ZeRO-3: a process that finished its share keeps stepping until all have.
        kwargs["synced_gpus"] = is_deepspeed_zero3_enabled()
    for i in range(0, len(texts), batch):
        enc = tokenizer(texts[i:i + batch], return_tensors="pt", padding=True,
                        padding_side="left").to(model.device)
        ids = model.generate(**enc, max_new_tokens=max_new_tokens,
                             pad_token_id=tokenizer.pad_token_id, **kwargs)
        out += tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return out


def policy_rewards(task, model, tokenizer, max_new_tokens: int, temperature: float, n: int,
                   seed: int = 0) -> list[float]:
    """The task reward of one sampled completion for each of the first `n` training prompts:
    the policy's reward distribution (reward tricks set as its quantiles are measured on the
    SFT policy, once per run with a fixed seed, so every arm and seed gets the same values)."""
    rows = task.train_rows()[:n]
    texts = [r["prompt"] if isinstance(r["prompt"], str) else
             tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False)
             for r in rows]
    with evaluating(model, seed):
        completions = generate(model, tokenizer, texts, max_new_tokens, temperature)
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    return [float(x) for x in task.reward(completions, **columns)]
