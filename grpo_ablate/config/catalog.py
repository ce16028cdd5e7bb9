"""The trick catalog, read from the trick files (the one source of truth): the package's
conf/trick/*.yaml, plus trick/*.yaml in any --config-dir a user adds."""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from pathlib import Path

import yaml

from grpo_ablate.config.paths import CONF_DIR

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where it is built in


def prior_of(trick: dict) -> str | None:
    """What was claimed for a trick before any sweep: the source review's verdict (its
    catalog), or a paper's claim with its source (the variants)."""
    if trick.get("claim"):
        return f"{trick['claim']} ({trick['source']})" if trick.get("source") else trick["claim"]
    return trick.get("prior") or trick.get("verdict")  # `verdict`: the old spelling


def trick_paths(config_dirs: list[str] | None = None) -> dict[str, Path]:
    """Every trick file by name; a user's file overrides a packaged one of the same name, as
    Hydra's search path does."""
    files = {p.stem: p for p in sorted((CONF_DIR / "trick").glob("*.yaml"))}
    for folder in config_dirs or []:
        files.update({p.stem: p for p in sorted((Path(folder) / "trick").glob("*.yaml"))})
    return files


@lru_cache(maxsize=4096)
def _trick_meta(text: str) -> dict:
    # Keyed by the file's text (reading is cheap, parsing is not): an edited file is parsed
    # again. Plain YAML, not OmegaConf: the metadata is literal text, and every process reads
    # every file (the former names are registered on import): libyaml's safe loader, 7x faster.
    return (yaml.load(text, Loader=SAFE_LOADER) or {}).get("trick") or {}


def _metas(config_dirs: list[str] | None) -> list[dict]:
    # The cached metadata itself, for readers that do not keep it: not to be changed.
    return [t for t in (_trick_meta(p.read_text()) for p in trick_paths(config_dirs).values())
            if "id" in t]  # a former name's file holds only `called_as`


def load_catalog(config_dirs: list[str] | None = None) -> list[dict]:
    """Every arm's metadata, baseline first (each call its own copy)."""
    tricks = [copy.deepcopy(t) for t in _metas(config_dirs)]
    return sorted(tricks, key=lambda t: (t["id"] != "baseline", t["family"], t["id"]))


def former_names(config_dirs: list[str] | None = None) -> dict[str, str]:
    """A renamed trick's former name -> its name now (`trick.formerly` in its file)."""
    return {t["formerly"]: t["id"] for t in _metas(config_dirs) if t.get("formerly")}


def current_name(arm: str) -> str:
    """An arm's name now: a former name maps to the trick's new one."""
    return former_names().get(arm, arm)


def catalog_table(config_dirs: list[str] | None = None) -> list[str]:
    """`grpo-ablate tricks`: one line per trick, the review's catalog first, then the
    2025-26 variants (sweep=variants)."""
    tricks = sorted(load_catalog(config_dirs),
                    key=lambda t: t.get("catalog", "review") != "review")
    rows = [("id", "family", "what it changes", "claimed: the review's verdict, or the paper's")]
    rows += [(t["id"] + (f" (vs {t['against']})" if t.get("against") else "")
              + (f" (was {t['formerly']})" if t.get("formerly") else ""), t["family"],
              t["changes"], prior_of(t) or "-") for t in tricks]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return ["  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3]
            for r in rows]


def _folded(name: str) -> str:
    """A name as a person might type it: case, spaces, dashes and underscores aside."""
    return re.sub(r"[^0-9a-z.@]", "", name.casefold())


def names_by_spelling(config_dirs: list[str] | None = None) -> dict[str, str]:
    """Every way an arm may be named (its id, its former name, its `aliases`: a paper's name
    such as GSPO), folded (case, spaces and dashes aside) -> the arm's id; a spelling two arms
    share names neither."""
    seen: dict[str, set[str]] = {}
    for t in _metas(config_dirs):
        for name in [t["id"], t.get("formerly"), *(t.get("aliases") or [])]:
            if name:
                seen.setdefault(_folded(str(name)), set()).add(t["id"])
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


def canonical_trick(name: str, config_dirs: list[str] | None = None) -> str | None:
    """The arm a name means (`GSPO`, `Loss_CISPO`, a former name), or None."""
    return names_by_spelling(config_dirs).get(_folded(name))


def closest_tricks(name: str, config_dirs: list[str] | None = None, n: int = 1) -> list[str]:
    """The arms whose names or aliases are closest to a misspelt one (did you mean)."""
    import difflib

    spellings = names_by_spelling(config_dirs)
    near = difflib.get_close_matches(_folded(name), list(spellings), n=n * 3, cutoff=0.6)
    return list(dict.fromkeys(spellings[s] for s in near))[:n]
