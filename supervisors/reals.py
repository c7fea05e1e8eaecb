"""One reading of "a number" for everything users configure (specs, pools, prices).

:func:`as_float` is the shared first step of every numeric check: a real number — an
``int`` or a ``float``, never a ``bool`` (``True`` is not a count of seconds) — as a float,
or ``None`` for anything else, including an int too large for a float (trio's clock
arithmetic would overflow on it). NaN and infinities come through as floats: each check
decides whether it allows them.
"""

from __future__ import annotations

import math
from typing import Any

from actors import ActorError, Code


class FieldProblem(ValueError):
    """One field's problem while a config is loaded from untrusted input (a cattrs
    structure hook raises it with the problem's text; cattrs attaches the field's path,
    and the loader reports the text as it is)."""


def grace_seconds(value: Any, where: str) -> float:
    """A grace period: seconds >= 0, ``math.inf`` for no limit (an int too large for a
    float is no limit too); ``input_validation`` naming ``where`` otherwise (NaN, negative,
    a bool, not a number)."""
    seconds = math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
    if not seconds >= 0:
        raise ActorError.from_code(
            Code.INPUT_VALIDATION, f"{where}: grace must be seconds >= 0 (inf: no limit)"
        )
    return seconds


def shown(value: Any) -> str:
    """A short repr for a message (an int too long for ``repr`` is summarised)."""
    if isinstance(value, int) and value.bit_length() > 200:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def as_float(value: Any) -> float | None:
    """``value`` as a float when it is an int or a float (not a bool) a float can hold."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None
