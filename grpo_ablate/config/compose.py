"""Compose (Hydra) and validate a run config into a typed, hashed RunSpec.

Everything a user can get wrong is checked before anything trains or is written: unknown
keys (including `+key=` typos, which bypass Hydra's struct check), values, cross-key rules,
and, for runs about to train, TRL's own GRPOConfig checks. Errors are `UserError` with one
line naming key, value and what is allowed.
"""

from __future__ import annotations

import re

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from grpo_ablate.config import registry  # noqa: F401 - the resolvers and the sweep group
from grpo_ablate.config.checks import (
    check_launch,
    check_paths,
    check_relations,
    check_vllm,
    resolve_device,
)
from grpo_ablate.config.identity import RunSpec, run_id
from grpo_ablate.config.layout import check_layout, match_budget
from grpo_ablate.config.paths import CONF_DIR
from grpo_ablate.config.schema import check_keys, check_values, suggest
from grpo_ablate.config.trainer import check_with_trl
from grpo_ablate.errors import UserError


def validate(cfg: DictConfig | dict) -> RunSpec:
    """Check a composed config; return the RunSpec it describes or raise UserError. TRL's
    own checks are not run here (they import TRL): `check_trainable` runs them."""
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
    check_keys(data)
    check_values(data)
    resolve_device(data["trainer"])
    check_vllm(data["trainer"])
    match_budget(data)
    check_relations(data)
    check_launch(data)
    check_paths(data)
    return RunSpec(config=data, run_id=run_id(data))


def check_trainable(specs: list[RunSpec]) -> None:
    """TRL's own GRPOConfig checks, for runs that are about to train (each distinct trainer
    section once)."""
    seen = set()
    for spec in specs:
        key = repr(sorted(spec.config["trainer"].items()))
        if key not in seen:
            seen.add(key)
            check_with_trl(spec.config)


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
        return f"{key}={value}: unknown key; {suggest(key)}"
    m = re.search(r"Could not find '(\w+)/([^']+)'; Available options in '\w+': (.*)", msg)
    if m:
        group, bad, opts = m.groups()
        opts = opts.split("; Config search path")[0]
        opts = ", ".join(o.strip() for o in opts.split(";") if o.strip())
        return f"{group}={bad}: no such {group}; allowed: {opts}"
    return msg


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
    check_layout([(s.arm, s.config) for s in specs])
    return specs
