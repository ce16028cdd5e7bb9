"""The embedded tiny policy: a real transformers causal LM with a character tokenizer,
built from a config and SFT-trained locally, cached on disk by config hash; and the chat
task's tiny reward model. torch, tokenizers and transformers are imported inside the
functions that build (heavy; importing this module stays cheap).

Real checkpoints skip all of this: `model.path` names a hub id or a local checkpoint.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

from filelock import FileLock

from grpo_ablate.runtime import build_threads, cache_root, say, stable_hash

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]


def build_tokenizer(chars: list[str]):
    """A character tokenizer over the task's alphabet (one token per character)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast  # heavy

    vocab = {tok: i for i, tok in enumerate(SPECIALS + chars)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()  # join characters back without spaces
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
        unk_token="<unk>", padding_side="left",
    )


def policy_key(arch: dict[str, Any], sft: dict[str, Any], task: dict[str, Any]) -> str:
    return stable_hash({"arch": arch, "sft": sft, "task": task, "v": 2}, 16)


def _sft_batch(task, rng, tokenizer, batch_size):
    import torch  # heavy

    pairs = [task.sft_sample(rng) for _ in range(batch_size)]
    ids = [tokenizer(p + c)["input_ids"] + [tokenizer.eos_token_id] for p, c in pairs]
    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), tokenizer.pad_token_id)
    labels = torch.full((len(ids), width), -100)
    for i, (x, (prompt, _)) in enumerate(zip(ids, pairs, strict=True)):
        input_ids[i, : len(x)] = torch.tensor(x)
        n_prompt = 1 + len(prompt)  # bos + the prompt's characters
        labels[i, n_prompt : len(x)] = torch.tensor(x[n_prompt:])  # learn the answer and eos only
    return input_ids, labels


def sft_train(arch: dict, sft: dict, task, out_dir: Path, progress=None) -> None:
    """Teacher-forced SFT on the task's demonstrations; deterministic for a given config.
    `progress(step, steps)` is called now and then (the build's progress line)."""
    import torch  # heavy
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(sft["seed"])
    rng = random.Random(sft["seed"])
    tokenizer = build_tokenizer(task.policy_alphabet())
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=arch["hidden_size"],
        intermediate_size=arch["intermediate_size"], num_hidden_layers=arch["num_layers"],
        num_attention_heads=arch["num_heads"], num_key_value_heads=arch["num_heads"],
        max_position_embeddings=task.max_text_length(), pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=sft["lr"], weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / sft["steps"])
    model.train()
    for step in range(sft["steps"]):
        if progress is not None:
            progress(step, sft["steps"])
        input_ids, labels = _sft_batch(task, rng, tokenizer, sft["batch_size"])
        mask = (input_ids != tokenizer.pad_token_id).long()
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def tiny_policy_path(arch: dict, sft: dict, data_key: dict) -> Path:
    """Where the SFT checkpoint for this config and task data is (or will be) cached."""
    return cache_root() / "policies" / policy_key(arch, sft, data_key)


def ensure_tiny_policy(arch: dict, sft: dict, task) -> Path:
    """Path of the cached SFT checkpoint for this config and task, training it once if
    missing. A lock makes concurrent sweeps wait for one builder; the rename makes it atomic."""
    final = tiny_policy_path(arch, sft, task.policy_data_config())
    root, key = final.parent, final.name
    root.mkdir(parents=True, exist_ok=True)
    if (final / "config.json").is_file():
        return final
    with FileLock(str(root / f"{key}.lock")):
        if (final / "config.json").is_file():
            return final
        tmp = root / f".{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        what = f"building the embedded policy for task {task.name} (first use; cached in {final})"
        with build_threads():  # as a sweep's worker would: a busy machine slows it, no more
            sft_train(arch, sft, task, tmp, progress=ProgressLine(what))
        os.replace(tmp, final)
    return final


class ProgressLine:
    """`<what>: step 300/1500, ETA 2m10s`, about every 10% of the steps and at most every 10 s
    apart (the rate from the steps done so far)."""

    def __init__(self, what: str, every_s: float = 10.0) -> None:
        self.what, self.every_s = what, every_s
        self.start = self.last = time.perf_counter()

    def __call__(self, step: int, steps: int) -> None:
        now = time.perf_counter()
        tenth = max(1, steps // 10)
        if step == 0:
            say(f"{self.what}: {steps} SFT steps")
            return
        if step % tenth and now - self.last < self.every_s:
            return
        self.last = now
        left = (steps - step) * (now - self.start) / step
        say(f"{self.what}: step {step}/{steps}, ETA {int(left // 60)}m{int(left % 60):02d}s")


def ensure_tiny_reward_model(task) -> Path:
    """The embedded reward model for the chat task: a 1-layer Llama sequence classifier over
    the task's characters, randomly initialised from a fixed seed and cached. Independent of
    the policy; it exercises the reward-model path, it has learned nothing."""
    from transformers import LlamaForSequenceClassification

    alphabet = task.policy_alphabet()
    key = policy_key({"rm": 1}, {"seed": 0}, {"alphabet": "".join(alphabet)})
    root = cache_root() / "reward_models"
    root.mkdir(parents=True, exist_ok=True)
    final = root / key
    with FileLock(str(root / f"{key}.lock")):
        if not (final / "config.json").is_file():
            import torch  # heavy
            from transformers import LlamaConfig

            torch.manual_seed(0)
            tokenizer = build_tokenizer(alphabet)
            config = LlamaConfig(
                vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                num_labels=1)
            tmp = root / f".{key}.tmp-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            LlamaForSequenceClassification(config).save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            os.replace(tmp, final)
    return final
