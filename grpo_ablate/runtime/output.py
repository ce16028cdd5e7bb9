"""What a user reads on stderr: whole lines, and lengths of time."""

from __future__ import annotations

import sys
import threading

_SAY = threading.Lock()


def duration(seconds: float) -> str:
    """A length of time as a person reads it: 4.2 s, 40 s, 12.5 min, 3.5 h."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def say(line: str, stream=None) -> None:
    """One whole line to stderr: progress watchers (threads) and runs print at once, and
    print() writes the text and its newline separately, so lines could interleave."""
    with _SAY:
        out = stream or sys.stderr
        out.write(line + "\n")
        out.flush()
