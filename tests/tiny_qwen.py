"""A tiny random Qwen2-architecture checkpoint with a real byte-level BPE tokenizer (trained
here on the math fixture) and a ChatML chat template, like Qwen2.5-Instruct's: the
real-checkpoint path (`model=hf model.path=...`, conversational prompts) without a download."""

from __future__ import annotations

import json
from pathlib import Path

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_tiny_qwen2(path: Path) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    from grpo_ablate.tasks.data import FIXTURES

    if (path / "config.json").is_file():
        return path
    texts = [r["question"] + "\n" + r["answer"] for r in map(
        json.loads, (FIXTURES / "math_train.jsonl").read_text().splitlines())]
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts * 4, trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", chat_template=CHATML)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, tie_word_embeddings=True,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# A few steps of the review's recipe, scaled down to seconds.
SMALL_HF = ["model=hf", "task=math", "task.chat=true", "recipe.prompts_per_step=2",
            "recipe.group_size=4", "trainer.max_completion_length=16", "trainer.max_steps=2",
            "task.dataset.eval_size=4", "eval.sampled_k=1", "eval.every_steps=0",
            "trainer.gradient_checkpointing=false", "run_cache=null"]
