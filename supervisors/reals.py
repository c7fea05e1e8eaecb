"""One reading of "a number" for everything users configure (specs, pools, prices).

:func:`as_float` is the shared first step of every numeric check: a real number — an
``int`` or a ``float``, never a ``bool`` (``True`` is not a count of seconds) — as a float,
or ``None`` for anything else, including an int too large for a float (trio's clock
arithmetic would overflow on it). NaN and infinities come through as floats: each check
decides whether it allows them.
"""

from __future__ import annotations

from typing import Any


def as_float(value: Any) -> float | None:
    """``value`` as a float when it is an int or a float (not a bool) a float can hold."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None
