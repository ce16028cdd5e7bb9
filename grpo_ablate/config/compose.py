"""Compose (Hydra) and validate a run config into a typed, hashed RunSpec.

Everything a user can get wrong is checked before anything trains or is written: unknown
keys (including `+key=` typos, which bypass Hydra's struct check), values, cross-key rules,
and, for runs about to train, TRL's own GRPOConfig checks. Errors are `UserError` with one
line naming key, value and what is allowed.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra._internal import config_repository
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType, ValueType
from hydra.errors import HydraException
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from grpo_ablate import __version__, hook_tricks
from grpo_ablate.config import registry  # noqa: F401 - the resolvers and the sweep group
from grpo_ablate.config.catalog import closest_tricks, load_catalog
from grpo_ablate.config.checks import (
    check_launch,
    check_lora,
    check_paths,
    check_relations,
    check_resumable,
    check_vllm,
    fill_lora,
    resolve_device,
)
from grpo_ablate.config.early_stop import check_early_stop
from grpo_ablate.config.identity import RunSpec, run_id
from grpo_ablate.config.layout import check_layout, match_budget
from grpo_ablate.config.paths import CONF_DIR, SWEEPS_DIR
from grpo_ablate.config.schema import check_keys, check_values, suggest
from grpo_ablate.config.trainer import check_with_trl
from grpo_ablate.errors import UserError
from grpo_ablate.records import write_cache_file
from grpo_ablate.runtime import cache_root, package_version, say


def validate(cfg: DictConfig | dict) -> RunSpec:
    """Check a composed config, resolve it (`resolve`) and check the result; return the
    RunSpec it describes or raise UserError. The input is never changed. TRL's own checks
    are not run here (they import TRL): `check_trainable` runs them."""
    data = config_data(cfg)
    check_written(data)
    announce_former_name(data)
    data = resolve(data)
    check_resolved(data)
    return RunSpec(config=data, run_id=run_id(data))


def resolved_spec(cfg: DictConfig) -> RunSpec:
    """The RunSpec of a job whose config a pre-flight already validated (the sweeper, or
    `grpo-ablate run`): resolved on this machine, the checks not repeated. Its trick's hook
    modules are imported here, as the run needs them registered in this process."""
    data = config_data(cfg)
    hook_tricks.import_modules((data.get("trick") or {}).get("modules"))
    data = resolve(data)
    return RunSpec(config=data, run_id=run_id(data))


def config_data(cfg: DictConfig | dict) -> dict:
    """A composed config as plain data, its interpolations resolved, the hydra node left out."""
    if isinstance(cfg, DictConfig):
        try:
            # The hydra node is large and not the run's: resolve everything else.
            data = {key: _resolved(cfg, key) for key in cfg if key != "hydra"}
        except OmegaConfBaseException as exc:
            # A resolver's own message names the key and what is allowed: keep only that.
            text = one_line(exc)
            text = re.sub(r"^\w+ raised while resolving interpolation: (.*?); full_key: .*$",
                          r"\1", text)
            raise UserError(text) from None
    else:
        data = cfg
    return {k: v for k, v in data.items() if k != "hydra"}


def check_written(data: dict) -> None:
    """The keys and values as the files and overrides wrote them (a trick file's modules
    are imported first: they register the hook tricks whose keys it sets)."""
    hook_tricks.import_modules((data.get("trick") or {}).get("modules"))
    check_keys(data)
    check_values(data)


_ANNOUNCED: set[str] = set()


def announce_former_name(data: dict) -> None:
    """`trick=<a former name>` works, and says its name now, once per process."""
    old = (data.get("trick") or {}).get("called_as")
    if old and old not in _ANNOUNCED:
        _ANNOUNCED.add(old)
        arm = data["trick"]["id"]
        say(f"notice: trick={old} is now trick={arm}; the old name still works"
            if data["trick"].get("formerly") == old else f"notice: trick={old} is the arm {arm}")


def resolve(data: dict) -> dict:
    """What follows the machine and the budget, on a copy: a null device and precision
    become this machine's (recorded), and budget.match=completions sets the batch and the
    steps; a model.lora block gets LoraConfig's defaults for the keys it leaves out; a former
    trick name's marker is dropped. Nothing else changes a config after composition."""
    out = copy.deepcopy(data)
    out["trick"].pop("called_as", None)  # how it was asked for: not part of the run
    fill_lora(out["model"])
    resolve_device(out["trainer"])
    match_budget(out)
    return out


def check_resolved(data: dict) -> None:
    """The cross-key rules, on the resolved values (vLLM needs a GPU, LoRA its package,
    the batch its groups, processes their GPUs, local files their rows)."""
    check_vllm(data["trainer"])
    check_lora(data["model"])
    check_relations(data)
    check_resumable(data)
    check_launch(data)
    check_paths(data)
    check_early_stop(data)


