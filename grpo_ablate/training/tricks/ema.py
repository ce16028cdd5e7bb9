"""EMA of the policy weights, evaluated beside the raw weights (TRL's BEMACallback only
saves it). The shadow copy lives in float32 on the model's device."""

from __future__ import annotations

from contextlib import contextmanager

import torch


class WeightEMA:
    def __init__(self, model: torch.nn.Module, decay: float,
                 shadow: dict[str, torch.Tensor] | None = None) -> None:
        """`shadow`: averaged weights to continue from (a resumed run's); else the model's."""
        self.decay = decay
        # The trainable weights only: with a LoRA adapter the frozen base never moves, and
        # a shadow of it would hold a second copy of the model for nothing.
        self.shadow = {n: p.detach().float().clone() if shadow is None
                       else shadow[n].to(device=p.device, dtype=torch.float32)
                       for n, p in trainable(model)}

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        for name, param in trainable(model):
            self.shadow[name].mul_(self.decay).add_(param.detach().float(), alpha=1 - self.decay)

    @contextmanager
    def swapped_in(self, model: torch.nn.Module):
        """Temporarily load the averaged weights into `model` (for evaluation)."""
        backup = {n: p.detach().clone() for n, p in trainable(model)}
        with torch.no_grad():
            for name, param in trainable(model):
                param.copy_(self.shadow[name].to(param.dtype))
        try:
            yield model
        finally:
            with torch.no_grad():
                for name, param in trainable(model):
                    param.copy_(backup[name])


def trainable(model: torch.nn.Module):
    """(name, parameter) for every weight the optimizer updates."""
    return ((n, p) for n, p in model.named_parameters() if p.requires_grad)
