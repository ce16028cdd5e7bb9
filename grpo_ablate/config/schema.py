"""The config's keys and the rules for their values: which keys exist (a `+key=` typo bypasses
Hydra's struct check, so unknown keys are refused here, with a did-you-mean), and what each
value may be. Each failure is one line naming the key, the value and what is allowed.

Why a tree and not structured configs (dataclasses in Hydra's ConfigStore): the trick files
write the keys of the section they change and nothing else, and Hydra's own type errors are
several lines that name OmegaConf internals; the tree keeps every message in the one-line
form the tests pin (docs/architecture.md). Each key's default and doc are where it is set,
in conf/*.yaml; its rule is beside its name in SCHEMA.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from grpo_ablate import hook_tricks
from grpo_ablate.config.early_stop import RULES as EARLY_STOP_RULES
from grpo_ablate.config.trainer import grpo_config_fields
from grpo_ablate.errors import UserError
from grpo_ablate.hook_tricks import Rule
from grpo_ablate.tasks import TASKS
from grpo_ablate.values import is_fraction, is_int, is_number, or_null

ACCELERATE_CONFIGS = ("ddp", "zero2", "zero3")  # conf/accelerate/<name>.yaml
# The published schemas a task file can name (conf/task/<preset>.yaml; docs/tasks.md).
PRESETS = ("gsm8k", "math500", "humaneval", "mbpp", "ultrafeedback")
# Every key, with the rule for its value where it has one: ANY is a key that only has to
# exist; a block is a dict of its keys. A key's default and its doc are where it is set, in
# conf/*.yaml; its rule is here, beside its name.
ANY = None
_num, _int, _unit, _opt = is_number, is_int, is_fraction, or_null  # short: the tree is long


def integer(low: int) -> Rule:
    return (lambda x: _int(x) and x >= low, f"an integer >= {low}")


def one_of(*choices: str) -> Rule:
    return (lambda x: x in choices, "one of: " + ", ".join(choices))


def free(*names: str) -> dict[str, Any]:
    """A block whose keys need no rule here (a task or model module checks them)."""
    return dict.fromkeys(names, ANY)


class GRPOFields(dict):
    """The trainer block: any trl.GRPOConfig field, with these rules for some."""


POSITIVE: Rule = (lambda x: _num(x) and x > 0, "a number > 0")
NON_NEGATIVE: Rule = (lambda x: _num(x) and x >= 0, "a number >= 0")
BOOLEAN: Rule = (lambda x: isinstance(x, bool), "true or false")

SCHEMA: dict[str, Any] = {
    "seed": integer(0),
    "sweep_name": ANY,
    "out_root": ANY,
    "sweep_dir": ANY,
    "run_cache": ANY,
    "eval": {
        "every_steps": (lambda x: _int(x) and x >= 0, "an integer >= 0 (0: start and end only)"),
        "sampled_k": integer(1),
        "temperature": POSITIVE,
    },
    "budget": {
        "match": one_of("none", "completions"),
    },
    "adaptive": {
        "enabled": BOOLEAN,
        "rungs": (lambda x: isinstance(x, list) and len(x) >= 1
                  and all(_int(v) and v >= 2 for v in x) and x == sorted(set(x)),
                  "a list of increasing integers >= 2, e.g. [3,6,10]"),
        "alpha": (lambda x: _num(x) and 0 < x < 1, "a number in (0, 1)"),
        "min_effect": (lambda x: _num(x) and x > 0, "a number > 0 (metric units)"),
        "futility": (lambda x: _num(x) and 0 <= x < 1,
                     "a conditional power in [0, 1); 0 turns the futility stop off"),
        "metric": ANY,
        "scope": one_of("task", "prompts"),
    },
    "early_stop": {
        "enabled": BOOLEAN,
        "looks": (lambda x: isinstance(x, list) and len(x) >= 1
                  and all(_num(v) and 0 < v < 1 for v in x) and x == sorted(set(x)),
                  "a list of increasing fractions in (0, 1), e.g. [0.25, 0.5]"),
        "rule": one_of(*EARLY_STOP_RULES),
        "alpha": (lambda x: _num(x) and 0 < x < 1, "a number in (0, 1)"),
        "min_effect": (lambda x: _num(x) and x > 0, "a number > 0 (metric units)"),
        "metric": ANY,
        "extend": BOOLEAN,
        "pause_at": (_opt(lambda x: _num(x) and 0 < x < 1),
                     "a look's fraction in (0, 1), or null (set by the sweep)"),
    },
    "guard": {
        "kl_abort": POSITIVE,
        "min_accuracy_gain": ANY,
    },
    "launch": {
        "processes": (lambda x: _int(x) and 1 <= x <= 1024, "an integer in [1, 1024]"),
        "accelerate": (lambda x: x in ACCELERATE_CONFIGS, "one of: " + ", ".join(ACCELERATE_CONFIGS)),
        "gpus_per_job": (_opt(lambda x: _int(x) and x >= 1), "an integer >= 1, or null (auto)"),
        "port": (_opt(lambda x: _int(x) and 1024 <= x <= 65535), "a port in [1024, 65535], or null"),
    },
    "checkpoint": {
        "every_steps": (_opt(lambda x: _int(x) and x >= 1), "an integer >= 1, or null (by time only)"),
        "every_minutes": (_opt(lambda x: _num(x) and x > 0), "a number > 0, or null (by steps only)"),
        "max_overhead": (lambda x: _num(x) and 0 < x <= 1, "a number in (0, 1]"),
        "keep_last": integer(1),
        "keep": BOOLEAN,
    },
    "faults": {**free("nan_loss_at_step", "kl_blowup_at_step", "reward_raises_at_step",
                      "reward_raises_on_rank", "sleep_per_step"),
               "planted_rewards": (_opt(lambda x: isinstance(x, list) and len(x) > 0
                                        and all(_num(v) for v in x)),
                                   "a non-empty list of numbers, or null")},
    "recipe": {
        "name": ANY,
        "prompts_per_step": integer(1),
        "group_size": integer(2),
        "max_grad_norm": ANY,
        "micro_groups": (lambda x: _int(x) and x >= 1,
                         "an integer >= 1 that divides recipe.prompts_per_step"),
    },
    "trainer": GRPOFields({  # any trl.GRPOConfig field; these with a rule
        "beta": NON_NEGATIVE,
        "num_generations": integer(2),
        "temperature": POSITIVE,
        "top_p": (lambda x: _num(x) and 0 < x <= 1, "a number in (0, 1]"),
        "max_grad_norm": (_opt(lambda x: _num(x) and x > 0), "a number > 0, or null for none"),
        "learning_rate": POSITIVE,
        "max_steps": integer(1),
        "num_iterations": integer(1),
        "epsilon": POSITIVE,
        "entropy_coef": NON_NEGATIVE,
        "max_completion_length": integer(1),
        "per_device_train_batch_size": integer(1),
        "use_cpu": (lambda x: x is None or isinstance(x, bool), "true, false or null (auto)"),
        "bf16": (lambda x: x is None or isinstance(x, bool), "true, false or null (auto)"),
        "use_vllm": BOOLEAN,
        "vllm_mode": one_of("colocate", "server"),
    }),
    "hooks": {},  # from the hook tricks' registry (grpo_ablate/hook_tricks/)
    "model": {
        "name": ANY,
        "path": ANY,
        "lora": {
            "r": (lambda x: _int(x) and x >= 1, "an integer >= 1 (the adapter's rank)"),
            "alpha": POSITIVE,
            "dropout": (lambda x: _num(x) and 0 <= x < 1, "a number in [0, 1)"),
            "target_modules": (lambda x: x is None or x == "all-linear" or (
                isinstance(x, list) and len(x) >= 1 and all(isinstance(v, str) and v for v in x)),
                "a list of module names, e.g. [q_proj,v_proj], all-linear, or null (peft's "
                "own for the architecture)"),
        },
        "package": {
            "name": ANY,
            "version": ANY,
            "file": ANY,
            "sha256": (lambda x: isinstance(x, str) and len(x) == 64
                       and all(c in "0123456789abcdef" for c in x),
                       "the file's sha256, 64 lowercase hex digits"),
        },
        "arch": free("hidden_size", "intermediate_size", "num_layers", "num_heads"),
        "sft": free("seed", "steps", "lr", "batch_size"),
    },
    # The union of every task's keys (arithmetic | math | code | chat); each task file sets
    # its own. A task's name is its entry in tasks.TASKS.
    "task": {
        "name": one_of(*TASKS),
        "max_operand": (lambda x: _int(x) and 1 <= x <= 49, "an integer in [1, 49]"),
        "carry_bug_rate": (_unit, "a probability in [0, 1]"),
        "eval_fraction": (lambda x: _num(x) and 0 < x < 1, "a number in (0, 1)"),
        "split_seed": ANY,
        "data_file": ANY,
        "tiny_completion_length": integer(1),
        "dataset": {
            "train": ANY,
            "eval": ANY,
            "subset": ANY,
            "train_split": ANY,
            "eval_split": ANY,
            "train_size": (_opt(lambda x: _int(x) and x >= 1), "an integer >= 1, or null"),
            "eval_size": (_opt(lambda x: _int(x) and x >= 1), "an integer >= 1, or null"),
        },
        "preset": (lambda x: x in (None, *PRESETS), "one of: " + ", ".join(PRESETS) + ", or null"),
        "instruction": (lambda x: x is None or isinstance(x, str), "a text, or null"),
        "instruction_format": one_of("boxed", "gsm8k"),
        "solution_field": ANY,
        "question_field": ANY,
        "answer_field": ANY,
        "answer_format": one_of("gsm8k", "boxed", "plain"),
        "format_weight": NON_NEGATIVE,
        "chat": (lambda x: x in (True, False, "auto"), "true, false or auto"),
        "system_prompt": ANY,
        "prompt_field": ANY,
        "reference_field": ANY,
        "reward_model": ANY,
        "max_rm_length": integer(8),
        "shaping": {
            "scale": one_of("units", "sft_quantiles"),
            "clip": free("low", "high"),
            "length_penalty": ANY,
            "filter_threshold": ANY,
            "sample": integer(2),
        },
        "sandbox": {
            "timeout_s": (lambda x: _num(x) and 0 < x <= 600, "a number of seconds in (0, 600]"),
            "cpu_seconds": ANY,
            "memory_mb": ANY,
            "file_mb": ANY,
            "processes": ANY,
        },
    },
    # prior: the source review's verdict (its catalog; `verdict`, the old spelling, is still
    # read); claim and source: a paper's (the variants); modules: a hook trick's own modules
    # (grpo_ablate/hook_tricks/); formerly: a renamed trick's first name (its run ids keep
    # it); called_as: set by a former name's choice (config/registry.py), for the notice;
    # against: the arm it is compared with (default: baseline), one it can act on;
    # composed_of: the tricks a combined trick (a sweep's recipe, a pair) applies together;
    # control: near_null for an arm expected to be (almost) inert, the report's live check of
    # false positives; inert: where an arm has nothing to act on, in words; premise: keys it
    # sets so its method has something to act on, shared with its against arm (not its
    # activity); fidelity: its card against its source (config/fidelity.py).
    "trick": {
        "id": ANY,
        "family": ANY,
        "changes": ANY,
        "prior": ANY,
        "verdict": ANY,
        "keys": ANY,
        "modules": (lambda x: isinstance(x, list) and all(isinstance(v, str) and v for v in x),
                    "a list of module names, e.g. [my_tricks.flip]"),
        "formerly": ANY,
        "aliases": (lambda x: isinstance(x, list) and all(isinstance(v, str) and v for v in x),
                    "a list of other names, e.g. [GSPO]"),
        "called_as": ANY,
        "catalog": one_of("review", "variants", "vllm"),
        "claim": ANY,
        "source": ANY,
        "against": ANY,
        "composed_of": ANY,  # a combined trick's tricks (config/combination.py)
        "control": one_of("near_null"),
        "inert": ANY,
        "topology": ANY,  # a leave-one-out or add-one arm's place in its sweep
        "premise": (lambda x: isinstance(x, list) and all(isinstance(v, str) for v in x),
                    "a list of dotted keys the arm also sets, e.g. [trainer.num_iterations]"),
        "fidelity": ANY,  # checked by config/fidelity.py (`grpo-ablate tricks --fidelity`)
    },
    "logger": {
        "backend": one_of("none", "wandb"),
        "project": ANY,
        "entity": ANY,
        "mode": one_of("offline", "online", "disabled"),
        "dir": ANY,
    },
}


def rules_of(tree: dict[str, Any], prefix: str = "") -> dict[str, Rule]:
    """Every dotted key of the tree that has a rule -> its rule."""
    out: dict[str, Rule] = {}
    for key, node in tree.items():
        if isinstance(node, dict):
            out.update(rules_of(node, f"{prefix}{key}."))
        elif node is not ANY:
            out[f"{prefix}{key}"] = node
    return out


RULES = rules_of(SCHEMA)


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
    if not isinstance(schema, dict) or node is None:  # a leaf: its rule, if any, is a value's
        return
    trainer = isinstance(schema, GRPOFields)
    if not isinstance(node, dict):  # e.g. `adaptive=true` replaced the whole block
        name = prefix.rstrip(".")
        keys = "a trl.GRPOConfig field" if trainer else "one of " + ", ".join(sorted(schema))
        raise UserError(f"{name}={fmt(node)}: {name} is a block of keys, not a value; "
                        f"allowed: {name}.<key>=<value>, <key> {keys}")
    allowed = grpo_config_fields() if trainer else set(schema)
    for key, value in node.items():
        full = f"{prefix}{key}"
        if key not in allowed:
            close = difflib.get_close_matches(key, sorted(allowed), n=1)
            hint = f"did you mean {prefix}{close[0]}?" if close else \
                f"allowed under {prefix.rstrip('.') or 'the top level'}: " + (
                    "any trl.GRPOConfig field" if trainer else ", ".join(sorted(allowed)))
            raise UserError(f"{full}={fmt(value)}: unknown key; {hint}")
        if not trainer:
            check_keys(value, schema[key], f"{full}.")


_MISSING = object()


def get(cfg: dict, dotted: str, default: Any = _MISSING) -> Any:
    """The value at a dotted key, or `default` (_MISSING unless given) where there is none."""
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
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
        allowed = grpo_config_fields() if isinstance(schema, GRPOFields) else \
            (set(schema) if isinstance(schema, dict) else set())
        if part not in allowed:
            close = difflib.get_close_matches(part, sorted(allowed), n=1)
            return f"did you mean {prefix}{close[0]}?" if close else \
                "`grpo-ablate run --cfg job` lists every key"
        schema = schema.get(part) if isinstance(schema, dict) else ANY
        prefix += part + "."
    parent = key.rsplit(".", 1)[0]
    block = get(full_schema(), parent)
    if "." in key and parent.count(".") >= 1 and isinstance(block, dict):
        # A known key under a block that is null here (model.lora, a hook trick's block):
        # Hydra cannot set one key inside null.
        some = " with any of its keys (those left out take peft's LoraConfig defaults)" \
            if parent == "model.lora" else ""
        return (f"{parent} is null here; allowed: the whole block, "
                f"{parent}={{{','.join(f'{k}:...' for k in block)}}}{some}")
    return "`grpo-ablate run --cfg job` lists every key"
