"""The restart-intensity window, as a pure part: OTP's ``add_restart``.

One window per supervisor, not per child (``docs/supervision.md``, "Restart
intensity"). :func:`add_restart` takes a window and a new :class:`RestartStamp` and
returns the next window and whether the restart is allowed:

1. the new stamp is appended **first**, at its time ``now``;
2. stamps older than ``period`` are dropped — a stamp at ``t`` still counts while
   ``now - t <= period`` (inclusive: a stamp exactly ``period`` old counts);
3. the restart is allowed while at most ``intensity`` stamps remain. With intensity 0
   no restart is ever allowed; the window then holds the one refused stamp.

Stamps are added in time order (trio's clock never goes back), so expired stamps are
always the oldest. Nothing here reads a clock, and no window ever changes: the caller
keeps the window returned and passes ``now`` in the stamp. A refused restart's window is what
:func:`intensity_exceeded` reports, oldest failure first.
"""

from __future__ import annotations

import attrs

from actors import ActorError, Code


@attrs.frozen
class RestartStamp:
    """One restart counted in the window: when, which child, and the failure behind it."""

    at: float
    child: str
    error: ActorError


@attrs.frozen(eq=False)
class RestartWindow:
    """The restarts counted within the last ``period`` seconds, oldest first: a value.

    :func:`add_restart` never changes the window it is given. So that a restart costs
    O(1) rather than a copy of the window, a window is a view — positions
    ``[first, end)`` — of an append-only log: the next window appends to the log only
    if nothing was appended after its own ``end`` (no view ever sees past its ``end``),
    else it copies; once more expired stamps than live ones sit at the log's front, it
    is copied without them.
    """

    _log: list[RestartStamp] = attrs.field(factory=list)
    _first: int = 0
    _end: int = 0

    @classmethod
    def of(cls, *stamps: RestartStamp) -> RestartWindow:
        """A window holding ``stamps`` (oldest first)."""
        return cls(log=list(stamps), first=0, end=len(stamps))

    @property
    def stamps(self) -> tuple[RestartStamp, ...]:
        return tuple(self._log[self._first : self._end])

    def __len__(self) -> int:
        return self._end - self._first

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RestartWindow) and self.stamps == other.stamps

    def __hash__(self) -> int:
        return hash(self.stamps)


EMPTY_WINDOW = RestartWindow()

TIME_TOLERANCE = 1e-9
"""Seconds: ages within this of ``period`` count as exactly ``period`` (float rounding)."""

_COMPACT_AFTER = 16  # expired stamps tolerated at the log's front before copying


def add_restart(
    window: RestartWindow, stamp: RestartStamp, *, intensity: int, period: float
) -> tuple[RestartWindow, bool]:
    """Count ``stamp`` (first), drop what is older than ``period`` as of ``stamp.at``,
    and say whether at most ``intensity`` restarts remain — the restart is allowed.

    A stamp is dropped when ``stamp.at - t > period + TIME_TOLERANCE``, so a stamp at
    ``t = stamp.at - period`` is kept — also when float subtraction makes the age a hair
    more than ``period`` (``0.4 - 0.1 > 0.3``).
    """
    now = stamp.at
    log, first, end = window._log, window._first, window._end
    horizon = period + TIME_TOLERANCE
    while first < end and now - log[first].at > horizon:
        first += 1
    if first == end or (first > _COMPACT_AFTER and 2 * first > end):
        log, first, end = log[first:end], 0, end - first  # a fresh log, without the expired
    elif end != len(log):
        log, first, end = log[first:end], 0, end - first  # the log went on elsewhere: copy
    log.append(stamp)
    kept = RestartWindow(log, first, end + 1)
    return kept, end + 1 - first <= intensity


def intensity_exceeded(
    supervisor: str, window: RestartWindow, *, intensity: int, period: float
) -> ActorError:
    """``restart_intensity_exceeded`` for ``supervisor`` (its path): ``errors`` are the
    failures in ``window``, oldest first."""
    failures = tuple(stamp.error for stamp in window.stamps)
    return ActorError.from_code(
        Code.RESTART_INTENSITY_EXCEEDED,
        f"{supervisor}: {len(failures)} failures within {period} s (max_restarts {intensity})",
        actor=supervisor,
        errors=failures,
    )
