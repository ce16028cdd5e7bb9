"""`grpo-ablate wandb-sync`: upload a sweep's offline W&B runs, one history per run.

W&B cannot append to an offline run, so each attempt of a resumed run writes its own
`offline-run-<time>-<id>` folder under one id, and the newest one holds the whole history
(the resumed attempt logs its checkpoint's history again first). `wandb sync` of every
folder of one id keeps one of them, not necessarily the newest; this uploads the newest of
each id alone and names the older attempts, which it leaves as they are."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from grpo_ablate.errors import UserError

OFFLINE = re.compile(r"^offline-run-(\d{8}_\d{6})-(.+)$")


def newest_attempts(folder: Path) -> tuple[list[Path], list[Path]]:
    """(the newest offline-run folder of each W&B id under `folder`, the older ones)."""
    by_id: dict[str, list[tuple[str, float, Path]]] = {}
    for path in Path(folder).rglob("offline-run-*"):
        found = OFFLINE.match(path.name)
        if path.is_dir() and found:
            by_id.setdefault(found.group(2), []).append((found.group(1), path.stat().st_mtime,
                                                         path))
    newest, older = [], []
    for attempts in by_id.values():
        attempts.sort()
        newest.append(attempts[-1][2])
        older += [p for _, _, p in attempts[:-1]]
    return sorted(newest), sorted(older)


def sync_command(folder: Path) -> tuple[list[str], list[Path]]:
    """The `wandb sync` command that uploads the newest attempts; the older ones."""
    if not Path(folder).is_dir():
        raise UserError(f"wandb-sync {folder}: not a folder; allowed: a sweep folder (or any "
                        "folder holding offline-run-* folders)")
    newest, older = newest_attempts(folder)
    if not newest:
        raise UserError(f"wandb-sync {folder}: no offline-run-* folder under it; allowed: the "
                        "folder of a sweep run with logger=wandb (offline)")
    return [sys.executable, "-m", "wandb", "sync", *map(str, newest)], older


def main(folder: Path, dry_run: bool) -> int:
    command, older = sync_command(folder)
    for path in older:
        print(f"superseded (an earlier attempt, not uploaded): {path}")
    print(" ".join(command[2:]))
    return 0 if dry_run else subprocess.run(command).returncode
