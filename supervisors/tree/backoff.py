"""Backoff between restarts (and, later, retries).

``delay(n)`` for the n-th consecutive restart (n from 0):

1. ``d = min(max, initial * factor ** n)`` — ``linear`` uses ``initial + step * n`` and
   ``fixed`` uses ``initial``;
2. jitter ±``jitter`` (a fraction) is applied: ``d * (1 + jitter * (2u - 1))`` with ``u``
   from the injectable ``random`` source (uniform in [0, 1));
3. clamped to ``max`` again, so jitter never pushes a delay past the cap (Akka's typed
   backoff can exceed it; ours cannot), and never below 0;
4. a ``retry_after`` from the error raises the delay to at least that value — the source
   asked for it, so it is honoured exactly even beyond ``max``.

The exponent is the caller's business: supervisors reset it once a child has run
``reset_after`` seconds without failing.
"""

from __future__ import annotations

import math
import random as _random
from collections.abc import Callable
from typing import Any, Literal

import attrs

from actors import ActorError, Code

Kind = Literal["fixed", "linear", "exponential"]


def _number(low: float, high: float = math.inf) -> Callable[[object, Any, Any], None]:
    """A finite real number (not a bool) within ``[low, high]``, else ``config_invalid``."""

    def validator(_: object, attribute: attrs.Attribute[float], value: Any) -> None:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not _finite(value)
            or not low <= value <= high
        ):
            bounds = f">= {low:g}" if high == math.inf else f"within [{low:g}, {high:g}]"
            shown = f"{value!r:.40}" if isinstance(value, int | float) else type(value).__name__
            raise ActorError.from_code(
                Code.CONFIG_INVALID,
                f"Backoff.{attribute.name} must be a finite number {bounds}, got {shown}",
            )

    return validator


def _finite(value: float) -> bool:
    """``math.isfinite``, and ``False`` for an int too large for a float."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _kind(_: object, attribute: attrs.Attribute[str], value: Any) -> None:
    if value not in ("fixed", "linear", "exponential"):
        raise ActorError.from_code(
            Code.CONFIG_INVALID,
            f"Backoff.kind must be fixed, linear or exponential, got {value!r:.40}",
        )


@attrs.frozen(kw_only=True)
class Backoff:
    """A delay schedule. Frozen; ``random`` is excluded from equality. Every field is
    checked when it is built: ``config_invalid`` names the one that is wrong."""

    kind: Kind = attrs.field(default="exponential", validator=_kind)
    initial: float = attrs.field(default=0.1, validator=_number(0.0))
    factor: float = attrs.field(default=2.0, validator=_number(0.0))
    step: float = attrs.field(default=0.0, validator=_number(0.0))
    max: float = attrs.field(default=30.0, validator=_number(0.0))
    jitter: float = attrs.field(default=0.0, validator=_number(0.0, 1.0))
    reset_after: float = attrs.field(default=60.0, validator=_number(0.0))
    random: Callable[[], float] = attrs.field(default=_random.random, eq=False, repr=False)

    def base(self, n: int) -> float:
        """The delay before jitter for the n-th consecutive attempt (n >= 0)."""
        if self.kind == "fixed":
            raw = self.initial
        elif self.kind == "linear":
            raw = self.initial + self.step * n
        else:
            try:
                raw = self.initial * self.factor**n
            except OverflowError:
                raw = self.max
        return min(self.max, raw)

    def delay(self, n: int, *, retry_after: float | None = None) -> float:
        """The delay for the n-th consecutive attempt; see the module docstring."""
        d = self.base(n)
        if self.jitter:
            d *= 1.0 + self.jitter * (2.0 * self.random() - 1.0)
        d = max(0.0, min(self.max, d))
        if retry_after is not None and retry_after > d:
            d = retry_after
        return d


IMMEDIATE = Backoff(kind="fixed", initial=0.0, max=0.0)
