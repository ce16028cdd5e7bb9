"""The tricks TRL lacks, as small pure functions on tensors. Native tricks (beta, grad
clip, LR schedule, entropy bonus, G, temperature, epsilon-clip with reuse) are just config:
see conf/trick/. trl_hooks.py wires these functions into TRL's GRPOTrainer.

One file per family: reward_shaping (clip, length penalty), advantages (global
normalisation, low-reward filtering), ema (weight averaging), overlong (TRL's soft overlong
punishment as a second, counted reward)."""

from grpo_ablate.training.tricks.advantages import (
    apply_global_adv_norm,
    filter_active,
    global_adv_norm_share,
    kept_loss_scale,
    low_reward_keep_mask,
)
from grpo_ablate.training.tricks.dynamic_sampling import keep_groups, valid_groups
from grpo_ablate.training.tricks.ema import WeightEMA
from grpo_ablate.training.tricks.overlong import SoftOverlongReward, soft_overlong_cache
from grpo_ablate.training.tricks.reward_shaping import (
    apply_length_penalty,
    apply_reward_clip,
    shape_rewards,
    shaping_in_reward_units,
    shaping_values,
)

__all__ = [
    "SoftOverlongReward", "WeightEMA", "apply_global_adv_norm", "apply_length_penalty", "apply_reward_clip",
    "filter_active", "global_adv_norm_share", "kept_loss_scale", "low_reward_keep_mask",
    "keep_groups", "shape_rewards", "shaping_in_reward_units", "shaping_values",
    "soft_overlong_cache", "valid_groups",
]
