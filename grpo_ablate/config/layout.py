"""The batch layout of a run: groups and completions per optimizer step, how they split over
processes, how many GPUs a run holds, and the check that every arm of a sweep trains on the
same layout (a trick file that also changed the batch would change two things at once)."""

from __future__ import annotations

from typing import Any

from grpo_ablate.config.identity import model_label
from grpo_ablate.errors import UserError


def groups_per_process(prompts: Any, procs: Any) -> int:
    """The groups of a step each of `procs` processes takes (they must split evenly)."""
    if int(procs) <= 0 or int(prompts) % int(procs):
        raise ValueError(f"launch.processes={procs}: the {prompts} groups of a step "
                         f"(recipe.prompts_per_step) do not split evenly over {procs} processes; "
                         f"allowed: a divisor of {prompts}")
    return int(prompts) // int(procs)


def exact_div(a: Any, b: Any) -> int:
    if int(b) <= 0 or int(a) % int(b):
        raise ValueError(f"{a} is not a whole multiple of {b}")
    return int(a) // int(b)


def completions_per_step(config: dict) -> int:
    """Completions in one optimizer step: micro-batch x gradient accumulation x processes."""
    tr = config["trainer"]
    return tr["per_device_train_batch_size"] * tr["gradient_accumulation_steps"] \
        * config.get("launch", {}).get("processes", 1)


def groups_per_step(config: dict) -> int:
    """Prompt groups in one optimizer step."""
    return completions_per_step(config) // config["trainer"]["num_generations"]


def gpus_for(config: dict) -> int:
    """GPUs one run needs to itself: launch.gpus_per_job, else one per process on a GPU
    machine; 0 on a CPU run."""
    launch = config["launch"]
    if config["trainer"]["use_cpu"]:
        return 0
    return launch.get("gpus_per_job") or launch["processes"]


def match_budget(data: dict) -> None:
    """budget.match=completions: an arm that changes G keeps the baseline's completions per
    step (fewer or more prompts instead), and a reuse arm trains for more optimizer steps
    so it generates as many completions as the baseline."""
    if data.get("budget", {}).get("match", "none") != "completions":
        return
    tr, recipe = data["trainer"], data["recipe"]
    completions = recipe["prompts_per_step"] * recipe["group_size"]
    if completions % tr["num_generations"]:
        raise UserError(f"budget.match=completions: {completions} completions per step do not "
                        f"split into groups of trainer.num_generations={tr['num_generations']}")
    tr["per_device_train_batch_size"] = completions // (tr["gradient_accumulation_steps"]
                                                       * data["launch"]["processes"])
    tr["max_steps"] = tr["max_steps"] * tr["num_iterations"]


def check_layout(configs: list[tuple[str, dict]]) -> None:
    """Every arm of a (model, task) stratum trains on as many groups per optimizer step as
    its baseline: a trick file that also changed the batch layout would change two things at
    once. (budget.match=completions changes it on purpose, and says so in the record.)
    `configs`: (arm, resolved config) per run."""
    seen: dict[tuple, tuple[int, str]] = {}
    for arm, cfg in configs:
        if cfg["budget"]["match"] != "none":
            continue
        key = (model_label(cfg), cfg["task"]["name"])
        groups = groups_per_step(cfg)
        first = seen.setdefault(key, (groups, arm))
        if groups != first[0]:
            raise UserError(
                f"trick={arm}: {groups} groups per optimizer step where trick={first[1]} has "
                f"{first[0]} ({key[0]}/{key[1]}); allowed: the same layout for every arm "
                "(change recipe.micro_groups or prompts_per_step for all, not in a trick file), "
                "or budget.match=completions")
