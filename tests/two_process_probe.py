"""Started by tests/test_launch_distributed.py under `accelerate launch` with 2 CPU processes (gloo):
each process takes its half of one fixed batch and runs the multi-process paths of the tricks
and of the held-out evaluation with accelerate's real gather; the first process writes what
they computed, for the test to compare with the one-process computation over the whole
batch."""

import json
import sys

import torch
from accelerate import Accelerator

from grpo_ablate.hook_tricks.global_adv_norm import apply_global_adv_norm
from grpo_ablate.hook_tricks.shared import kept_loss_scale, on_whole_batch
from grpo_ablate.tasks.evaluation import generate


class EchoModel(torch.nn.Module):
    """Not a language model: `generate` appends each prompt's own first token, so the
    gathered completions show which prompt each process generated for, in which order."""

    device = torch.device("cpu")

    def generate(self, input_ids, attention_mask, max_new_tokens, pad_token_id, **kwargs):
        first = input_ids[torch.arange(len(input_ids)), attention_mask.argmax(1)]  # left-padded
        return torch.cat([input_ids, first[:, None]], 1)


class DigitTokenizer:
    pad_token_id = 0

    def __call__(self, texts, return_tensors, padding, padding_side):
        width = max(len(t.split()) for t in texts)
        ids = [[0] * (width - len(t.split())) + [int(w) for w in t.split()] for t in texts]
        mask = [[0] * (width - len(t.split())) + [1] * len(t.split()) for t in texts]
        return _Batch(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask))

    def batch_decode(self, ids, skip_special_tokens):
        return [" ".join(str(int(i)) for i in row) for row in ids]


class _Batch(dict):
    def to(self, device):
        return self


def main(out_path: str) -> None:
    acc = Accelerator(cpu=True)
    rank, world = acc.process_index, acc.num_processes
    g = torch.Generator().manual_seed(7)
    advantages = torch.randn(24, generator=g) * 3 + 1     # the whole batch: 24 completions
    keep = torch.rand(24, generator=g) > 0.4              # the filter's keep mask
    n = advantages.numel() // world
    mine = slice(rank * n, (rank + 1) * n)
    normalised = on_whole_batch(advantages[mine], acc.gather, rank, apply_global_adv_norm)
    scale = kept_loss_scale(keep[mine], acc.gather, world)
    # A per-sequence loss over this process's micro-batch, as TRL's "grpo" loss takes it,
    # rescaled; DDP averages the processes' losses.
    per_sequence = torch.arange(24, dtype=torch.float32)
    local_loss = (per_sequence[mine] * keep[mine]).mean() * scale
    ddp_loss = acc.gather(local_loss.reshape(1)).mean()
    texts = [f"{i + 1} 5" for i in range(13)]            # 13 prompts: unequal shares
    completions = generate(EchoModel(), DigitTokenizer(), texts, 1, None, batch=4)
    gathered = acc.gather(normalised)
    if rank == 0:
        json.dump({"world": world, "advantages": advantages.tolist(), "keep": keep.tolist(),
                   "normalised": gathered.tolist(), "ddp_loss": ddp_loss.item(),
                   "completions": completions}, open(out_path, "w"))
    acc.wait_for_everyone()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
