"""The base of every event record, the hook protocol, and what makes a record safe.

A record is built with the runtime's own values, cheaply (most are never seen by a hook).
What a hook gets is :meth:`Event.redacted`, made once per emit when a hook is installed,
so it holds no secret:

* :func:`actors.redact.redact_text` for every text field;
* :func:`safe_error` for an :class:`ActorError`: a *snapshot*, not the live error — its
  text fields redacted, ``partial_text`` (model output) dropped, no traceback (whose
  frames hold locals), and its cause chain replaced by snapshots: an :class:`ActorError`
  cause by its own snapshot, any other exception by a :class:`RedactedCause` (type name
  and redacted text). The chain is kept as deep as the log's ``cause_chain`` reads it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, Self

import attrs

from actors.error_types import ActorError
from actors.redact import redact_text

#: How many causes a snapshot keeps (as many as :func:`actors.observe.cause_chain` lists).
CHAIN_LIMIT = 10


@attrs.frozen(kw_only=True, slots=True)
class Event:
    """One structured event: ``name`` and ``level`` belong to the class, facts are fields.

    Records are frozen and built with keywords only. ``name`` is the event name in the
    log (``"actor.crashed"``); ``level`` the ``logging`` level it is logged at. Every
    record of the runtime lives in :mod:`actors.events`, one class per name.
    """

    name: ClassVar[str]
    level: ClassVar[int]

    def fields(self) -> dict[str, Any]:
        """The fields as a log sink writes them, in order (records may reshape them)."""
        return {field.name: getattr(self, field.name) for field in attrs.fields(type(self))}

    def redacted(self) -> Self:
        """This record as hooks get it: text fields redacted, each error a
        :func:`safe_error` snapshot. Made once per emit, and only when a hook is
        installed — the log sink redacts its own way (the structlog pipeline)."""
        changes: dict[str, Any] = {}
        for field in attrs.fields(type(self)):
            value = getattr(self, field.name)
            if isinstance(value, ActorError):
                changes[field.name] = safe_error(value)
            elif isinstance(value, str):
                # The plain text of a str subclass: its methods may be what hides a secret.
                changes[field.name] = redact_text(str.__str__(value))
        return attrs.evolve(self, **changes)


class EventHook(Protocol):
    """Instrumentation: called with every record, whatever the log level.

    A hook runs synchronously in the task that emitted the event, so it must be quick
    and must not block. An ``Exception`` it raises is logged (``event_hook.failed``)
    and does not reach the emitter; the other hooks and the log still get the event.
    """

    def __call__(self, event: Event) -> None: ...


class RedactedCause(Exception):
    """Stands in, in a record's error, for a cause that was not an :class:`ActorError`.

    ``type_name`` is the original exception's type name, ``message`` its ``str``,
    redacted; ``__cause__`` continues the chain the same way.
    """

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(type_name, message)
        self.type_name = type_name
        self.message = message

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}" if self.message else self.type_name


def safe_error(error: ActorError) -> ActorError:
    """A snapshot of ``error`` that is safe to hand to any hook (see the module docstring).

    The snapshot is of the same class, with the same code, correlation id, numbers and
    flags; ``str`` fields are redacted, ``partial_text`` is ``None``, ``errors`` (the
    members) are snapshots too.
    """
    return _snapshot(error, CHAIN_LIMIT)


def _snapshot(error: ActorError, depth: int) -> ActorError:
    changes: dict[str, Any] = {}
    for field in attrs.fields(type(error)):
        value = getattr(error, field.name)
        if isinstance(value, str) and field.init:
            # The plain text of a str subclass: its methods may be what hides a secret.
            changes[field.name] = redact_text(str.__str__(value))
    changes["partial_text"] = None  # model output: never in a log line or an event
    if error.errors:
        changes["errors"] = tuple(_snapshot(member, depth - 1) for member in error.errors)
    copy = attrs.evolve(error, **changes)
    copy.__cause__ = _snapshot_cause(error.__cause__, depth)
    return copy


def _snapshot_cause(cause: BaseException | None, depth: int) -> BaseException | None:
    if cause is None or depth <= 0:
        return None
    if isinstance(cause, ActorError):
        return _snapshot(cause, depth - 1)
    if isinstance(cause, RedactedCause):
        stand_in = RedactedCause(cause.type_name, cause.message)
    else:
        stand_in = RedactedCause(type(cause).__name__, redact_text(_text_of(cause)))
    stand_in.__cause__ = _snapshot_cause(cause.__cause__, depth - 1)
    return stand_in


def _text_of(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception as failure:  # noqa: BLE001 - a broken __str__ must not stop the event
        return f"<str() raised {type(failure).__name__}>"
