"""The source review's baseline recipe as data, and where a run's
config departs from it. The report prints the departures, so a study on a small model or
a CPU says plainly which of the review's settings it could not afford."""

from __future__ import annotations

from typing import Any

from grpo_ablate.config.schema import get

# key -> (the review's value, a test of a config value against it)
REVIEW_RECIPE: dict[str, tuple[str, Any]] = {
    "trainer.num_generations": ("G = 16", lambda v: v == 16),
    "trainer.temperature": ("1.0", lambda v: v == 1.0),
    "trainer.top_p": ("0.95", lambda v: v == 0.95),
    "trainer.beta": ("0.04", lambda v: v == 0.04),
    "trainer.use_bias_correction_kl": ("the per-token k3 KL, not weighted by the importance ratio",
                                       lambda v: v is False),
    "trainer.loss_type": ("the GRPO objective (TRL 'grpo')", lambda v: v == "grpo"),
    "trainer.lr_scheduler_type": ("constant", lambda v: v == "constant"),
    "trainer.max_grad_norm": ("1.0", lambda v: v == 1.0),
    "trainer.num_iterations": ("one update per batch", lambda v: v == 1),
    "recipe.prompts_per_step": (">= 64 groups per step", lambda v: v is not None and v >= 64),
    "trainer.max_completion_length": ("1024 or 2048 (95th percentile of SFT lengths)",
                                      lambda v: v is not None and v >= 1024),
    "trainer.learning_rate": ("5e-7 at 7B (scaled per model)", lambda v: v is not None and v <= 1e-6),
}


def recipe_departures(config: dict) -> list[str]:
    """`key=value (review: ...)` for every recipe setting this config does not follow."""
    out = []
    lora = get(config, "model.lora", None)
    if lora:
        out.append(f"model.lora=r{lora['r']} alpha {lora['alpha']} (review: full fine-tuning; "
                   "a LoRA adapter usually wants a learning rate 10-100x full fine-tuning's: "
                   f"trainer.learning_rate={get(config, 'trainer.learning_rate', None)})")
    for key, (review, ok) in REVIEW_RECIPE.items():
        value = get(config, key, None)
        if value is not None and not ok(value):
            out.append(f"{key}={value} (review: {review})")
    return out
