"""Predicates on config values, shared by the config schema's rules and the hook tricks'
(a bool is not a number here: `true` is never a learning rate)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

# A hub id as `from_pretrained` takes it: a name, or org/name.
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_fraction(x: Any) -> bool:
    """A number in [0, 1]."""
    return is_number(x) and 0.0 <= x <= 1.0


def or_null(pred: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda x: x is None or pred(x)
