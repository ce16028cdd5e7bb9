"""The trick catalog, read from conf/trick/*.yaml (the one source of truth)."""

from __future__ import annotations

from omegaconf import OmegaConf

from grpo_ablate.config import CONF_DIR


def load_catalog() -> list[dict]:
    """Every arm's metadata, baseline first."""
    tricks = [OmegaConf.to_container(OmegaConf.load(p))["trick"]
              for p in sorted((CONF_DIR / "trick").glob("*.yaml"))]
    return sorted(tricks, key=lambda t: (t["id"] != "baseline", t["family"], t["id"]))
