"""Where grpo-ablate's own files are: the Hydra configs and sweep files ship inside the
package (a wheel carries them); a checkout also shows them at its top level (conf/ and
sweeps/ are links to these folders)."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = PACKAGE_DIR.parent
CONF_DIR = PACKAGE_DIR / "conf"
SWEEPS_DIR = PACKAGE_DIR / "sweeps"
ACCELERATE_DIR = CONF_DIR / "accelerate"
