"""The `trainer` section: it is TRL's `GRPOConfig`. Its field names (the keys a user may set
under `trainer.`), the GRPOConfig arguments of a run, and TRL's own checks of them.

The field names are read from TRL once per installed TRL/transformers version and kept in
the cache folder: importing TRL costs seconds (torch, transformers), and `--cfg job`,
`--help` or a re-run of a finished sweep must not pay that to check a key's spelling.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
import warnings
from functools import cache
from typing import Any

from grpo_ablate.errors import UserError
from grpo_ablate.records import write_cache_file
from grpo_ablate.runtime import cache_root, package_version, quiet_libraries, stable_hash


def _fields_cache():
    versions = f"trl-{package_version('trl')}-transformers-{package_version('transformers')}"
    return cache_root() / "trl" / f"grpo-config-fields-{versions}.json"


def live_grpo_config_fields() -> frozenset[str]:
    """GRPOConfig's field names, from TRL itself."""
    from trl import GRPOConfig  # heavy: torch + transformers

    return frozenset(f.name for f in dataclasses.fields(GRPOConfig))


@cache
def grpo_config_fields() -> frozenset[str]:
    """GRPOConfig's field names: from the cache for this TRL and transformers version, else
    from TRL (and then cached; a cache that cannot be written is skipped)."""
    path = _fields_cache()
    try:
        return frozenset(json.loads(path.read_text()))
    except (OSError, ValueError):
        pass
    names = live_grpo_config_fields()
    write_cache_file(path, json.dumps(sorted(names)))
    return names


def grpo_kwargs(data: dict, output_dir: str) -> dict[str, Any]:
    """The GRPOConfig arguments of a run: the trainer section plus bookkeeping that never
    changes the computation (where to write, what to report, no progress bars)."""
    kwargs = dict(data["trainer"])
    if kwargs.get("max_grad_norm") is None:
        kwargs["max_grad_norm"] = 0.0  # transformers' spelling of "no clipping"
    # W&B is logged by grpo_ablate.training.wandb_logger, not by transformers' callback.
    kwargs.update(output_dir=output_dir, save_strategy="no", disable_tqdm=True, report_to=[])
    return kwargs


def check_with_trl(data: dict) -> None:
    """TRL's own GRPOConfig checks on the trainer section (done where a run is about to
    train, not for --cfg or --help). A section TRL accepted once is remembered per TRL and
    transformers version, so a sweep launches without importing TRL in its launching process
    (3 s here) when its sections have been checked before."""
    kwargs = grpo_kwargs(data, output_dir="-")
    accepted = cache_root() / "trl" / "accepted" / stable_hash(
        [package_version("trl"), package_version("transformers"), kwargs], 24)
    if accepted.is_file():
        return
    quiet_libraries()  # importing TRL prints W&B and deprecation chatter
    from trl import GRPOConfig  # heavy: torch + transformers

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation chatter about fields; errors still raise
        try:
            GRPOConfig(**grpo_kwargs(data, output_dir=tmp))
        except (ValueError, TypeError) as exc:
            text = re.sub(r"\s+", " ", str(exc)).strip()
            raise UserError(f"trainer: {text}") from None
    try:
        accepted.parent.mkdir(parents=True, exist_ok=True)
        accepted.touch()
    except OSError:  # no writable cache: checked again next time
        pass
