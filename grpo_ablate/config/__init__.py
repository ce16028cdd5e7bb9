"""The config layer: compose conf/ with overrides (Hydra), check every key and value, and
turn the result into a hashed `RunSpec`. One concept per module:

paths.py     where the packaged configs and sweep files are
registry.py  the OmegaConf resolvers; the sweep files and former trick names as choices
schema.py    which keys exist and what each value may be (one-line errors)
checks.py    cross-key rules: device, vLLM, batch and hooks, processes and GPUs, paths, data
layout.py    groups and completions per step; the same layout for every arm of a sweep
trainer.py   the trainer section is TRL's GRPOConfig: its fields, its kwargs, TRL's checks
grpo_fields.py  every GRPOConfig field: pinned by the baseline recipe or declared inert
identity.py  ROLES (each key's part in a run's identity), run_id, computation_key, RunSpec
compose.py   Hydra composition, override parsing, a sweep's jobs, validation
catalog.py   the trick catalog, read from the trick files
fidelity.py  each arm's card against its source: settings, choices, deviations (`tricks --fidelity`)
combination.py  tricks applied together as one trick file (a recipe, a pair)
pairs.py     which tricks combine and which pairs are refused, derived (`tricks --pairs`)
screening.py    a screening design's factors, its points as trick files, design.json
fractional.py   two-level designs drawn by pyDOE3: resolution and aliases measured, fold-over
review.py    the source review's recipe as data, and where a config departs from it
early_stop.py   where a run pauses for an early-stop look; the early-stop rules against the rest
"""

from grpo_ablate.config.compose import (
    check_trainable,
    compose,
    expand_jobs,
    lora_keys_alone,
    one_line,
    override_key,
    parse_overrides,
    specs_for,
    validate,
)
from grpo_ablate.config.identity import RunSpec, computation_key, model_label, run_id
from grpo_ablate.config.layout import check_layout, completions_per_step, groups_per_step
from grpo_ablate.config.paths import CONF_DIR, PACKAGE_DIR, REPO_ROOT, SWEEPS_DIR
from grpo_ablate.config.trainer import grpo_config_fields, grpo_kwargs

__all__ = [
    "CONF_DIR", "PACKAGE_DIR", "REPO_ROOT", "SWEEPS_DIR", "RunSpec", "check_layout",
    "check_trainable", "completions_per_step", "compose", "computation_key", "expand_jobs",
    "grpo_config_fields", "grpo_kwargs", "groups_per_step", "lora_keys_alone",
    "model_label", "one_line", "override_key",
    "parse_overrides",
    "run_id", "specs_for", "validate",
]
