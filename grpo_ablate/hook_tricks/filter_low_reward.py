"""Low-reward filtering: in [start, end) of training, samples whose reward is under the
threshold are dropped (the hook point `drop_samples`). Their rewards become NaN before TRL's
group advantage (TRL leaves an all-NaN row out of its group's mean and std and gives it
advantage 0), so the kept samples' advantages are computed over the kept samples only, as the
review defines the trick; the dropped ones leave the loss mask and every normaliser."""

from __future__ import annotations

import json
from typing import Any

from grpo_ablate.hook_tricks import DropBatch, HookTrick, counted_share, register
from grpo_ablate.hook_tricks.shared import shaping_quantiles
from grpo_ablate.values import is_fraction, is_number


def filter_active(step: int, max_steps: int, start: float, end: float) -> bool:
    """Whether filtering applies at this optimizer step: in [start, end) of training."""
    progress = step / max(1, max_steps)
    return start <= progress < end


def low_reward_keep_mask(rewards: Any, threshold: float) -> Any:
    """1 for samples kept, 0 for samples whose reward is under the threshold."""
    import torch

    return (rewards >= threshold).to(torch.long)


def _at_drop(batch: DropBatch, window: dict) -> Any:
    if not filter_active(batch.step, batch.max_steps, window["start"], window["end"]):
        return None
    return low_reward_keep_mask(batch.rewards, window["threshold"]).bool()


def _check(window: dict, cfg: dict) -> str | None:
    problem = shaping_quantiles(cfg, "hooks.filter_low_reward.threshold", window["threshold"])
    if problem is None and not window["start"] < window["end"]:
        problem = (f"hooks.filter_low_reward={json.dumps(window)}: must have start < end, "
                   "both fractions of training in [0, 1]")
    return problem


register(HookTrick(
    "filter_low_reward", "drop samples under threshold in [start, end) of training",
    fields={"threshold": (is_number, "a number"),
            "start": (is_fraction, "a fraction of training in [0, 1]"),
            "end": (is_fraction, "a fraction of training in [0, 1]")},
    measure=("filter_dropped_in_window", "samples dropped, in the filter's window"),
    drop_samples=_at_drop, dropped_metric="filter/frac_dropped", check=_check,
    details=lambda counts: {"filter_dropped_in_window": counted_share(counts, "filter_low_reward")},
    in_reward_units=lambda window, q: {**window, "threshold": q(window["threshold"])},
    reward_values=lambda window: {"filter_threshold": float(window["threshold"])}))
