"""Stable hashes: of config data (run identities, cache keys), and a run's W&B id."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def stable_hash(obj: Any, length: int = 16) -> str:
    """The first `length` hex digits of the sha256 of `obj` as sorted-key JSON (values JSON
    cannot hold are written by their str)."""
    blob = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def wandb_run_id(run_id: str, sweep_dir: str) -> str:
    """A run's W&B id: unique per sweep folder (two sweeps of the same runs must not collide
    when synced); the run's identity (run_id) stays what it is and is in the config and name."""
    where = str(Path(sweep_dir).resolve())
    return f"{run_id}-{hashlib.sha256(where.encode()).hexdigest()[:8]}"