def _resolved(cfg: DictConfig, key: str):
    node = cfg._get_node(key)
    if isinstance(node, DictConfig | ListConfig):
        return OmegaConf.to_container(node, resolve=True)
    return cfg[key]  # a value, interpolations resolved


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


def lora_keys_alone(overrides: list[str]) -> list[str]:
    """`model.lora.r=4` as a peft user writes it. Hydra cannot set a key inside a block that
    is null (full fine-tuning, the default), so each plain `model.lora.<key>=...` becomes
    `++model.lora.<key>=...`: set where the model has a block (a LoRA preset), added where it
    has none, the keys left out then taking peft's LoraConfig defaults."""
    return [f"++{o}" if o.startswith("model.lora.") else o for o in overrides]


def compose(overrides: list[str]) -> DictConfig:
    """Compose conf/ with command-line overrides, including the hydra node. Inside a running
    Hydra app (grpo-ablate's sweeper) the app's own Hydra is set aside and put back."""
    global_hydra = GlobalHydra.instance()
    running = global_hydra.hydra
    global_hydra.clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3",
                                   job_name="grpo_ablate"):
            return hydra_compose("config", overrides=list(overrides), return_hydra_config=True)
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        raise UserError(_explain_compose_error(exc, overrides)) from None
    finally:
        global_hydra.clear()
        if running is not None:
            global_hydra.initialize(running)


def _explain_compose_error(exc: BaseException, overrides: list[str]) -> str:
    msg = one_line(exc)
    m = re.search(r"Could not override '([^']+)'", msg)
    if m:
        key = m.group(1)
        value = next((o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == key), "?")
        hint = suggest(key)
        return f"{key}={value}: {'cannot be set alone' if ' is null here' in hint else 'unknown key'}; {hint}"
    m = re.search(r"Could not find '(\w+)/([^']+)'; Available options in '\w+': (.*)", msg)
    if m:
        group, bad, opts = m.groups()
        opts = opts.split("; Config search path")[0]
        names = [o.strip() for o in opts.split(";") if o.strip()]
        if group == "trick":  # 70-odd names and their former ones: the closest, and where all are
            near = closest_tricks(bad)
            return (f"trick={bad}: no such trick" + (f"; did you mean {near[0]}?" if near else "")
                    + f" ({len(load_catalog())} tricks: `grpo-ablate tricks` lists them)")
        return f"{group}={bad}: no such {group}; allowed: {', '.join(names)}"
    return msg


def override_key(override: str) -> str:
    """The config key a command-line override sets (`+trick=a,b` -> trick)."""
    return override.split("=", 1)[0].lstrip("+~")


def parse_overrides(overrides: list[str]) -> list:
    try:
        return OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as exc:
        raise UserError(one_line(exc)) from None


def expand_jobs(overrides: list[str], params: dict | None = None) -> list[list[str]]:
    """The job list of a sweep, as Hydra's basic sweeper crosses it: the sweep file's
    `hydra.sweeper.params` first (composed from the fixed overrides unless given), command-line
    values winning, crossed in the same order."""
    if params is None:
        parsed = parse_overrides(overrides)
        cfg = compose([o.input_line for o in parsed if not o.is_sweep_override()])
        params = OmegaConf.select(cfg, "hydra.sweeper.params") or {}
    params_conf = [f"{k}={v}" for k, v in params.items()]
    merged = parse_overrides(params_conf + list(overrides))
    try:
        return BasicSweeper.split_arguments(merged, None)[0]
    except HydraException as exc:
        raise UserError(one_line(exc)) from None


def specs_for(overrides: list[str], multirun: bool, composer: Composer | None = None,
              params: dict | None = None) -> list[RunSpec]:
    """Validate every run a command would launch, before anything is trained or written;
    each spec keeps the job overrides that launch it. A command that composes several sweeps
    (an adaptive one, rung by rung) passes one `composer` so each set of group choices goes
    through Hydra once; grpo-ablate's sweeper passes its `params` (the sweep file's)."""
    jobs = expand_jobs(overrides, params) if multirun else [list(overrides)]
    if not multirun and any(o.is_sweep_override() for o in parse_overrides(overrides)):
        raise UserError(f"{' '.join(overrides)}: a sweep of values needs `grpo-ablate sweep`")
    composer = composer or Composer()
    specs = [composer.spec(job) for job in jobs]
    check_layout([(s.arm, s.config) for s in specs])
    return specs


