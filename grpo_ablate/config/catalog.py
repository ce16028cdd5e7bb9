"""The trick catalog, read from the trick files (the one source of truth): the package's
conf/trick/*.yaml, plus trick/*.yaml in any --config-dir a user adds."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from grpo_ablate.config.paths import CONF_DIR


def prior_of(trick: dict) -> str | None:
    """What was claimed for a trick before any sweep: the source review's verdict (its
    catalog), or a paper's claim with its source (the variants)."""
    if trick.get("claim"):
        return f"{trick['claim']} ({trick['source']})" if trick.get("source") else trick["claim"]
    return trick.get("verdict")


def load_catalog(config_dirs: list[str] | None = None) -> list[dict]:
    """Every arm's metadata, baseline first; a user's file overrides a packaged one of the
    same name, as Hydra's search path does."""
    files = {p.stem: p for p in sorted((CONF_DIR / "trick").glob("*.yaml"))}
    for folder in config_dirs or []:
        files.update({p.stem: p for p in sorted((Path(folder) / "trick").glob("*.yaml"))})
    tricks = [OmegaConf.to_container(OmegaConf.load(p))["trick"] for p in files.values()]
    return sorted(tricks, key=lambda t: (t["id"] != "baseline", t["family"], t["id"]))
