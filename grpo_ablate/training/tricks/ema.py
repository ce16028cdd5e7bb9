"""EMA of the policy weights, evaluated beside the raw weights (TRL's BEMACallback only
saves it). The shadow copy lives in float32 on the model's device."""

from __future__ import annotations

from contextlib import contextmanager

import torch


class WeightEMA:
    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.shadow = {n: p.detach().float().clone() for n, p in model.named_parameters()}

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        for name, param in model.named_parameters():
            self.shadow[name].mul_(self.decay).add_(param.detach().float(), alpha=1 - self.decay)

    @contextmanager
    def swapped_in(self, model: torch.nn.Module):
        """Temporarily load the averaged weights into `model` (for evaluation)."""
        backup = {n: p.detach().clone() for n, p in model.named_parameters()}
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(self.shadow[name].to(param.dtype))
        try:
            yield model
        finally:
            with torch.no_grad():
                for name, param in model.named_parameters():
                    param.copy_(backup[name])
