"""The config's keys and the rules for their values: which keys exist (a `+key=` typo bypasses
Hydra's struct check, so unknown keys are refused here, with a did-you-mean), and what each
value may be. Each failure is one line naming the key, the value and what is allowed.

Why a table and not structured configs (dataclasses in Hydra's ConfigStore): the trick files
write the keys of the section they change and nothing else, and Hydra's own type errors are
several lines that name OmegaConf internals; the table keeps every message in the one-line
form the tests pin (docs/architecture.md). Each key is documented where it is set, in
conf/*.yaml.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from typing import Any

from grpo_ablate import hook_tricks
from grpo_ablate.config.trainer import grpo_config_fields
from grpo_ablate.errors import UserError
from grpo_ablate.values import is_fraction, is_int, is_number, or_null

ACCELERATE_CONFIGS = ("ddp", "zero2", "zero3")  # conf/accelerate/<name>.yaml
# The published schemas a task file can name (conf/task/<preset>.yaml; docs/tasks.md).
PRESETS = ("gsm8k", "math500", "humaneval", "mbpp", "ultrafeedback")
# Allowed keys per section; None marks a leaf. Values are checked by RULES below.
_LEAF = None
SCHEMA: dict[str, Any] = {
    "seed": _LEAF, "sweep_name": _LEAF, "out_root": _LEAF, "sweep_dir": _LEAF, "run_cache": _LEAF,
    "eval": {"every_steps": _LEAF, "sampled_k": _LEAF, "temperature": _LEAF},
    "budget": {"match": _LEAF},
    "adaptive": {"enabled": _LEAF, "rungs": _LEAF, "alpha": _LEAF, "min_effect": _LEAF,
                 "futility": _LEAF, "metric": _LEAF, "scope": _LEAF},
    "guard": {"kl_abort": _LEAF, "min_accuracy_gain": _LEAF},
    "launch": {"processes": _LEAF, "accelerate": _LEAF, "gpus_per_job": _LEAF, "port": _LEAF},
    "checkpoint": {"every_steps": _LEAF, "every_minutes": _LEAF, "max_overhead": _LEAF,
                   "keep_last": _LEAF, "keep": _LEAF},
    "faults": {"nan_loss_at_step": _LEAF, "kl_blowup_at_step": _LEAF,
               "reward_raises_at_step": _LEAF, "reward_raises_on_rank": _LEAF,
               "sleep_per_step": _LEAF},
    "recipe": {"name": _LEAF, "prompts_per_step": _LEAF, "group_size": _LEAF,
               "max_grad_norm": _LEAF, "micro_groups": _LEAF},
    "trainer": "GRPOConfig",
    "hooks": {},  # from the hook tricks' registry (grpo_ablate/hook_tricks.py)
    "model": {"name": _LEAF, "path": _LEAF,
              "lora": {"r": _LEAF, "alpha": _LEAF, "dropout": _LEAF, "target_modules": _LEAF},
              "package": {"name": _LEAF, "version": _LEAF, "file": _LEAF, "sha256": _LEAF},
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
             "preset": _LEAF, "instruction": _LEAF, "instruction_format": _LEAF,
             "solution_field": _LEAF,
             "question_field": _LEAF, "answer_field": _LEAF, "answer_format": _LEAF,
             "format_weight": _LEAF, "chat": _LEAF, "system_prompt": _LEAF,
             "prompt_field": _LEAF, "reference_field": _LEAF, "reward_model": _LEAF,
             "max_rm_length": _LEAF,
             "shaping": {"scale": _LEAF, "clip": {"low": _LEAF, "high": _LEAF},
                         "length_penalty": _LEAF, "filter_threshold": _LEAF, "sample": _LEAF},
             "sandbox": {"timeout_s": _LEAF, "cpu_seconds": _LEAF, "memory_mb": _LEAF,
                         "file_mb": _LEAF, "processes": _LEAF}},
    # prior: the source review's verdict (its catalog; `verdict`, the old spelling, is still
    # read); claim and source: a paper's (the variants); modules: a hook trick's own modules
    # (grpo_ablate/hook_tricks.py);
    # formerly: a renamed trick's first name (its run ids keep it); called_as: set by a former
    # name's file, for the notice; against: the arm it is compared with (default: baseline),
    # one it can act on.
    "trick": {"id": _LEAF, "family": _LEAF, "changes": _LEAF, "prior": _LEAF, "verdict": _LEAF,
              "keys": _LEAF, "modules": _LEAF, "formerly": _LEAF, "called_as": _LEAF,
              "catalog": _LEAF, "claim": _LEAF, "source": _LEAF, "against": _LEAF},
    "logger": {"backend": _LEAF, "project": _LEAF, "entity": _LEAF, "mode": _LEAF, "dir": _LEAF},
}


_num, _int, _unit, _opt = is_number, is_int, is_fraction, or_null  # short: the table is long

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
    "trick.modules": (lambda x: isinstance(x, list) and all(isinstance(v, str) and v for v in x),
                      "a list of module names, e.g. [my_tricks.flip]"),
    "trick.catalog": (lambda x: x in ("review", "variants"), "one of: review, variants"),
    "eval.every_steps": (lambda x: _int(x) and x >= 0, "an integer >= 0 (0: start and end only)"),
    "eval.sampled_k": (lambda x: _int(x) and x >= 1, "an integer >= 1"),
    "eval.temperature": (lambda x: _num(x) and x > 0, "a number > 0"),
    "budget.match": (lambda x: x in ("none", "completions"), "one of: none, completions"),
    "adaptive.enabled": (lambda x: isinstance(x, bool), "true or false"),
    "adaptive.scope": (lambda x: x in ("task", "prompts"), "one of: task, prompts"),
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
    "checkpoint.every_steps": (_opt(lambda x: _int(x) and x >= 1), "an integer >= 1, or null (by time only)"),
    "checkpoint.every_minutes": (_opt(lambda x: _num(x) and x > 0), "a number > 0, or null (by steps only)"),
    "checkpoint.max_overhead": (lambda x: _num(x) and 0 < x <= 1, "a number in (0, 1]"),
    "checkpoint.keep_last": (lambda x: _int(x) and x >= 1, "an integer >= 1"),
    "checkpoint.keep": (lambda x: isinstance(x, bool), "true or false"),
    "task.max_operand": (lambda x: _int(x) and 1 <= x <= 49, "an integer in [1, 49]"),
    "task.carry_bug_rate": (_unit, "a probability in [0, 1]"),
    "task.eval_fraction": (lambda x: _num(x) and 0 < x < 1, "a number in (0, 1)"),
    "task.name": (lambda x: x in ("arithmetic", "math", "code", "chat"),
                  "one of: arithmetic, math, code, chat"),
    "task.max_rm_length": (lambda x: _int(x) and x >= 8, "an integer >= 8"),
    "task.tiny_completion_length": (lambda x: _int(x) and x >= 1, "an integer >= 1"),
    "task.answer_format": (lambda x: x in ("gsm8k", "boxed", "plain"),
                           "one of: gsm8k, boxed, plain"),
    "task.preset": (lambda x: x in (None, *PRESETS), "one of: " + ", ".join(PRESETS) + ", or null"),
    "task.instruction_format": (lambda x: x in ("boxed", "gsm8k"), "one of: boxed, gsm8k"),
    "task.instruction": (lambda x: x is None or isinstance(x, str), "a text, or null"),
    "task.format_weight": (lambda x: _num(x) and x >= 0, "a number >= 0"),
    "task.chat": (lambda x: x in (True, False, "auto"), "true, false or auto"),
    "task.dataset.train_size": (_opt(lambda x: _int(x) and x >= 1), "an integer >= 1, or null"),
    "task.dataset.eval_size": (_opt(lambda x: _int(x) and x >= 1), "an integer >= 1, or null"),
    "task.sandbox.timeout_s": (lambda x: _num(x) and 0 < x <= 600, "a number of seconds in (0, 600]"),
    "task.shaping.scale": (lambda x: x in ("units", "sft_quantiles"), "one of: units, sft_quantiles"),
    "task.shaping.sample": (lambda x: _int(x) and x >= 2, "an integer >= 2"),
    "model.package.sha256": (lambda x: isinstance(x, str) and len(x) == 64
                             and all(c in "0123456789abcdef" for c in x),
                             "the file's sha256, 64 lowercase hex digits"),
    "model.lora.r": (lambda x: _int(x) and x >= 1, "an integer >= 1 (the adapter's rank)"),
    "model.lora.alpha": (lambda x: _num(x) and x > 0, "a number > 0"),
    "model.lora.dropout": (lambda x: _num(x) and 0 <= x < 1, "a number in [0, 1)"),
    "model.lora.target_modules": (lambda x: x == "all-linear" or (
        isinstance(x, list) and len(x) >= 1 and all(isinstance(v, str) and v for v in x)),
        "a list of module names, e.g. [q_proj,v_proj], or all-linear"),
    "logger.backend": (lambda x: x in ("none", "wandb"), "one of: none, wandb"),
    "logger.mode": (lambda x: x in ("offline", "online", "disabled"),
                    "one of: offline, online, disabled"),
}



def fmt(value: Any) -> str:
    """A value as the user would type it back: JSON spelling (null, true, "text")."""
    return json.dumps(value)


def full_schema() -> dict[str, Any]:
    """SCHEMA with the `hooks:` keys of every hook trick registered now."""
    return {**SCHEMA, "hooks": hook_tricks.schema()}


def check_keys(node: Any, schema: Any = None, prefix: str = "") -> None:
    """Every key of `node` is one the schema (or GRPOConfig, under trainer) knows."""
    if schema is None and not prefix:
        schema = full_schema()
    if schema is _LEAF or node is None:
        return
    if not isinstance(node, dict):  # e.g. `adaptive=true` replaced the whole block
        name = prefix.rstrip(".")
        keys = "a trl.GRPOConfig field" if schema == "GRPOConfig" else \
            "one of " + ", ".join(sorted(schema))
        raise UserError(f"{name}={fmt(node)}: {name} is a block of keys, not a value; "
                        f"allowed: {name}.<key>=<value>, <key> {keys}")
    allowed = grpo_config_fields() if schema == "GRPOConfig" else set(schema)
    for key, value in node.items():
        full = f"{prefix}{key}"
        if key not in allowed:
            close = difflib.get_close_matches(key, sorted(allowed), n=1)
            hint = f"did you mean {prefix}{close[0]}?" if close else \
                f"allowed under {prefix.rstrip('.') or 'the top level'}: " + (
                    "any trl.GRPOConfig field" if schema == "GRPOConfig" else ", ".join(sorted(allowed)))
            raise UserError(f"{full}={fmt(value)}: unknown key; {hint}")
        if schema != "GRPOConfig":
            check_keys(value, schema[key], f"{full}.")


_MISSING = object()


def get(cfg: dict, dotted: str) -> Any:
    """The value at a dotted key, or _MISSING."""
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def check_values(data: dict) -> None:
    for key, (ok, allowed) in {**RULES, **hook_tricks.rules()}.items():
        value = get(data, key)
        if value is not _MISSING and not ok(value):
            raise UserError(f"{key}={fmt(value)}: must be {allowed}")


def suggest(key: str) -> str:
    """A did-you-mean for a dotted key, from the schema (or GRPOConfig under trainer)."""
    schema: Any = full_schema()
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
    parent = key.rsplit(".", 1)[0]
    if "." in key and parent.count(".") >= 1 and \
            get(full_schema(), parent) not in (_MISSING, _LEAF):
        # A known key under a block that is null here (model.lora, hooks.ema): Hydra cannot
        # set one key inside null.
        return (f"{parent} is null here; allowed: the whole block, "
                f"{parent}={{{','.join(f'{k}:...' for k in get(full_schema(), parent))}}}")
    return "`grpo-ablate run --cfg job` lists every key"