class Composer:
    """Composes the jobs of a sweep: each distinct set of group choices (trick=, model=, ...)
    once through Hydra, then each job's plain `key=value` overrides of keys that config
    already holds as values, set on a copy: what Hydra does after merging the defaults
    (tests/test_config_compose.py checks that the two agree, the hydra node aside, on every job of
    the catalog). The catalog's 125 jobs composed through Hydra one by one took 15 s here,
    this way 4 s, and under 1 s from the compose cache (`_base`)."""

    def __init__(self) -> None:
        self._bases: dict[tuple[str, ...], DictConfig] = {}
        self._is_value: dict[str, bool] = {}  # key -> the config holds it as a value
        self._specs: dict[frozenset[str], RunSpec] = {}

    def spec(self, job: list[str]) -> RunSpec:
        """A job composed and validated, once per distinct job (an adaptive sweep's rungs
        name again jobs the whole sweep named), with the overrides a launcher runs it by
        (the search path aside: it is the Hydra app's own already)."""
        key = frozenset(job)
        if key not in self._specs:
            self._specs[key] = replace(validate(self(job)), job=tuple(
                o for o in job if not o.startswith("hydra.searchpath=")))
        return self._specs[key]

    def __call__(self, job: list[str]) -> DictConfig:
        parsed = parse_overrides(job)
        new = [o.key_or_group for o in parsed if _plain(o) and o.key_or_group not in self._is_value]
        if new:  # first sight of a key: compose this job in full, and learn what the key is
            full = compose(job)
            self._is_value.update({key: _holds_value(full, key) for key in new})
            return full
        plain = [o for o in parsed if _plain(o) and self._is_value[o.key_or_group]]
        groups = tuple(o.input_line for o in parsed if o not in plain)
        if groups not in self._bases:
            self._bases[groups] = self._base(groups)
        base = self._bases[groups]
        if not all(_holds_value(base, o.key_or_group) for o in plain):
            return compose(job)  # a key the config does not hold as a value: Hydra decides
        cfg = copy.deepcopy(base)
        with open_dict(cfg):
            for o in plain:
                OmegaConf.update(cfg, o.key_or_group, o.value(), merge=False)
        return cfg  # without the hydra node, which validation leaves out


    def _base(self, groups: tuple[str, ...]) -> DictConfig:
        """The composed config of these group choices without its hydra node (validation
        leaves that node out), from the compose cache when the config files are unchanged."""
        path = self._cache_path(groups)
        if path is not None and path.is_file():
            try:
                return OmegaConf.create(path.read_text())
            except (OSError, ValueError, OmegaConfBaseException):
                pass
        full = compose(list(groups))
        base = OmegaConf.masked_copy(full, [k for k in full if k != "hydra"])
        if path is not None:  # no writable cache: compose every time
            write_cache_file(path, OmegaConf.to_yaml(base))
        return base

    def _cache_path(self, groups: tuple[str, ...]) -> Path | None:
        """`<cache>/compose/<hash>.yaml`, the hash of the group choices and of every config
        file they can reach (names, sizes, times) and the versions composing them; None when
        a search path is not a local folder."""
        dirs = [CONF_DIR, SWEEPS_DIR]
        for group in groups:
            if group.startswith("hydra.searchpath="):
                for entry in group.split("=", 1)[1].strip("[]").split(","):
                    if not entry.startswith("file://"):
                        return None
                    dirs.append(Path(entry[len("file://"):]))
        files = sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns)
                       for d in dirs for p in Path(d).rglob("*.yaml"))
        blob = json.dumps([groups, files, __version__, package_version("hydra-core"),
                           package_version("omegaconf")])
        return cache_root() / "compose" / f"{hashlib.sha256(blob.encode()).hexdigest()[:24]}.yaml"


def _plain(o: Override) -> bool:
    return o.type == OverrideType.CHANGE and o.value_type == ValueType.ELEMENT \
        and o.package is None and "/" not in o.key_or_group \
        and not o.key_or_group.startswith("hydra")


def _holds_value(cfg: DictConfig, key: str) -> bool:
    node = OmegaConf.select(cfg, key, default=_ABSENT, throw_on_missing=False)
    return node is not _ABSENT and not isinstance(node, DictConfig)


_ABSENT = object()


@contextmanager
def help_sharing_one_repository() -> Iterator[None]:
    """Hydra's help lists every config group (about 95), and for each one deep-copies its
    whole config repository (to keep it unmutated), which was 60% of `run --help`. Listing
    mutates nothing a later listing reads (each re-initialises the same sources), so while
    help prints, the listings share one repository. The output is the same, byte for byte
    (tests/test_cli_commands.py)."""
    cls = config_repository.CachingConfigRepository
    copying = cls.__init__

    def sharing(self, delegate) -> None:
        self.delegate, self.cache = delegate, {}

    cls.__init__ = sharing
    try:
        yield
    finally:
        cls.__init__ = copying
