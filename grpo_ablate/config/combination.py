"""Tricks applied together as one trick file: a finished sweep's recommended recipe
(`grpo-ablate recipe`, `grpo-ablate confirm`) or a pair a user names (`sweep=pair`).

A combined trick is the baseline with each of its tricks' settings, read from their trick
files as written (interpolations kept). Two arms of one family cannot both be applied: the
better-supported one is (the order the caller gives), and the combination says why. Tricks of
different families that set one key to different values are refused in one line; the same
value twice is one setting."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import yaml
from omegaconf import OmegaConf

from grpo_ablate.config.catalog import former_names, trick_paths
from grpo_ablate.errors import UserError

HEADER = "# @package _global_\n"


@dataclass(frozen=True)
class Combination:
    """One trick file applying `tricks` together; `passed_over`: (arm, the arm kept, why)."""

    name: str
    tricks: tuple[str, ...]
    settings: dict[str, Any]          # dotted key -> value, as the trick files write it
    families: dict[str, str]          # trick -> family
    modules: tuple[str, ...] = ()
    passed_over: tuple[tuple[str, str, str], ...] = ()
    changes: str = ""
    against: str | None = None   # the arm it is compared with (default: the baseline)
    topology: str | None = None  # its place in a leave-one-out or add-one sweep, in words

    def trick_yaml(self, comment: str = "") -> str:
        """The trick file a user can keep as <config dir>/trick/<name>.yaml."""
        meta: dict[str, Any] = {
            "id": self.name, "family": "combination",
            "changes": self.changes or " + ".join(self.tricks),
            "prior": self.topology
            or "a combination of single-trick verdicts: confirm it against the baseline",
            "keys": sorted(self.settings), "composed_of": list(self.tricks)}
        if self.modules:
            meta["modules"] = list(self.modules)
        if self.against:
            meta["against"] = self.against
        if self.topology:
            meta["topology"] = self.topology
        body: dict[str, Any] = {"trick": meta}
        for key, value in self.settings.items():
            node = body
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        lines = [f"# {line}" for line in comment.splitlines()] if comment else []
        return HEADER + "".join(f"{line}\n" for line in lines) + yaml.safe_dump(
            body, sort_keys=False, default_flow_style=None, width=100)

    def override_line(self) -> str:
        """The same settings as command-line overrides of the baseline."""
        return " ".join(f"{k}={_override_value(v)}" for k, v in self.settings.items())


def _override_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, dict)):
        return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return str(value)


def _flatten(node: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_flatten(value, f"{dotted}."))
        else:
            out[dotted] = value
    return out


@lru_cache(maxsize=4096)
def _trick_file(text: str) -> dict:
    # As Hydra reads it (YAML 1.1 alone reads `1.0e6` as a string), interpolations kept;
    # keyed by the text, so an edited file is parsed again.
    return OmegaConf.to_container(OmegaConf.create(text), resolve=False) or {}


def trick_settings(name: str, config_dirs: list[str] | None = None) -> tuple[dict, dict]:
    """(the trick's metadata, its settings as dotted keys) from its file; a former name is
    read as the trick it became."""
    name = former_names(config_dirs).get(name, name)
    path = trick_paths(config_dirs).get(name)
    if path is None:
        raise UserError(f"combine: trick={name}: no such trick file; allowed: a trick of "
                        "`grpo-ablate tricks`")
    data = copy.deepcopy(_trick_file(path.read_text()))
    meta = data.pop("trick", None) or {}
    data.pop("defaults", None)
    return meta, _flatten(data)


def combine(name: str, tricks: list[str], config_dirs: list[str] | None = None,
            why_first: dict[str, str] | None = None) -> Combination:
    """The tricks, best-supported first, as one trick file. `why_first`: for each trick, the
    words saying why it is preferred over a later arm of its family."""
    settings: dict[str, Any] = {}
    set_by: dict[str, str] = {}
    families: dict[str, str] = {}
    kept: list[str] = []
    modules: list[str] = []
    passed: list[tuple[str, str, str]] = []
    for trick in dict.fromkeys(tricks):  # each once, in the order given
        if trick == "baseline":
            continue
        meta, own = trick_settings(trick, config_dirs)
        family = meta.get("family", trick)
        rival = next((k for k in kept if families[k] == family), None)
        if rival is not None:
            passed.append((trick, rival, (why_first or {}).get(rival, "given first")))
            continue
        for key, value in own.items():
            if key in settings and settings[key] != value:
                other = set_by[key]
                raise UserError(
                    f"combine: {other} (family {families[other]}) and {trick} (family "
                    f"{family}) set {key} to different values ({settings[key]!r}, {value!r}); "
                    "allowed: tricks that change different settings, or the same value")
        for key, value in own.items():
            settings.setdefault(key, value)
            set_by.setdefault(key, trick)
        families[trick] = family
        kept.append(trick)
        modules += [m for m in meta.get("modules") or [] if m not in modules]
    if not kept:
        raise UserError(f"combine: {name}: no trick to apply (only the baseline); allowed: at "
                        "least one trick of `grpo-ablate tricks`")
    return Combination(name=name, tricks=tuple(kept), settings=settings, families=families,
                       modules=tuple(modules), passed_over=tuple(passed))
