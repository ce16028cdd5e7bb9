"""DAPO's soft overlong punishment (Eq. 13) as a second reward function (the hook point
`reward_function`): TRL's own `trl.rewards.get_soft_overlong_punishment`, weighted by
`hooks.soft_overlong.weight` through GRPOConfig's `reward_weights`, and counted (how many
completions it punished) for the record's activity."""

from __future__ import annotations

from collections import Counter

from grpo_ablate.hook_tricks import HookTrick, register
from grpo_ablate.values import is_number


def soft_overlong_cache(max_completion_length: int, cache_fraction: float) -> int:
    """The punished span at the end of the length limit, in tokens (at least one)."""
    return max(1, min(max_completion_length - 1, round(cache_fraction * max_completion_length)))


class SoftOverlongReward:
    """TRL's punishment, counting the completions it scored below 0 into `counts`."""

    def __init__(self, max_completion_length: int, cache_fraction: float,
                 counts: Counter) -> None:
        from trl.rewards import get_soft_overlong_punishment

        self.cache = soft_overlong_cache(max_completion_length, cache_fraction)
        self.punish = get_soft_overlong_punishment(max_completion_length, self.cache)
        self.counts = counts
        self.__name__ = "soft_overlong"  # TRL logs rewards/<name>

    def __call__(self, completion_ids: list[list[int]], **kwargs) -> list[float]:
        rewards = self.punish(completion_ids=completion_ids)
        self.counts["overlong_samples"] += len(rewards)
        self.counts["overlong_punished"] += sum(r < 0 for r in rewards)
        return rewards


def _details(counts: dict) -> dict:
    if "overlong_samples" not in counts:
        return {}
    samples = counts["overlong_samples"]
    return {"overlong_punished": counts.get("overlong_punished", 0) / samples if samples else None}


register(HookTrick(
    "soft_overlong", "TRL's soft overlong punishment (DAPO Eq. 13) as a second reward",
    fields={"cache_fraction": (lambda x: is_number(x) and 0 < x < 1,
                               "a fraction of max_completion_length in (0, 1)"),
            "weight": (lambda x: is_number(x) and x > 0, "a number > 0")},
    measure=("overlong_punished", "completions punished for length"),
    reward_function=lambda value, cfg, counts: (
        SoftOverlongReward(cfg["trainer"]["max_completion_length"], value["cache_fraction"],
                           counts), value["weight"]),
    details=_details, added_later=True))
