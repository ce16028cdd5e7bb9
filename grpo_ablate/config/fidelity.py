"""Each arm's fidelity card: whether the arm is the method its name and `source:` claim, at the
settings that define that method. The card lives in the arm's trick file (`trick.fidelity`):

    fidelity:
      equation: the source's equation, or the reference implementation's function
      reference: where the equation is stated (paper, section, code path)
      settings:   {dotted.key: {source: value, where: "where the source states it"}}
      choices:    {dotted.key: {why: "the source leaves it open: why this value"}}
      deviations: {dotted.key: {source: value, why: "why the arm does not follow it"}}
      duplicate_of: {arm: other_arm, where: "on which baseline both compute one gradient"}

and `trick.premise` lists the keys the arm sets so that its method has something to act on
(off-policy data, the clip of the method it modifies): they equal its `against` arm's, so the
comparison isolates the method, and they are not its activity.

`card_problems` checks a card against what the arm composes (its settings are what the
source says, each deviation is one and says why, every key the file sets is on the card and
in `trick.keys`); `grpo-ablate tricks --fidelity` prints the cards with the composed values,
and docs/tricks.md is generated from the same rows (scripts/gen_reference.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from grpo_ablate.config.catalog import load_catalog, trick_paths

MISSING = object()


def value_at(config: dict, dotted: str) -> Any:
    """A composed config's value at a dotted key (MISSING where there is none)."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def same_value(a: Any, b: Any) -> bool:
    """Equal as the config means them: numbers by value (1.0e6 == 1000000), the rest exactly."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return a == b


def set_keys(file_body: dict) -> list[str]:
    """The keys a trick file sets: each `trainer.<field>` (a dict field as one key) and each
    `hooks.<name>` block."""
    keys = [f"trainer.{k}" for k in (file_body.get("trainer") or {})]
    keys += [f"hooks.{k}" for k in (file_body.get("hooks") or {})]
    return keys


def covers(card_key: str, key: str) -> bool:
    """Whether a card entry is about `key` (itself or one of its fields)."""
    return card_key == key or card_key.startswith(key + ".")


@dataclass(frozen=True)
class Card:
    """One arm's fidelity card, with the values the arm composes."""

    arm: str
    source: str
    against: str | None
    equation: str
    reference: str
    settings: dict[str, dict]
    choices: dict[str, dict]
    deviations: dict[str, dict]
    duplicate_of: dict | None
    premise: tuple[str, ...]
    composed: dict[str, Any]  # dotted key -> the arm's composed value (settings, deviations)


def card_of(meta: dict, composed: dict) -> Card:
    card = meta.get("fidelity") or {}
    keys = [*(card.get("settings") or {}), *(card.get("choices") or {}),
            *(card.get("deviations") or {})]
    return Card(arm=meta["id"], source=str(meta.get("source") or "the source review (DIGEST)"),
                against=meta.get("against"), equation=str(card.get("equation") or ""),
                reference=str(card.get("reference") or ""),
                settings=dict(card.get("settings") or {}),
                choices=dict(card.get("choices") or {}),
                deviations=dict(card.get("deviations") or {}),
                duplicate_of=card.get("duplicate_of"), premise=tuple(meta.get("premise") or ()),
                composed={k: value_at(composed, k) for k in keys})


