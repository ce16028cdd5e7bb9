"""A run's identity: `run_id`, the hash of everything that changes its computation (and
nothing else), and `RunSpec`, one validated run under that id. `computation_key` is the
same idea without the arm's name and the seed: two arms with equal keys are identical by
construction."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_ablate import hook_tricks
from grpo_ablate.runtime import stable_hash

# Each top-level key's role in a run's identity, declared once; `run_id` and
# `computation_key` are both derived from it. Every key not named is `computation`: what the
# run computes, in both.
#   name: which run of that computation (the arm's name, the seed): in the run id only;
#   bookkeeping: where a run is written and watched, how a sweep schedules it (its launcher,
#     its adaptive ladder, its checkpoints, where it pauses for an early-stop look): in
#     neither.
ROLES = {"trick": "name", "seed": "name",
         **dict.fromkeys(("sweep_name", "out_root", "sweep_dir", "run_cache", "logger",
                          "adaptive", "launch", "checkpoint", "early_stop"),
                       "bookkeeping")}
# Keys added after records existed: in the identity only when set, so older records (and
# run-cache entries) keep their ids.
_FAULTS_IF_SET = ("reward_raises_on_rank", "planted_rewards")


def _computation(data: dict) -> dict:
    """What a run computes: its config less the names and the bookkeeping, with the
    special cases the roles cannot say."""
    ident = {k: v for k, v in data.items() if ROLES.get(k, "computation") == "computation"}
    # In reward units, task.shaping only reaches the computation through hooks (which are in
    # the identity); as quantiles, how they are measured is part of it.
    task = data.get("task") or {}
    if (task.get("shaping") or {}).get("scale", "units") == "units":
        task = {k: v for k, v in task.items() if k != "shaping"}
    ident["task"] = task
    if (data.get("model") or {}).get("lora", "unset") is None:  # added later: only when set
        ident["model"] = {k: v for k, v in data["model"].items() if k != "lora"}
    ident["hooks"] = {k: v for k, v in (data.get("hooks") or {}).items()
                      if not (v is None and hook_tricks.added_later(k))}
    revised = hook_tricks.revisions(data)
    if revised:  # only where a hook that changed is on: every other run keeps its id
        ident["hook_revisions"] = revised
    ident["faults"] = {k: v for k, v in (data.get("faults") or {}).items()
                       if k != "sleep_per_step" and not (k in _FAULTS_IF_SET and v is None)}
    # Where the processes run does not change the computation; how many, and the engine, do
    # (each process samples its own share). One process: no entry, as before this block.
    launch = data.get("launch") or {}
    if launch.get("processes", 1) > 1:
        ident["launch"] = {"processes": launch["processes"], "accelerate": launch["accelerate"]}
    return ident


def run_id(data: dict) -> str:
    """The hash of what a run computes and which run of it this is."""
    # A renamed trick keeps its runs' first name here: its run ids and cached runs stay valid.
    names = {"trick": {"id": data["trick"].get("formerly") or data["trick"]["id"]},
             **({"seed": data["seed"]} if "seed" in data else {})}
    return stable_hash({**_computation(data), **names}, 16)


def computation_key(config: dict) -> str:
    """A hash of what a run computes, without the arm's name and the seed (the trainer's seed
    is the run's seed): two arms with equal keys are identical by construction."""
    ident = _computation(config)
    ident["trainer"] = {k: v for k, v in (ident.get("trainer") or {}).items() if k != "seed"}
    return stable_hash(ident, 16)


def model_label(config: dict) -> str:
    """The model a run is filed under (its stratum in the report): the checkpoint's name,
    and the adapter's rank when the run trains a LoRA adapter, so a sweep over the same model
    with and without LoRA gets a verdict table for each."""
    lora = config["model"].get("lora")
    return config["model"]["name"] + (f"+lora-r{lora['r']}" if lora else "")


@dataclass(frozen=True)
class RunSpec:
    """One fully resolved, validated run: what to train, and under which id to record it;
    `job` the overrides a sweep launches it with (not part of what it is)."""

    config: dict[str, Any]
    run_id: str
    job: tuple[str, ...] = field(default=(), compare=False)

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
