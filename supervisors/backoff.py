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

import random as _random
from collections.abc import Callable
from typing import Literal

import attrs

Kind = Literal["fixed", "linear", "exponential"]


def _non_negative(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


@attrs.frozen(kw_only=True)
class Backoff:
    """A delay schedule. Frozen; ``random`` is excluded from equality."""

    kind: Kind = "exponential"
    initial: float = attrs.field(default=0.1, validator=_non_negative)
    factor: float = attrs.field(default=2.0, validator=_non_negative)
    step: float = attrs.field(default=0.0, validator=_non_negative)
    max: float = attrs.field(default=30.0, validator=_non_negative)
    jitter: float = attrs.field(
        default=0.0,
        validator=attrs.validators.and_(attrs.validators.ge(0.0), attrs.validators.le(1.0)),
    )
    reset_after: float = attrs.field(default=60.0, validator=_non_negative)
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