def card_problems(meta: dict, file_body: dict, composed: dict, against: dict | None,
                  arms: set[str]) -> list[str]:
    """What is wrong with an arm's card, one line each (none: the card holds). `file_body`:
    its trick file; `composed`: the arm's composed config; `against`: its comparison arm's."""
    arm = meta["id"]
    card = meta.get("fidelity")
    if not isinstance(card, dict):
        return [f"{arm}: no fidelity card (trick.fidelity)"]
    problems = [f"{arm}: fidelity.{part} is empty" for part in ("equation", "reference")
                if not str(card.get(part) or "").strip()]
    settings, deviations = card.get("settings") or {}, card.get("deviations") or {}
    choices = card.get("choices") or {}
    if not settings and not deviations and not choices:
        problems.append(f"{arm}: the card names no setting of the source")
    for key, entry in choices.items():
        if not isinstance(entry, dict) or not entry.get("why"):
            problems.append(f"{arm}: fidelity.choices.{key} needs `why`")
        elif value_at(composed, key) is MISSING:
            problems.append(f"{arm}: fidelity.choices.{key}: the arm composes no such key")
        if key in settings or key in deviations:
            problems.append(f"{arm}: {key} is a choice and also a setting or deviation")
    for key, entry in settings.items():
        got = value_at(composed, key)
        if not isinstance(entry, dict) or "source" not in entry or not entry.get("where"):
            problems.append(f"{arm}: fidelity.settings.{key} needs `source` and `where`")
        elif got is MISSING or not same_value(got, entry["source"]):
            problems.append(f"{arm}: {key} composes to {got!r}, the source's {entry['source']!r} "
                            f"({entry['where']}): set it in the arm, or make it a deviation")
    for key, entry in deviations.items():
        if not isinstance(entry, dict) or "source" not in entry or not entry.get("why"):
            problems.append(f"{arm}: fidelity.deviations.{key} needs `source` and `why`")
        elif same_value(value_at(composed, key), entry["source"]):
            problems.append(f"{arm}: {key} is a deviation but composes to the source's value "
                            f"{entry['source']!r}: make it a setting")
        if key in settings:
            problems.append(f"{arm}: {key} is both a setting and a deviation")
    keys = list(meta.get("keys") or [])
    for key in set_keys(file_body):
        if key not in keys:
            problems.append(f"{arm}: its file sets {key}, which trick.keys does not list")
    for key in keys:
        if not any(covers(k, key) for k in [*settings, *choices, *deviations]):
            problems.append(f"{arm}: trick.keys names {key}, which its card does not")
    for key in meta.get("premise") or []:
        if key not in keys:
            problems.append(f"{arm}: premise {key} is not in trick.keys")
        elif against is None:
            problems.append(f"{arm}: premise {key} needs an `against` arm that shares it")
        elif not same_value(value_at(composed, key), value_at(against, key)):
            problems.append(f"{arm}: premise {key} is {value_at(composed, key)!r}, its against "
                            f"arm's {value_at(against, key)!r}: a premise is shared with it")
    duplicate = card.get("duplicate_of")
    if duplicate is not None and (not isinstance(duplicate, dict)
                                  or duplicate.get("arm") not in arms
                                  or not duplicate.get("where")):
        problems.append(f"{arm}: fidelity.duplicate_of needs `arm` (an arm) and `where`")
    return problems


def composed_arms(arms: list[str], config_dirs: list[str] | None = None,
                  full: bool = False) -> dict[str, dict]:
    """Each arm's composed config (the baseline recipe, the default model and task), its
    interpolations resolved; not validated (a vLLM arm composes on a machine without vLLM).
    An arm whose file only writes values (no defaults list, no interpolation read or
    written) is the resolved baseline with them written in (`Baseline.plain`, as the pair
    table does); `full`: every arm through Hydra."""
    from grpo_ablate.config.compose import compose, config_data
    from grpo_ablate.config.pairs import Baseline

    search = [f"hydra.searchpath=[{','.join(f'file://{d}' for d in config_dirs)}]"] \
        if config_dirs else []
    base = None if full else Baseline.of(compose([*search, "trick=baseline"]))
    out = {}
    for arm in arms:
        plain = None if base is None else plain_arm(arm, base, config_dirs)
        out[arm] = plain if plain is not None else config_data(compose([*search,
                                                                        f"trick={arm}"]))
    return out


def plain_arm(arm: str, base, config_dirs: list[str] | None = None) -> dict | None:
    """The arm's composed config written as plain data, or None where only Hydra can."""
    import yaml

    from grpo_ablate.config.catalog import SAFE_LOADER
    from grpo_ablate.config.combination import trick_settings

    path = trick_paths(config_dirs).get(arm)
    if path is None or "defaults" in (yaml.load(path.read_text(), Loader=SAFE_LOADER) or {}):
        return None
    meta, settings = trick_settings(arm, config_dirs)
    data = base.plain(settings)
    if data is None or "${" in repr(meta):
        return None
    data["trick"] = meta  # the trick group's file, chosen in the baseline's place
    return data


