"""Group statistics over the rows a step keeps, as TRL computes them for its advantage: the
rewards of rows `drop_samples` dropped are left out (NaN), the std is Bessel-corrected
(TRL's `nanstd`), and TRL's 1e-4 is added before dividing. The advantage estimators that
replace TRL's (hook_tricks/rloo.py, maxrl.py, batch_advantage.py) read their groups here."""

from __future__ import annotations

from typing import Any

TRL_EPSILON = 1e-4  # TRL's: advantages / (std + 1e-4)


def kept_rewards(rewards: Any, keep: Any | None) -> Any:
    """The rewards with the dropped rows NaN (all of them kept when `keep` is None)."""
    import torch

    rewards = rewards.to(torch.float64)
    return rewards if keep is None else rewards.masked_fill(~keep.bool(), float("nan"))


def nan_std(values: Any, dim: int | None = None) -> Any:
    """The Bessel-corrected std of the non-NaN values (NaN where fewer than two)."""
    import torch

    n = (~values.isnan()).sum() if dim is None else (~values.isnan()).sum(dim, keepdim=True)
    mean = values.nanmean() if dim is None else values.nanmean(dim, keepdim=True)
    squares = ((values - mean) ** 2).nansum() if dim is None else \
        ((values - mean) ** 2).nansum(dim, keepdim=True)
    return torch.sqrt(squares / (n - 1))


def trl_scale(rewards: Any, group_size: int, scale_rewards: str) -> Any:
    """[completions] what TRL divides each advantage by under `scale_rewards`: its group's
    std + 1e-4 (group), the batch's (batch), or 1 (none). `rewards`: kept_rewards'."""
    import torch

    if scale_rewards == "none":
        return torch.ones_like(rewards)
    if scale_rewards == "batch":
        return (nan_std(rewards) + TRL_EPSILON).expand_as(rewards)
    grouped = rewards.view(-1, group_size)
    return (nan_std(grouped, 1) + TRL_EPSILON).expand_as(grouped).reshape(-1)


def zero_where_dropped(advantages: Any, dtype: Any) -> Any:
    """NaN (a dropped row, or a group too small to have a baseline) -> 0, in `dtype`, as TRL
    gives an unscorable row advantage 0."""
    import torch

    return torch.nan_to_num(advantages, nan=0.0).to(dtype)
