"""Screening designs (`grpo-ablate sweep sweep=screening`): every factor, a trick at two
levels (the baseline's setting and the trick's), set in every run of a two-level fractional
factorial drawn by pyDOE3, so each main effect is estimated from all the design's runs.

What is settled here, before anything runs: which tricks can be factors together (one per
family; a trick measured against another, `trick.against`, only beside it; no two setting one
key differently; each pair and then each design point validated as any run is), each design
point's trick file, and design.json (the design itself: config/fractional.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from omegaconf import DictConfig, OmegaConf

from grpo_ablate.config.catalog import load_catalog
from grpo_ablate.config.combination import Combination, trick_settings
from grpo_ablate.config.compose import validate
from grpo_ablate.config.fractional import alias_chains
from grpo_ablate.errors import UserError
from grpo_ablate.records import atomic_write_text
from grpo_ablate.runtime import stable_hash

DESIGN_FILE = "design.json"
# One alternative per family of the review, the arm the review names, in the review's order.
# The review's epsilon-clip is measured with reuse (reuse_2x: each batch used twice, clip 0.2).
REVIEW_FACTORS = ("kl_off", "reward_clamp_task", "length_penalty_task", "grad_norm_off",
                  "lr_schedule_cosine", "ema_0.9", "entropy_coef_0.01", "group_size_8",
                  "temperature_0.6", "filter_low_reward_all", "adv_norm_global", "reuse_2x")
@dataclass(frozen=True)
class Factor:
    """A trick as a two-level factor: its settings over the baseline's, and the factor it
    acts beside (`needs`: its trick file's `against`; its level then adds only what it sets
    beyond that trick)."""

    name: str
    family: str
    settings: dict[str, Any]
    modules: tuple[str, ...] = ()
    needs: str | None = None


def factors_for(names: list[str], config_dirs: list[str] | None = None) -> list[Factor]:
    """The factors, checked: known tricks, one per family, `against` tricks beside theirs,
    no key set two ways. Refusals are one line naming the tricks and what is allowed."""
    if len(names) < 3:
        raise UserError(f"factors={_listed(names)}: a screening design needs at least 3 "
                        "factors; allowed: 3 or more tricks of different families (2: "
                        "sweep=pair)")
    if len(set(names)) != len(names) or "baseline" in names:
        raise UserError(f"factors={_listed(names)}: allowed: different tricks, each once, "
                        "not the baseline")
    metas = {t["id"]: t for t in load_catalog(config_dirs)}
    factors = []
    for name in names:
        try:
            meta, settings = trick_settings(name, config_dirs)
        except UserError:
            raise UserError(f"factors: {name}: no such trick file; allowed: tricks of "
                            "`grpo-ablate tricks`") from None
        if meta.get("catalog") == "vllm":
            raise UserError(f"factors: {name} corrects vLLM's sampling and acts only in a vLLM "
                            "run; allowed: tricks any run can take (sweep=vllm_is for it)")
        factors.append(Factor(name=meta.get("id", name), family=meta.get("family", name),
                              settings=settings, modules=tuple(meta.get("modules") or ()),
                              needs=meta.get("against")))
    by_name = {f.name: f for f in factors}
    for a, b in combinations(factors, 2):
        if a.family == b.family:
            raise UserError(f"factors: {a.name} and {b.name} are arms of one family "
                            f"({a.family}): alternatives, never applied together; allowed: "
                            "one trick per family")
    out = []
    for f in factors:
        if f.needs and f.needs not in by_name:
            raise UserError(f"factors: {f.name} acts only beside {f.needs} (its trick file's "
                            f"`against`: {metas.get(f.name, {}).get('changes', f.name)}); "
                            f"allowed: add {f.needs} to the factors, or leave {f.name} out")
        if f.needs:  # its own level: what it sets beyond the trick it needs
            inner = by_name[f.needs].settings
            f = Factor(f.name, f.family, {k: v for k, v in f.settings.items()
                                          if inner.get(k, object()) != v}, f.modules, f.needs)
        out.append(f)
    for a, b in combinations(out, 2):
        for key in set(a.settings) & set(b.settings):
            if a.settings[key] != b.settings[key]:
                raise UserError(f"factors: {a.name} and {b.name} set {key} to different "
                                f"values ({a.settings[key]!r}, {b.settings[key]!r}); allowed: "
                                "tricks that change different settings")
    return out


def _listed(names: list[str]) -> str:
    return "[" + ",".join(names) + "]"


def point_name(on: list[Factor]) -> str:
    """A design point's trick: the baseline, the trick itself (its runs are an arm's, shared
    with a one-at-a-time sweep; a trick beside the one it needs is its own arm too), or a
    combined trick named after its settings."""
    if not on:
        return "baseline"
    if len(on) == 1 and on[0].needs is None:
        return on[0].name
    nested = [f for f in on if f.needs and f.needs in {g.name for g in on}]
    if len(on) == 2 and len(nested) == 1:  # e.g. reuse_2x + ratio_clip_high_0.28: that arm
        return nested[0].name
    return "screen_" + stable_hash(sorted((f.name, f.settings) for f in on), 10)


def point_combination(on: list[Factor]) -> Combination:
    settings: dict[str, Any] = {}
    for f in on:
        settings.update(f.settings)
    modules = tuple(dict.fromkeys(m for f in on for m in f.modules))
    return Combination(name=point_name(on), tricks=tuple(f.name for f in on),
                       settings=settings, families={f.name: f.family for f in on},
                       modules=modules, changes=" + ".join(f.name for f in on))


def check_together(factors: list[Factor], design: np.ndarray, base: DictConfig) -> None:
    """Each factor alone, each pair, then each design point composed over `base` and
    validated as a run is: the first refusal is one line naming the tricks."""
    def check(on: list[Factor], what: str) -> None:
        body = yaml.safe_load(point_combination(on).trick_yaml())
        try:
            validate(OmegaConf.merge(base, body))
        except UserError as exc:
            raise UserError(f"factors: {what} cannot run together: {exc}") from None

    for f in factors:
        check([f], f.name)
    for a, b in combinations(factors, 2):
        check([a, b], f"{a.name} and {b.name}")
    for row in design:
        on = [f for f, level in zip(factors, row, strict=True) if level > 0]
        if len(on) > 2:
            check(on, "the design point " + " + ".join(f.name for f in on))


def design_record(factors: list[Factor], design: np.ndarray, resolution: int, how: str,
                  fractions: list[int] | None = None) -> dict:
    """What design.json holds: the factors, the matrix, each row's trick, the aliases."""
    names = [f.name for f in factors]
    chains = alias_chains(design)
    return {
        "kind": "screening", "factors": [{"name": f.name, "family": f.family,
                                          "needs": f.needs, "keys": sorted(f.settings)}
                                         for f in factors],
        "design": design.tolist(), "resolution": resolution, "drawn_by": how,
        "points": [point_name([f for f, lv in zip(factors, row, strict=True) if lv > 0])
                   for row in design],
        "fractions": list(fractions) if fractions is not None else [0] * len(design),
        "chains": [[{"term": [names[i] for i in t], "sign": s} for t, s in ch]
                   for ch in chains],
    }


