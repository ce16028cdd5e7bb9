"""Which tricks can be applied together, derived rather than kept by hand: every pair of
hook tricks (the tricks TRL lacks) and each hook trick with each TRL-native trick, combined
as one trick file (combination.py) over the baseline and validated as any run is. A pair
either combines or is refused in one line naming both and why: arms of one family are
alternatives; two tricks that set one key differently clash; a hook's own rule or a rule of
the pair (hook_tricks: `replaces`, `excludes`) refuses it. The same rules meet a recipe, a
`sweep=pair`, a confirmation and any composed run, since they are checked at validation.
`grpo-ablate tricks --pairs` prints the table.

Validating a pair is validating the baseline with both tricks' settings, as any run is. Where
no setting of the pair is an interpolation and none touches a key the baseline's own
interpolations read (the batch layout's G, a clip's recipe value), the resolved baseline with
the settings written in is that config exactly, so it is validated as plain data, without
composing and resolving it again (most pairs: 1,332 compositions took about 90 s); any other
pair takes the full road. tests/test_hook_tricks_pairs.py checks both roads agree."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from itertools import combinations, product

import yaml
from omegaconf import DictConfig, OmegaConf

from grpo_ablate.config.catalog import load_catalog
from grpo_ablate.config.combination import combine
from grpo_ablate.config.compose import compose, config_data, validate
from grpo_ablate.errors import UserError

COMBINES = "combines"


def arms_by_kind(config_dirs: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(hook-trick arms, TRL-native arms) of the catalogs a run on any device can take (the
    vLLM corrections need a vLLM run and are left out)."""
    tricks = [t for t in load_catalog(config_dirs)
              if t["id"] != "baseline" and t.get("catalog", "review") != "vllm"]
    hooks = [t["id"] for t in tricks if any(k.startswith("hooks.") for k in t["keys"])]
    return hooks, [t["id"] for t in tricks if t["id"] not in hooks]


INTERPOLATION = re.compile(r"\$\{([^}]*)\}")


@dataclass(frozen=True)
class Baseline:
    """The baseline as composed (`config`, interpolations kept), resolved (`data`), and the
    keys its interpolations read (`read`): a setting there changes other resolved values."""

    config: DictConfig
    data: dict
    read: frozenset[str]

    @classmethod
    def of(cls, config: DictConfig) -> Baseline:
        text = yaml.safe_dump(OmegaConf.to_container(config, resolve=False))
        read = {name for inside in INTERPOLATION.findall(text)
                for name in re.findall(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+", inside)}
        return cls(config, config_data(config), frozenset(read))

    def plain(self, settings: dict) -> dict | None:
        """The resolved baseline with `settings` written in, where that is the composed
        config exactly; None where a setting interpolates or feeds an interpolation."""
        if any(isinstance(v, str) and "${" in v for v in settings.values()) or any(
                k == r or k.startswith(r + ".") or r.startswith(k + ".")
                for k in settings for r in self.read):
            return None
        data = copy.deepcopy(self.data)
        for key, value in settings.items():
            node = data
            *parents, leaf = key.split(".")
            for part in parents:
                if node.get(part) is None:  # a hook's block, null in the baseline
                    node[part] = {}
                node = node[part]
                if not isinstance(node, dict):
                    return None
            node[leaf] = copy.deepcopy(value)
        return data


def pair_verdict(first: str, second: str, base: DictConfig | Baseline,
                 config_dirs: list[str] | None = None, full: bool = False) -> str:
    """`combines`, or the one line that refuses the two tricks together. `full`: compose
    and resolve the pair's config whatever its settings (the road `Baseline.plain` saves)."""
    try:
        combined = combine(f"{first}+{second}", [first, second], config_dirs)
    except UserError as exc:
        return str(exc)
    if combined.passed_over:
        return (f"{first} and {second} are arms of one family "
                f"({combined.families[first]}): alternatives, never applied together")
    baseline = base if isinstance(base, Baseline) else Baseline.of(base)
    plain = None if full else baseline.plain(
        {**combined.settings, "trick.modules": list(combined.modules)})
    try:
        if plain is not None:
            validate(plain)
        else:
            validate(OmegaConf.merge(baseline.config, yaml.safe_load(combined.trick_yaml())))
    except UserError as exc:
        return str(exc)
    return COMBINES


def pair_table(config_dirs: list[str] | None = None,
               natives: bool = True) -> list[tuple[str, str, str]]:
    """(first, second, verdict) for every pair of hook-trick arms, then (unless `natives` is
    false) each hook-trick arm with each TRL-native arm."""
    search = [f"hydra.searchpath=[{','.join(f'file://{d}' for d in config_dirs)}]"] \
        if config_dirs else []
    full = compose([*search, "trick=baseline"])
    base = Baseline.of(OmegaConf.masked_copy(full, [k for k in full if k != "hydra"]))
    hooks, natives_ = arms_by_kind(config_dirs)
    pairs = [*combinations(hooks, 2), *product(hooks, natives_ if natives else [])]
    return [(a, b, pair_verdict(a, b, base, config_dirs)) for a, b in pairs]


def pair_lines(config_dirs: list[str] | None = None) -> list[str]:
    """`grpo-ablate tricks --pairs`: one line per pair, the refused ones with why."""
    rows = pair_table(config_dirs)
    width = max(len(f"{a} + {b}") for a, b, _ in rows)
    lines = [f"{'pair':<{width}}  verdict"]
    lines += [f"{a + ' + ' + b:<{width}}  {verdict}" for a, b, verdict in rows]
    refused = sum(v != COMBINES for _, _, v in rows)
    lines.append(f"{len(rows)} pairs: {len(rows) - refused} combine, {refused} refused")
    return lines
