"""Compose (Hydra) and validate a run config into a typed, hashed RunSpec.

Everything a user can get wrong is checked here, before anything trains or is written:
unknown keys (including `+key=` typos, which bypass Hydra's struct check), ranges, and
TRL's own GRPOConfig checks. Errors are `UserError` with one line naming key, value and
what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from grpo_ablate.errors import UserError

# The configs ship inside the package (a wheel carries them); a checkout also shows them at
# the top level (conf/ and sweeps/ are links to these folders).
PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
CONF_DIR = PACKAGE_DIR / "conf"
SWEEPS_DIR = PACKAGE_DIR / "sweeps"

OmegaConf.register_new_resolver("mul", lambda a, b: int(a) * int(b), replace=True)
def _exact_div(a, b) -> int:
    if int(b) <= 0 or int(a) % int(b):
        raise ValueError(f"{a} is not a whole multiple of {b}")
    return int(a) // int(b)


OmegaConf.register_new_resolver("div", _exact_div, replace=True)


def _groups_per_process(prompts, procs) -> int:
    if int(procs) <= 0 or int(prompts) % int(procs):
        raise ValueError(f"launch.processes={procs}: the {prompts} groups of a step "
                         f"(recipe.prompts_per_step) do not split evenly over {procs} processes; "
                         f"allowed: a divisor of {prompts}")
    return int(prompts) // int(procs)


# Groups per forward pass on one process: the model file's micro_groups, or fewer when a
# process holds fewer groups per step (prompts_per_step / launch.processes).
OmegaConf.register_new_resolver(
    "micro", lambda prompts, micro, procs: min(int(micro), _groups_per_process(prompts, procs)),
    replace=True)
OmegaConf.register_new_resolver("cpus", lambda: os.cpu_count() or 1, replace=True)
OmegaConf.register_new_resolver(
    "threads_per", lambda workers: max(1, (os.cpu_count() or 1) // max(1, int(workers))), replace=True)


def register_sweeps() -> None:
    """Expose sweeps/*.yaml as the Hydra group `sweep`, so `sweep=<name>` works from any
    directory and a misspelt name fails with Hydra's list of options."""
    store = ConfigStore.instance()
    for path in sorted(SWEEPS_DIR.glob("*.yaml")):
        store.store(group="sweep", name=path.stem, node=OmegaConf.load(path), package="_global_")


register_sweeps()

# ---------------------------------------------------------------------------- schema
ACCELERATE_CONFIGS = ("ddp", "zero2", "zero3")  # conf/accelerate/<name>.yaml
# Allowed keys per section; None marks a leaf. Values are checked by RULES below.
_LEAF = None
SCHEMA: dict[str, Any] = {
    "seed": _LEAF, "sweep_name": _LEAF, "out_root": _LEAF, "sweep_dir": _LEAF, "run_cache": _LEAF,
    "eval": {"every_steps": _LEAF, "sampled_k": _LEAF, "temperature": _LEAF},
    "budget": {"match": _LEAF},
    "adaptive": {"enabled": _LEAF, "rungs": _LEAF, "alpha": _LEAF, "min_effect": _LEAF,
                 "futility": _LEAF, "metric": _LEAF},
    "guard": {"kl_abort": _LEAF, "min_accuracy_gain": _LEAF},
    "launch": {"processes": _LEAF, "accelerate": _LEAF, "gpus_per_job": _LEAF, "port": _LEAF},
    "faults": {"nan_loss_at_step": _LEAF, "kl_blowup_at_step": _LEAF,
               "reward_raises_at_step": _LEAF, "reward_raises_on_rank": _LEAF,
               "sleep_per_step": _LEAF},
    "recipe": {"name": _LEAF, "prompts_per_step": _LEAF, "group_size": _LEAF,
               "max_grad_norm": _LEAF, "micro_groups": _LEAF},
    "trainer": "GRPOConfig",
    "hooks": {"reward_clip": {"low": _LEAF, "high": _LEAF}, "length_penalty": _LEAF,
              "filter_low_reward": {"threshold": _LEAF, "start": _LEAF, "end": _LEAF},
              "global_adv_norm": _LEAF, "ema": {"decay": _LEAF}},
    "model": {"name": _LEAF, "path": _LEAF,
              "arch": {"hidden_size": _LEAF, "intermediate_size": _LEAF, "num_layers": _LEAF,
                       "num_heads": _LEAF},
              "sft": {"seed": _LEAF, "steps": _LEAF, "lr": _LEAF, "batch_size": _LEAF}},
    # The union of every task's keys (arithmetic | math | code | chat); each task file sets
    # its own.
    "task": {"name": _LEAF, "max_operand": _LEAF, "carry_bug_rate": _LEAF,
             "eval_fraction": _LEAF, "split_seed": _LEAF, "data_file": _LEAF,
             "tiny_completion_length": _LEAF,
             "dataset": {"train": _LEAF, "eval": _LEAF, "subset": _LEAF, "train_split": _LEAF,
                         "eval_split": _LEAF, "train_size": _LEAF, "eval_size": _LEAF},
             "question_field": _LEAF, "answer_field": _LEAF, "answer_format": _LEAF,
             "format_weight": _LEAF, "chat": _LEAF, "system_prompt": _LEAF,
             "prompt_field": _LEAF, "reference_field": _LEAF, "reward_model": _LEAF,
             "max_rm_length": _LEAF,
             "shaping": {"scale": _LEAF, "clip": {"low": _LEAF, "high": _LEAF},
                         "length_penalty": _LEAF, "filter_threshold": _LEAF, "sample": _LEAF},
             "sandbox": {"timeout_s": _LEAF, "cpu_seconds": _LEAF, "memory_mb": _LEAF,
                         "file_mb": _LEAF, "processes": _LEAF}},
    "trick": {"id": _LEAF, "family": _LEAF, "changes": _LEAF, "verdict": _LEAF, "keys": _LEAF},
    "logger": {"backend": _LEAF, "project": _LEAF, "entity": _LEAF, "mode": _LEAF, "dir": _LEAF},
}


def _num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _opt(pred: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda x: x is None or pred(x)


def _unit(x: Any) -> bool:
    return _num(x) and 0.0 <= x <= 1.0


# key -> (predicate, what is allowed)
RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "seed": (lambda x: _int(x) and x >= 0, "an integer >= 0"),
    "trainer.beta": (lambda x: _num(x) and x >= 0, "a number >= 0"),
    "trainer.num_generations": (lambda x: _int(x) and x >= 2, "an integer >= 2"),
    "trainer.temperature": (lambda x: _num(x) and x > 0, "a number > 0"),
    "trainer.top_p": (lambda x: _num(x) and 0 < x <= 1, "a number in (0, 1]"),
    "trainer.max_grad_norm": (_opt(lambda x: _num(x) and x > 0), "a number > 0, or null for none"),
    "trainer.learning_rate": (lambda x: _num(x) and x > 0, "a number > 0"),
    "trainer.max_steps": (lambda x: _int(x) and x >= 1, "an integer >= 1"),
    "trainer.num_iterations": (lambda x: _int(x) and x >= 1, "an integer >= 1"),
    "trainer.epsilon": (lambda x: _num(x) and x > 0, "a number > 0"),
    "trainer.entropy_coef": (lambda x: _num(x) and x >= 0, "a number >= 0"),
    "trainer.max_completion_length": (lambda x: _int(x) and x >= 1, "an integer >= 1"),
    "trainer.per_device_train_batch_size": (lambda x: _int(x) and x >= 1, "an integer >= 1"),
    "recipe.prompts_per_step": (lambda x: _int(x) and x >= 1, "an integer >= 1"),
    "recipe.micro_groups": (lambda x: _int(x) and x >= 1,
                            "an integer >= 1 that divides recipe.prompts_per_step"),
    "hooks.length_penalty": (lambda x: _num(x) and x >= 0, "a number >= 0"),
    "hooks.global_adv_norm": (lambda x: isinstance(x, bool), "true or false"),
    "hooks.reward_clip.low": (_num, "a number below hooks.reward_clip.high"),
    "hooks.reward_clip.high": (_num, "a number above hooks.reward_clip.low"),
    "hooks.filter_low_reward.threshold": (_num, "a number"),
    "hooks.filter_low_reward.start": (_unit, "a fraction of training in [0, 1]"),
    "hooks.filter_low_reward.end": (_unit, "a fraction of training in [0, 1]"),
    "hooks.ema.decay": (lambda x: _num(x) and 0 < x < 1, "a number in (0, 1)"),
    "eval.every_steps": (lambda x: _int(x) and x >= 0, "an integer >= 0 (0: start and end only)"),
    "eval.sampled_k": (lambda x: _int(x) and x >= 1, "an integer >= 1"),
    "eval.temperature": (lambda x: _num(x) and x > 0, "a number > 0"),
    "budget.match": (lambda x: x in ("none", "completions"), "one of: none, completions"),
    "adaptive.enabled": (lambda x: isinstance(x, bool), "true or false"),
    "adaptive.rungs": (lambda x: isinstance(x, list) and len(x) >= 1
                       and all(_int(v) and v >= 2 for v in x) and x == sorted(set(x)),
                       "a list of increasing integers >= 2, e.g. [3,6,10]"),
    "adaptive.alpha": (lambda x: _num(x) and 0 < x < 1, "a number in (0, 1)"),
    "adaptive.min_effect": (lambda x: _num(x) and x > 0, "a number > 0 (metric units)"),
    "adaptive.futility": (lambda x: _num(x) and 0 <= x < 1,
                          "a conditional power in [0, 1); 0 turns the futility stop off"),
    "recipe.group_size": (lambda x: _int(x) and x >= 2, "an integer >= 2"),
    "trainer.use_cpu": (lambda x: x is None or isinstance(x, bool), "true, false or null (auto)"),
    "trainer.bf16": (lambda x: x is None or isinstance(x, bool), "true, false or null (auto)"),
    "trainer.use_vllm": (lambda x: isinstance(x, bool), "true or false"),
    "trainer.vllm_mode": (lambda x: x in ("colocate", "server"), "one of: colocate, server"),
    "launch.processes": (lambda x: _int(x) and 1 <= x <= 1024, "an integer in [1, 1024]"),
    "launch.accelerate": (lambda x: x in ACCELERATE_CONFIGS, "one of: " + ", ".join(ACCELERATE_CONFIGS)),
    "launch.gpus_per_job": (_opt(lambda x: _int(x) and x >= 1), "an integer >= 1, or null (auto)"),
    "launch.port": (_opt(lambda x: _int(x) and 1024 <= x <= 65535), "a port in [1024, 65535], or null"),
    "guard.kl_abort": (lambda x: _num(x) and x > 0, "a number > 0"),
    "task.max_operand": (lambda x: _int(x) and 1 <= x <= 49, "an integer in [1, 49]"),
    "task.carry_bug_rate": (_unit, "a probability in [0, 1]"),
    "task.eval_fraction": (lambda x: _num(x) and 0 < x < 1, "a number in (0, 1)"),
    "task.name": (lambda x: x in ("arithmetic", "math", "code", "chat"),
                  "one of: arithmetic, math, code, chat"),
    "task.max_rm_length": (lambda x: _int(x) and x >= 8, "an integer >= 8"),
    "task.tiny_completion_length": (lambda x: _int(x) and x >= 1, "an integer >= 1"),
    "task.answer_format": (lambda x: x in ("gsm8k", "boxed", "plain"),
                           "one of: gsm8k, boxed, plain"),
    "task.format_weight": (lambda x: _num(x) and x >= 0, "a number >= 0"),
    "task.chat": (lambda x: x in (True, False, "auto"), "true, false or auto"),
    "task.dataset.train_size": (_opt(lambda x: _int(x) and x >= 1), "an integer >= 1, or null"),
    "task.dataset.eval_size": (_opt(lambda x: _int(x) and x >= 1), "an integer >= 1, or null"),
    "task.sandbox.timeout_s": (lambda x: _num(x) and 0 < x <= 600, "a number of seconds in (0, 600]"),
    "task.shaping.scale": (lambda x: x in ("units", "sft_quantiles"), "one of: units, sft_quantiles"),
    "task.shaping.sample": (lambda x: _int(x) and x >= 2, "an integer >= 2"),
    "logger.backend": (lambda x: x in ("none", "wandb"), "one of: none, wandb"),
    "logger.mode": (lambda x: x in ("offline", "online", "disabled"),
                    "one of: offline, online, disabled"),
}


@cache
def grpo_config_fields() -> frozenset[str]:
    from trl import GRPOConfig

    return frozenset(f.name for f in dataclasses.fields(GRPOConfig))


def _fmt(value: Any) -> str:
    """A value as the user would type it back: JSON spelling (null, true, "text")."""
    return json.dumps(value)


def _check_keys(node: Any, schema: Any, prefix: str) -> None:
    if schema is _LEAF or node is None:
        return
    if not isinstance(node, dict):  # e.g. `adaptive=true` replaced the whole block
        name = prefix.rstrip(".")
        keys = "a trl.GRPOConfig field" if schema == "GRPOConfig" else \
            "one of " + ", ".join(sorted(schema))
        raise UserError(f"{name}={_fmt(node)}: {name} is a block of keys, not a value; "
                        f"allowed: {name}.<key>=<value>, <key> {keys}")
    allowed = grpo_config_fields() if schema == "GRPOConfig" else set(schema)
    for key, value in node.items():
        full = f"{prefix}{key}"
        if key not in allowed:
            close = difflib.get_close_matches(key, sorted(allowed), n=1)
            hint = f"did you mean {prefix}{close[0]}?" if close else \
                f"allowed under {prefix.rstrip('.') or 'the top level'}: " + (
                    "any trl.GRPOConfig field" if schema == "GRPOConfig" else ", ".join(sorted(allowed)))
            raise UserError(f"{full}={_fmt(value)}: unknown key; {hint}")
        if schema != "GRPOConfig":
            _check_keys(value, schema[key], f"{full}.")


def _get(cfg: dict, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


_MISSING = object()


def validate(cfg: DictConfig | dict) -> RunSpec:
    """Check a composed config; return the RunSpec it describes or raise UserError."""
    if isinstance(cfg, DictConfig):
        try:
            data = OmegaConf.to_container(cfg, resolve=True)
        except OmegaConfBaseException as exc:
            # A resolver's own message names the key and what is allowed: keep only that.
            text = one_line(exc)
            text = re.sub(r"^\w+ raised while resolving interpolation: (.*?); full_key: .*$",
                          r"\1", text)
            raise UserError(text) from None
    else:
        data = cfg
    data = {k: v for k, v in data.items() if k != "hydra"}
    _check_keys(data, SCHEMA, "")
    for key, (ok, allowed) in RULES.items():
        value = _get(data, key)
        if value is not _MISSING and not ok(value):
            raise UserError(f"{key}={_fmt(value)}: must be {allowed}")
    resolve_device(data["trainer"])
    _check_vllm(data["trainer"])
    match_budget(data)
    _check_relations(data)
    _check_launch(data)
    _check_paths(data)
    _check_with_trl(data)
    return RunSpec(config=data, run_id=run_id(data))


def resolve_device(trainer: dict) -> None:
    """`null` device and precision follow the machine: a CUDA device when there is one,
    bf16 where that device supports it, fp32 otherwise (bf16 autocast on a CPU is emulated
    on many CPUs and several times slower). The resolved values are in the record."""
    import torch

    if trainer.get("use_cpu") is None:
        trainer["use_cpu"] = not torch.cuda.is_available()
    if trainer.get("bf16") is None:
        trainer["bf16"] = (not trainer["use_cpu"]) and torch.cuda.is_available() \
            and torch.cuda.is_bf16_supported()
    elif trainer["bf16"] and trainer["use_cpu"]:
        raise UserError("trainer.bf16=true: bf16 on the CPU is emulated and several times slower; "
                        "allowed on a CPU: false or null (auto)")


def _check_vllm(trainer: dict) -> None:
    """vLLM is an optional extra and needs a CUDA device; nothing imports it unless it is on."""
    if not trainer.get("use_vllm"):
        return
    import importlib.util

    if trainer["use_cpu"]:
        raise UserError("trainer.use_vllm=true: vLLM generates on a CUDA device, and this run is "
                        "on the CPU; allowed: false here, or a machine with a GPU")
    if importlib.util.find_spec("vllm") is None:
        raise UserError("trainer.use_vllm=true: vllm is not installed; allowed: false, or "
                        "`pip install -e .[vllm]` (or `pip install 'grpo-ablate[vllm]'`) first")


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


def _check_relations(data: dict) -> None:
    tr, hooks = data["trainer"], data["hooks"]
    gen_batch = tr["per_device_train_batch_size"] * (tr.get("steps_per_generation") or 1)
    if gen_batch % tr["num_generations"]:
        raise UserError(
            f"trainer.per_device_train_batch_size={tr['per_device_train_batch_size']}: must be a "
            f"multiple of trainer.num_generations={tr['num_generations']} (whole groups per batch)")
    clip = hooks.get("reward_clip")
    if clip is not None and not clip["low"] < clip["high"]:
        raise UserError(f"hooks.reward_clip={_fmt(clip)}: must have low < high")
    shaping = data["task"].get("shaping") or {}
    if shaping.get("scale") == "sft_quantiles":
        levels = {"hooks.reward_clip.low": (clip or {}).get("low"),
                  "hooks.reward_clip.high": (clip or {}).get("high"),
                  "hooks.filter_low_reward.threshold": (hooks.get("filter_low_reward") or {})
                  .get("threshold")}
        for key, level in levels.items():
            if level is not None and not 0.0 <= level <= 1.0:
                raise UserError(f"{key}={level}: task.shaping.scale=sft_quantiles makes it a "
                                "quantile of the SFT policy's rewards; allowed: a number in [0, 1]")
    window = hooks.get("filter_low_reward")
    if window is not None and not window["start"] < window["end"]:
        raise UserError(f"hooks.filter_low_reward={_fmt(window)}: must have start < end, "
                        "both fractions of training in [0, 1]")


def _check_launch(data: dict) -> None:
    """A run on several processes: DeepSpeed where its config asks for it, a GPU per process,
    and EMA only where every process holds whole parameters."""
    launch, tr = data["launch"], data["trainer"]
    procs, engine = launch["processes"], launch["accelerate"]
    gpus = launch.get("gpus_per_job")
    if gpus is not None and gpus < procs:
        raise UserError(f"launch.gpus_per_job={gpus}: fewer GPUs than launch.processes={procs}; "
                        "allowed: at least one GPU per process, or null")
    if not tr["use_cpu"]:
        from grpo_ablate.distributed import gpus_for, visible_gpus

        visible = visible_gpus()
        if gpus_for(data) > len(visible):
            raise UserError(f"launch: a run needs {gpus_for(data)} GPUs (launch.processes={procs}, "
                            f"launch.gpus_per_job={gpus}) and {len(visible)} are visible; "
                            f"allowed: at most {len(visible)}")
    if procs == 1 or engine == "ddp":
        return
    if tr["use_cpu"]:
        raise UserError(f"launch.accelerate={engine}: DeepSpeed ZeRO runs on CUDA devices, and "
                        "this run is on the CPU; allowed here: ddp")
    import importlib.util

    if importlib.util.find_spec("deepspeed") is None:
        raise UserError(f"launch.accelerate={engine}: deepspeed is not installed; allowed: ddp, "
                        "or `pip install deepspeed` first")
    if engine == "zero3" and data["hooks"].get("ema") is not None:
        raise UserError("hooks.ema: the weight average needs whole parameters on every process, "
                        "and launch.accelerate=zero3 shards them; allowed with ema: "
                        "launch.accelerate=ddp or zero2")


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def _check_paths(data: dict) -> None:
    path = data["model"].get("path")
    allowed = "a local checkpoint directory, a hub id (org/name), or null for the tiny policy"
    if path == "???" or (path is None and data["model"]["name"] != "tiny"):
        raise UserError(f"model.path: missing for model={data['model']['name']}; allowed: {allowed}")
    if path is not None:
        path = str(path)
        looks_local = path.startswith(("/", ".", "~")) or Path(path).expanduser().exists()
        if looks_local and not (Path(path).expanduser() / "config.json").is_file():
            raise UserError(f"model.path={path}: no checkpoint there (no config.json); allowed: "
                            f"{allowed}")
        if not looks_local and not HUB_ID.match(path):
            raise UserError(f"model.path={path}: neither a local checkpoint nor a hub id; "
                            f"allowed: {allowed}")
    _check_task_data(data["task"])
    _check_chat_template(data["task"], data["model"])
    data_file = data["task"].get("data_file")
    if data_file is not None:
        from grpo_ablate.tasks.arithmetic import load_problems

        try:
            load_problems(data_file)
        except (OSError, ValueError) as exc:
            raise UserError(f"{exc}; allowed: a JSONL file of {{\"a\": int, \"b\": int}} rows") \
                from None


def _check_chat_template(task: dict, model: dict) -> None:
    """task.chat=true needs a checkpoint with a chat template: the embedded policy has none;
    a local checkpoint is looked at (a hub one when it loads)."""
    if task.get("chat") is not True:
        return
    path = model.get("path")
    if path is None:
        raise UserError("task.chat=true: the embedded tiny policy has no chat template; allowed: "
                        "task.chat=auto or false, or model.path= a checkpoint with one")
    local = Path(str(path)).expanduser()
    if local.is_dir():
        cfg_file = local / "tokenizer_config.json"
        has = (local / "chat_template.jinja").is_file() or (local / "chat_template.json").is_file()
        if not has and cfg_file.is_file():
            has = bool(json.loads(cfg_file.read_text()).get("chat_template"))
        if not has:
            raise UserError(f"task.chat=true: {path} has no chat template; allowed: "
                            "task.chat=auto or false, or a checkpoint with a chat template")


def _check_reward_model(path) -> None:
    """task.reward_model: a sequence classifier (local: its config says so), or a hub id."""
    if path is None:
        return
    allowed = ("a sequence-classification checkpoint (hub id or local folder), or null for the "
               "embedded tiny reward model")
    path = str(path)
    local = Path(path).expanduser()
    if path.startswith(("/", ".", "~")) or local.exists():
        cfg_file = local / "config.json"
        if not cfg_file.is_file():
            raise UserError(f"task.reward_model={path}: no checkpoint there; allowed: {allowed}")
        archs = json.loads(cfg_file.read_text()).get("architectures") or []
        if not any(a.endswith("ForSequenceClassification") for a in archs):
            raise UserError(f"task.reward_model={path}: a {', '.join(archs) or 'model'}, not a "
                            f"sequence classifier; allowed: {allowed}")
    elif not HUB_ID.match(path):
        raise UserError(f"task.reward_model={path}: neither a local checkpoint nor a hub id; "
                        f"allowed: {allowed}")


def _check_task_data(task: dict) -> None:
    """Dataset-backed tasks: local files and their fields, and the sandbox's limits."""
    from grpo_ablate.tasks.data import check_local

    fields = {"math": [task.get("question_field"), task.get("answer_field")],
              "code": ["prompt", "entry_point", "tests"],
              "chat": [task.get("prompt_field"), task.get("reference_field")]}.get(task["name"])
    if fields is None:
        return
    if task["name"] == "chat":
        _check_reward_model(task.get("reward_model"))
    for split in ("train", "eval"):
        check_local(str(task["dataset"][split]), f"task.dataset.{split}", fields)
    if task["name"] == "code":
        from grpo_ablate.sandbox import Limits

        box = task["sandbox"]
        Limits(cpu_seconds=box["cpu_seconds"], memory_mb=box["memory_mb"],
               file_mb=box["file_mb"], processes=box["processes"]).check()


def _check_with_trl(data: dict) -> None:
    """Let TRL's own GRPOConfig checks run on the trainer section."""
    from trl import GRPOConfig

    with tempfile.TemporaryDirectory() as tmp:
        try:
            GRPOConfig(**grpo_kwargs(data, output_dir=tmp))
        except (ValueError, TypeError) as exc:
            raise UserError(f"trainer: {one_line(exc)}") from None


def grpo_kwargs(data: dict, output_dir: str) -> dict[str, Any]:
    """The GRPOConfig arguments of a run: the trainer section plus bookkeeping that never
    changes the computation (where to write, what to report, no progress bars)."""
    kwargs = dict(data["trainer"])
    if kwargs.get("max_grad_norm") is None:
        kwargs["max_grad_norm"] = 0.0  # transformers' spelling of "no clipping"
    # W&B is logged by grpo_ablate.wandb_logger, not by transformers' callback.
    kwargs.update(output_dir=output_dir, save_strategy="no", disable_tqdm=True, report_to=[])
    return kwargs


# ---------------------------------------------------------------------------- identity
# What does not change the computation, so it does not change the run's identity.
_NOT_IDENTITY = ("sweep_name", "out_root", "sweep_dir", "run_cache", "logger", "adaptive",
                 "launch")


# Keys added after records existed: in the identity only when set, so older records (and
# run-cache entries) keep their ids.
_IDENTITY_IF_SET = ("reward_raises_on_rank",)


def run_id(data: dict) -> str:
    ident = {k: v for k, v in data.items() if k not in _NOT_IDENTITY}
    ident["trick"] = {"id": data["trick"]["id"]}
    # In reward units, task.shaping only reaches the computation through hooks (which are in
    # the identity); as quantiles, how they are measured is part of it.
    task = data.get("task") or {}
    if (task.get("shaping") or {}).get("scale", "units") == "units":
        ident["task"] = {k: v for k, v in task.items() if k != "shaping"}
    ident["faults"] = {k: v for k, v in data["faults"].items() if k != "sleep_per_step"
                       and not (k in _IDENTITY_IF_SET and v is None)}
    # Where the processes run does not change the computation; how many, and the engine, do
    # (each process samples its own share). One process: no entry, as before this block.
    launch = data.get("launch", {})
    if launch.get("processes", 1) > 1:
        ident["launch"] = {"processes": launch["processes"], "accelerate": launch["accelerate"]}
    blob = json.dumps(ident, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


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


# ---------------------------------------------------------------------------- composition
def one_line(exc: BaseException) -> str:
    """Hydra and OmegaConf errors span lines; a user gets one."""
    text = str(exc)
    text = re.sub(r"\s*\n\s*", "; ", text.strip())
    text = re.sub(r"\s+", " ", text).replace(":;", ":")
    return text.replace("In 'config': ", "")


def compose(overrides: list[str]) -> DictConfig:
    """Compose conf/ with command-line overrides, including the hydra node."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3",
                                   job_name="grpo_ablate"):
            return hydra_compose("config", overrides=list(overrides), return_hydra_config=True)
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        raise UserError(_explain_compose_error(exc, overrides)) from None
    finally:
        GlobalHydra.instance().clear()


def _explain_compose_error(exc: BaseException, overrides: list[str]) -> str:
    msg = one_line(exc)
    m = re.search(r"Could not override '([^']+)'", msg)
    if m:
        key = m.group(1)
        value = next((o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == key), "?")
        return f"{key}={value}: unknown key; {_suggest(key)}"
    m = re.search(r"Could not find '(\w+)/([^']+)'; Available options in '\w+': (.*)", msg)
    if m:
        group, bad, opts = m.groups()
        opts = opts.split("; Config search path")[0]
        opts = ", ".join(o.strip() for o in opts.split(";") if o.strip())
        return f"{group}={bad}: no such {group}; allowed: {opts}"
    return msg


def _suggest(key: str) -> str:
    """A did-you-mean for a dotted key, from the schema (or GRPOConfig under trainer)."""
    schema: Any = SCHEMA
    prefix = ""
    for part in key.split("."):
        allowed = grpo_config_fields() if schema == "GRPOConfig" else \
            (set(schema) if isinstance(schema, dict) else set())
        if part not in allowed:
            close = difflib.get_close_matches(part, sorted(allowed), n=1)
            return f"did you mean {prefix}{close[0]}?" if close else \
                "`grpo-ablate run --cfg job` lists every key"
        schema = schema[part] if isinstance(schema, dict) else _LEAF
        prefix += part + "."
    return "`grpo-ablate run --cfg job` lists every key"


def parse_overrides(overrides: list[str]) -> list:
    try:
        return OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as exc:
        raise UserError(one_line(exc)) from None


def expand_jobs(overrides: list[str]) -> list[list[str]]:
    """The job list Hydra's BasicSweeper will launch for these overrides: the sweep file's
    `hydra.sweeper.params` first, command-line values winning, crossed in the same order."""
    parsed = parse_overrides(overrides)
    fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
    cfg = compose(fixed)
    params = OmegaConf.select(cfg, "hydra.sweeper.params") or {}
    params_conf = [f"{k}={v}" for k, v in params.items()]
    merged = parse_overrides(params_conf + list(overrides))
    try:
        return BasicSweeper.split_arguments(merged, None)[0]
    except HydraException as exc:
        raise UserError(one_line(exc)) from None


def specs_for(overrides: list[str], multirun: bool) -> list[RunSpec]:
    """Validate every run a command would launch, before anything is trained or written."""
    jobs = expand_jobs(overrides) if multirun else [list(overrides)]
    if not multirun and any(o.is_sweep_override() for o in parse_overrides(overrides)):
        raise UserError(f"{' '.join(overrides)}: a sweep of values needs `grpo-ablate sweep`")
    specs = [validate(compose(job)) for job in jobs]
    check_layout(specs)
    return specs


def completions_per_step(config: dict) -> int:
    """Completions in one optimizer step: micro-batch x gradient accumulation x processes."""
    tr = config["trainer"]
    return tr["per_device_train_batch_size"] * tr["gradient_accumulation_steps"] \
        * config.get("launch", {}).get("processes", 1)


def groups_per_step(config: dict) -> int:
    """Prompt groups in one optimizer step."""
    return completions_per_step(config) // config["trainer"]["num_generations"]


def check_layout(specs: list[RunSpec]) -> None:
    """Every arm of a (model, task) stratum trains on as many groups per optimizer step as
    its baseline: a trick file that also changed the batch layout would change two things at
    once. (budget.match=completions changes it on purpose, and says so in the record.)"""
    seen: dict[tuple, tuple[int, str]] = {}
    for spec in specs:
        cfg = spec.config
        if cfg["budget"]["match"] != "none":
            continue
        key = (cfg["model"]["name"], cfg["task"]["name"])
        groups = groups_per_step(cfg)
        first = seen.setdefault(key, (groups, spec.arm))
        if groups != first[0]:
            raise UserError(
                f"trick={spec.arm}: {groups} groups per optimizer step where trick={first[1]} has "
                f"{first[0]} ({key[0]}/{key[1]}); allowed: the same layout for every arm "
                "(change recipe.micro_groups or prompts_per_step for all, not in a trick file), "
                "or budget.match=completions")
