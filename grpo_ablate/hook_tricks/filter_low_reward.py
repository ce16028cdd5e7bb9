"""Low-reward filtering: in [start, end) of training, samples whose reward is under the
threshold are dropped (the hook point `drop_samples`): they leave the loss mask and every
normaliser, so they take no part in the update.

`advantage_over` says which samples the kept ones' advantages are measured against:
- `group` (the review's trick): the whole group, the dropped samples included; the filter
  acts on the loss alone. The kept samples keep the advantages GRPO gives them.
- `kept`: the kept samples only (their rewards become NaN before TRL's group advantage).
  On 0/1 rewards every kept sample then has reward 1 and advantage 0: no gradient at all,
  so it is refused on such a task (`applies_to`).
The review's words ("dropped, not taking part in the advantage computation", its Chinese
original) read literally are `kept`; that reading gives a 0/1-reward task no gradient,
which cannot "cost 1-2 points on math" as the review reports: docs/tricks.md says why the
arm runs `group`."""

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


def _applies_to(window: dict, kind: str) -> str | None:
    if window["advantage_over"] == "kept" and kind == "binary":
        return ("advantage_over=kept leaves only reward-1 samples, each with advantage 0: no "
                "gradient on 0/1 rewards (advantage_over=group keeps the group's advantages)")
    return None


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
            "end": (is_fraction, "a fraction of training in [0, 1]"),
            "advantage_over": (lambda x: x in ("group", "kept"), "group or kept")},
    measure=("filter_dropped_in_window", "samples dropped, in the filter's window"),
    drop_samples=_at_drop, dropped_metric="filter/frac_dropped", check=_check,
    drop_from_advantage=lambda window: window["advantage_over"] == "kept",
    applies_to=_applies_to,
    details=lambda counts: {"filter_dropped_in_window": counted_share(counts, "filter_low_reward")},
    in_reward_units=lambda window, q: {**window, "threshold": q(window["threshold"])},
    reward_values=lambda window: {"filter_threshold": float(window["threshold"])}))
