"""EMA of the policy weights, evaluated beside the raw weights (TRL's BEMACallback only
saves it): the averaged weights are the arm's policy, its primary metric. The shadow copy
lives in float32 on the model's device. At the hook point `policy_average`: the held-out
evaluation's callback (training/callbacks.py) updates it after each optimizer step and swaps
it in to evaluate the arm's policy."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from grpo_ablate.hook_tricks import HookTrick, register
from grpo_ablate.values import is_number


class WeightEMA:
    def __init__(self, model: Any, decay: float,
                 shadow: dict[str, Any] | None = None) -> None:
        """`shadow`: averaged weights to continue from (a resumed run's); else the model's."""
        import torch

        self.decay = decay
        # The trainable weights only: with a LoRA adapter the frozen base never moves, and
        # a shadow of it would hold a second copy of the model for nothing.
        self.shadow = {n: p.detach().float().clone() if shadow is None
                       else shadow[n].to(device=p.device, dtype=torch.float32)
                       for n, p in trainable(model)}

    def update(self, model: Any) -> None:
        for name, param in trainable(model):  # detached: no graph is built
            self.shadow[name].mul_(self.decay).add_(param.detach().float(), alpha=1 - self.decay)

    @contextmanager
    def swapped_in(self, model: Any):
        """Temporarily load the averaged weights into `model` (for evaluation)."""
        import torch

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


def trainable(model: Any):
    """(name, parameter) for every weight the optimizer updates."""
    return ((n, p) for n, p in model.named_parameters() if p.requires_grad)


def _check(value: dict, cfg: dict) -> str | None:
    if cfg["launch"]["processes"] > 1 and cfg["launch"]["accelerate"] == "zero3":
        return ("hooks.ema: the weight average needs whole parameters on every process, and "
                "launch.accelerate=zero3 shards them; allowed with ema: launch.accelerate=ddp "
                "or zero2")
    return None


register(HookTrick(
    "ema", "averaged weights; the arm's policy (its primary metric)",
    fields={"decay": (lambda x: is_number(x) and 0 < x < 1, "a number in (0, 1)")},
    policy_average=lambda value, model, saved: WeightEMA(model, value["decay"], saved),
    check=_check))
