"""Named pause points, so the kill-and-resume tests can SIGKILL a sweep at an exact moment.

With GRPO_ABLATE_PAUSE_AT=<point>:<n> set, the n-th time this process reaches <point> it
writes the point's name to GRPO_ABLATE_PAUSE_MARKER and sleeps. An environment variable,
not a config key: where a run is interrupted must not change its identity (run_id).
Unset, as always outside those tests, a pause point does nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

_reached: dict[str, int] = {}


def pause_point(name: str) -> None:
    spec = os.environ.get("GRPO_ABLATE_PAUSE_AT")
    if not spec:
        return
    point, _, nth = spec.rpartition(":")
    if point != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] == int(nth):
        Path(os.environ["GRPO_ABLATE_PAUSE_MARKER"]).write_text(name)
        time.sleep(3600)
