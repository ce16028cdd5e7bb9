"""A run's identity: `run_id`, the hash of everything that changes its computation (and
nothing else), and `RunSpec`, one validated run under that id. `computation_key` is the
same idea without the arm's name and the seed: two arms with equal keys are identical by
construction."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_ablate.runtime import stable_hash

# What does not change the computation, so it does not change the run's identity.
_NOT_IDENTITY = ("sweep_name", "out_root", "sweep_dir", "run_cache", "logger", "adaptive",
                 "launch", "checkpoint")
# Keys added after records existed: in the identity only when set, so older records (and
# run-cache entries) keep their ids.
_IDENTITY_IF_SET = ("reward_raises_on_rank",)
# Keys that never change a run's computation: two arms whose configs differ only here are
# identical by construction.
_BOOKKEEPING = ("trick", "seed", "sweep_name", "out_root", "sweep_dir", "run_cache", "logger",
                "checkpoint")


# Hooks added after records existed: in the identity only when set, so older records (and
# run-cache entries) keep their ids.
_HOOKS_IF_SET = ("soft_overlong", "dynamic_sampling")


def _unset_hooks_dropped(hooks: dict) -> dict:
    return {k: v for k, v in hooks.items() if not (k in _HOOKS_IF_SET and v is None)}


def run_id(data: dict) -> str:
    ident = {k: v for k, v in data.items() if k not in _NOT_IDENTITY}
    # A renamed trick keeps its runs' first name here: its run ids and cached runs stay valid.
    ident["trick"] = {"id": data["trick"].get("formerly") or data["trick"]["id"]}
    # In reward units, task.shaping only reaches the computation through hooks (which are in
    # the identity); as quantiles, how they are measured is part of it.
    task = data.get("task") or {}
    if (task.get("shaping") or {}).get("scale", "units") == "units":
        task = {k: v for k, v in task.items() if k != "shaping"}
    ident["task"] = task
    if (data.get("model") or {}).get("lora", "unset") is None:  # added later: only when set
        ident["model"] = {k: v for k, v in data["model"].items() if k != "lora"}
    ident["hooks"] = _unset_hooks_dropped(data.get("hooks") or {})
    ident["faults"] = {k: v for k, v in data["faults"].items() if k != "sleep_per_step"
                       and not (k in _IDENTITY_IF_SET and v is None)}
    # Where the processes run does not change the computation; how many, and the engine, do
    # (each process samples its own share). One process: no entry, as before this block.
    launch = data.get("launch", {})
    if launch.get("processes", 1) > 1:
        ident["launch"] = {"processes": launch["processes"], "accelerate": launch["accelerate"]}
    return stable_hash(ident, 16)


def computation_key(config: dict) -> str:
    """A hash of what a run computes, without the arm's name and the seed."""
    ident = {k: v for k, v in config.items() if k not in _BOOKKEEPING}
    if (ident.get("model") or {}).get("lora", "unset") is None:
        ident["model"] = {k: v for k, v in ident["model"].items() if k != "lora"}
    ident["hooks"] = _unset_hooks_dropped(ident.get("hooks") or {})
    trainer = {k: v for k, v in (ident.get("trainer") or {}).items() if k != "seed"}
    return stable_hash({**ident, "trainer": trainer}, 16)


def model_label(config: dict) -> str:
    """The model a run is filed under (its stratum in the report): the checkpoint's name,
    and the adapter's rank when the run trains a LoRA adapter, so a sweep over the same model
    with and without LoRA gets a verdict table for each."""
    lora = config["model"].get("lora")
    return config["model"]["name"] + (f"+lora-r{lora['r']}" if lora else "")


@dataclass(frozen=True)
class RunSpec:
    """One fully resolved, validated run: what to train, and under which id to record it."""

    config: dict[str, Any]
    run_id: str

    @property
    def arm(self) -> str:
        return self.config["trick"]["id"]

    @property
    def seed(self) -> int:
        return self.config["seed"]

    @property
    def sweep_dir(self) -> Path:
        return Path(self.config["sweep_dir"])

    @property
    def run_dir(self) -> Path:
        return self.sweep_dir / "runs" / self.run_id