def write_design(sweep_dir: Path, record: dict, factors: list[Factor]) -> Path:
    """design.json and each combined point's trick file under <sweep_dir>/conf/trick/; the
    config dir to put on the search path. A sweep folder holds one design: a different one
    there is refused (a resumed sweep finds its own)."""
    path = sweep_dir / DESIGN_FILE
    extends = False
    if path.is_file():
        held = json.loads(path.read_text())
        # A fold-over adds a fraction: the design held is where the new one begins.
        same = _named(held.get("factors")) == _named(record["factors"])
        extends = same and \
            record["design"][:len(held.get("design", []))] == held.get("design") and \
            len(record["design"]) > len(held["design"])
        if same and len(held["design"]) > len(
                record["design"]) and held["design"][:len(record["design"])] == record["design"]:
            raise UserError(f"{path}: this sweep's design is folded over; allowed: "
                            "design=foldover with the sweep's own overrides")
        if not extends and (held.get("design") != record["design"]
                            or not same):
            raise UserError(f"{path}: this sweep folder holds another design (factors "
                            f"{[f['name'] for f in held.get('factors', [])]}); allowed: the "
                            "same factors and design, or another sweep_name")
    config_dir = sweep_dir / "conf"
    by_name = {f.name: f for f in factors}
    for point, row in zip(record["points"], record["design"], strict=True):
        if point == "baseline" or point in by_name:
            continue
        on = [f for f, lv in zip(factors, row, strict=True) if lv > 0]
        text = point_combination(on).trick_yaml(
            "A design point of a screening sweep (design.json beside runs/).")
        trick_file = config_dir / "trick" / f"{point}.yaml"
        if not trick_file.is_file() or trick_file.read_text() != text:
            atomic_write_text(trick_file, text)
    if extends or not path.is_file():  # the trick files first: design.json names them
        atomic_write_text(path, json.dumps(record, indent=1) + "\n")
    return config_dir


def _named(factors: list[dict] | None) -> list[tuple]:
    """A design's factors as they name it (a design.json written before the factors' keys
    were kept is the same design)."""
    return [(f["name"], f.get("family"), f.get("needs")) for f in factors or []]


def read_design(sweep_dir: Path) -> dict | None:
    path = Path(sweep_dir) / DESIGN_FILE
    return json.loads(path.read_text()) if path.is_file() else None
