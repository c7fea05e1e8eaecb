"""Checks on what a user builds a pool from: each failure is ``config_invalid`` naming
the field, raised when the pool (or a target) is built — never on the first request."""

from __future__ import annotations

import math
from typing import Any

from actors import ActorError, Code
from actors.checks import as_float


def invalid(field: str, expected: str, value: Any) -> ActorError:
    """``config_invalid`` naming ``field`` and what it must be (the value's type, not the
    value: a config may hold secrets)."""
    return ActorError.from_code(
        Code.CONFIG_INVALID, f"{field} must be {expected}, got {type(value).__name__}"
    )


def seconds_or_none(field: str, value: Any, *, positive: bool = False) -> float | None:
    """``value`` as float seconds: ``None``, or a finite number >= 0 (> 0 with
    ``positive``) as :func:`~actors.checks.as_float` reads numbers. NaN, infinities,
    negatives, bools, huge ints and non-numbers are refused."""
    if value is None:
        return None
    expected = "None or a finite number of seconds " + ("> 0" if positive else ">= 0")
    number = as_float(value)
    if number is None or not math.isfinite(number) or number < 0 or (positive and number == 0):
        raise invalid(field, expected, value)
    return number


def name(field: str, value: Any) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value:
        raise invalid(field, "a non-empty string", value)
    return value