def file_bodies(config_dirs: list[str] | None = None) -> dict[str, dict]:
    """Each arm's trick file, parsed (what it sets, beside its metadata)."""
    import yaml

    from grpo_ablate.config.catalog import SAFE_LOADER

    return {name: yaml.load(path.read_text(), Loader=SAFE_LOADER) or {}
            for name, path in trick_paths(config_dirs).items()}


def catalog_cards(config_dirs: list[str] | None = None,
                  arms: list[str] | None = None) -> tuple[list[Card], list[str]]:
    """(every arm's card with its composed values, every problem found), the baseline aside
    (the reference arm: its recipe is the review's, docs/tricks.md)."""
    metas = {t["id"]: t for t in load_catalog(config_dirs) if t["id"] != "baseline"}
    chosen = [a for a in (arms or sorted(metas)) if a in metas]
    needed = set(chosen) | {metas[a]["against"] for a in chosen if metas[a].get("against")}
    composed = composed_arms(sorted(needed), config_dirs)
    bodies = file_bodies(config_dirs)
    cards, problems = [], []
    for arm in chosen:
        meta = metas[arm]
        against = composed.get(meta.get("against")) if meta.get("against") else None
        problems += card_problems(meta, bodies[arm], composed[arm], against, set(metas) | {"baseline"})
        cards.append(card_of(meta, composed[arm]))
    return cards, problems


def show(value: Any) -> str:
    if value is MISSING:
        return "(not set)"
    if isinstance(value, float) and (abs(value) >= 1e4 or 0 < abs(value) < 1e-3):
        return f"{value:g}"
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def card_rows(card: Card) -> list[tuple[str, str, str | None, str, str]]:
    """Each key of the card: (key, the arm's value, the source's (None where the source
    leaves it open), where it is stated or why, and its kind: setting, choice, deviation)."""
    return ([(k, show(card.composed[k]), show(e["source"]), e["where"], "setting")
             for k, e in card.settings.items()]
            + [(k, show(card.composed[k]), None, e["why"], "choice")
               for k, e in card.choices.items()]
            + [(k, show(card.composed[k]), show(e["source"]), e["why"], "deviation")
               for k, e in card.deviations.items()])


def card_lines(card: Card) -> list[str]:
    """One arm's card as the terminal shows it."""
    head = card.arm + (f" (vs {card.against})" if card.against else "")
    lines = [head, f"  source: {card.source}", f"  equation: {card.equation}",
             f"  reference: {card.reference}"]
    for key, arm, source, note, kind in card_rows(card):
        lines.append(f"  {key} = {arm}  " + {
            "setting": f"(source: {source}; {note})",
            "choice": f"(the source leaves it open: {note})",
            "deviation": f"DEVIATES (source: {source}): {note}"}[kind])
    if card.premise:
        lines.append(f"  premise (shared with {card.against}): {', '.join(card.premise)}")
    if card.duplicate_of:
        lines.append(f"  DUPLICATE of {card.duplicate_of['arm']}: {card.duplicate_of['where']}")
    return lines


def fidelity_lines(config_dirs: list[str] | None = None) -> list[str]:
    """`grpo-ablate tricks --fidelity`: every arm's card, then the problems (none: held)."""
    cards, problems = catalog_cards(config_dirs)
    lines: list[str] = []
    for card in cards:
        lines += card_lines(card)
    deviating = sum(bool(c.deviations) for c in cards)
    lines.append(f"{len(cards)} arms: {len(cards) - deviating} follow their source's settings, "
                 f"{deviating} deviate where their card says why, "
                 f"{sum(bool(c.duplicate_of) for c in cards)} declared duplicates")
    lines += [f"problem: {p}" for p in problems]
    return lines
