"""How one incarnation of an actor slot ends, and what passes through an actor untouched.

An incarnation (:meth:`actors.cell.ActorCell.run_incarnation`) returns one :class:`Exit`:

* ``NORMAL`` — a stop was requested (``stop_self``, ``ref.stop``, a shutdown) and the
  instance finished its in-flight message; ``reason`` is the stop's reason.
* ``CRASHED`` — a handler raised; ``error`` is the classified failure, ``after`` what the
  supervision decided (``RESTART`` or ``STOP``; ``RESUME`` never ends an incarnation) and
  ``reason`` is ``"crashed:<code>"``.
* ``CANCELLED`` — a kill (stop timeout, brutal shutdown) ended it, or a cancel in effect
  superseded a failure (``error`` is then the ``cancelled`` error, the failure its cause).

Only ``trio.Cancelled``, ``KeyboardInterrupt`` and ``SystemExit`` (or a group holding
them) propagate out of an incarnation (:func:`must_propagate`); any other
``BaseException`` a hook raises (``GeneratorExit``, a custom subclass) is that actor's
failure, classified like any other.
"""

from __future__ import annotations

import enum

import attrs
import trio

from actors.errors import ActorError


class AfterCrash(enum.Enum):
    """What happens to a crashed instance (the supervision's answer to a crash)."""

    RESUME = "resume"  # keep the instance: only the caller of that message failed
    RESTART = "restart"  # end the incarnation after ``on_restart(error)``
    STOP = "stop"  # end it after ``on_stop("crashed:<code>")``


class ExitKind(enum.StrEnum):
    NORMAL = "normal"  # a stop was requested and the instance finished
    CRASHED = "crashed"  # the handler raised; ``error`` says what
    CANCELLED = "cancelled"  # an enclosing cancel (or a kill) ended it


@attrs.frozen
class Exit:
    """How one incarnation ended."""

    kind: ExitKind
    reason: str
    error: ActorError | None = None
    after: AfterCrash | None = None


def must_propagate(exc: BaseException) -> bool:
    """Whether ``exc`` passes through an actor untouched: ``trio.Cancelled``,
    ``KeyboardInterrupt``, ``SystemExit``, a group holding either of the latter, or a
    group made only of cancellations. Anything else is the actor's own failure."""
    if isinstance(exc, trio.Cancelled | KeyboardInterrupt | SystemExit):
        return True
    if isinstance(exc, BaseExceptionGroup):
        exits, _ = exc.split((KeyboardInterrupt, SystemExit))
        return exits is not None or exc.split(trio.Cancelled)[1] is None
    return False
