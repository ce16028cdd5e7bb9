"""Which tricks can be applied together, derived rather than kept by hand: every pair of
hook tricks (the tricks TRL lacks) and each hook trick with each TRL-native trick, combined
as one trick file (combination.py) over the baseline and validated as any run is. A pair
either combines or is refused in one line naming both and why: arms of one family are
alternatives; two tricks that set one key differently clash; a hook's own rule or a rule of
the pair (hook_tricks: `replaces`, `excludes`) refuses it. The same rules meet a recipe, a
`sweep=pair`, a confirmation and any composed run, since they are checked at validation.
`grpo-ablate tricks --pairs` prints the table."""

from __future__ import annotations

from itertools import combinations, product

import yaml
from omegaconf import DictConfig, OmegaConf

from grpo_ablate.config.catalog import load_catalog
from grpo_ablate.config.combination import combine
from grpo_ablate.config.compose import compose, validate
from grpo_ablate.errors import UserError

COMBINES = "combines"


def arms_by_kind(config_dirs: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(hook-trick arms, TRL-native arms) of the catalogs a run on any device can take (the
    vLLM corrections need a vLLM run and are left out)."""
    tricks = [t for t in load_catalog(config_dirs)
              if t["id"] != "baseline" and t.get("catalog", "review") != "vllm"]
    hooks = [t["id"] for t in tricks if any(k.startswith("hooks.") for k in t["keys"])]
    return hooks, [t["id"] for t in tricks if t["id"] not in hooks]


def pair_verdict(first: str, second: str, base: DictConfig,
                 config_dirs: list[str] | None = None) -> str:
    """`combines`, or the one line that refuses the two tricks together."""
    try:
        combined = combine(f"{first}+{second}", [first, second], config_dirs)
    except UserError as exc:
        return str(exc)
    if combined.passed_over:
        return (f"{first} and {second} are arms of one family "
                f"({combined.families[first]}): alternatives, never applied together")
    body = yaml.safe_load(combined.trick_yaml())
    try:
        validate(OmegaConf.merge(base, body))
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
    base = OmegaConf.masked_copy(full, [k for k in full if k != "hydra"])
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
