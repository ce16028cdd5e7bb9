"""The source review's monitoring rules, applied to a run's history.

Each rule that fires adds one entry to the record's `diagnostics`: which rule, at which
step, what was seen, and the review's advice."""

from __future__ import annotations

import math


def _series(history: list[dict], key: str) -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in history
            if key in r and r[key] is not None and math.isfinite(r[key])]


def kl_limit(max_steps: int) -> float:
    """The review's "KL above 2 within ~1000 steps", scaled to a shorter run."""
    return 2.0 * min(1.0, max_steps / 1000.0)


def diagnose(history: list[dict], max_steps: int, accuracy_gain: float | None,
             min_accuracy_gain: float = 0.0) -> list[dict]:
    hits: list[dict] = []
    limit = kl_limit(max_steps)
    over = [(s, v) for s, v in _series(history, "kl") if v > limit]
    if over:
        s, v = over[0]
        hits.append({"rule": "kl_high", "step": s, "value": v,
                     "message": f"KL {v:.3g} > {limit:.3g} (2 scaled to {max_steps} steps): "
                                "lower the learning rate or raise beta"})
    ent = _series(history, "entropy")
    if ent and ent[0][1] > 0:
        low = [(s, v) for s, v in ent if v < 0.3 * ent[0][1]]
        if low:
            s, v = low[0]
            hits.append({"rule": "entropy_collapse", "step": s, "value": v / ent[0][1],
                         "message": "entropy under 30% of its start: raise the temperature "
                                    "first, then consider an entropy bonus"})
    growth = length_growth(history)
    if growth is not None and growth > 0.2 and (accuracy_gain is None
                                                or accuracy_gain <= min_accuracy_gain):
        hits.append({"rule": "length_growth", "step": history[-1]["step"], "value": growth,
                     "message": f"mean length grew {growth:.0%} without an accuracy gain: "
                                "add a mild length penalty"})
    return hits


def length_growth(history: list[dict]) -> float | None:
    """Mean completion length over the last tenth of steps relative to the first tenth."""
    lengths = [v for _, v in _series(history, "completions/mean_length")]
    if len(lengths) < 2:
        return None
    k = max(1, len(lengths) // 10)
    first, last = sum(lengths[:k]) / k, sum(lengths[-k:]) / k
    return last / first - 1.0 if first > 0 else None
