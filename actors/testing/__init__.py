"""Helpers for testing code built on the runtime: event capture (and chaos, in
:mod:`actors.testing.chaos`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar, overload

from actors import observe
from actors.events import Event, HookFailed

__all__ = ["capture_events"]

E = TypeVar("E", bound=Event)


@overload
def capture_events(selector: type[E], /) -> AbstractContextManager[list[E]]: ...


@overload
def capture_events(*selectors: str | type[Event]) -> AbstractContextManager[list[Event]]: ...


def capture_events(*selectors: str | type[Event]) -> AbstractContextManager[list[Any]]:
    """Collect the event records emitted inside the block, in order.

    A selector is an event name (``"actor.crashed"``) or a record class
    (:class:`~actors.events.ActorCrashed`; a base class selects its subclasses); with
    none, every record is collected. A name that no record class has raises
    ``ValueError`` (a typo would otherwise capture nothing, silently), as does
    ``event_hook.failed`` (never handed to hooks); anything else than a name or an
    :class:`~actors.events.Event` subclass raises ``TypeError``.

    Capture is a hook (:func:`actors.observe.add_event_hook`): it sees every record
    whatever the log level, and needs no :func:`~actors.observe.configure_logging`.
    Records are already redacted (:mod:`actors.events`).
    """
    for selector in selectors:
        if not isinstance(selector, str) and not (
            isinstance(selector, type) and issubclass(selector, Event)
        ):
            raise TypeError(
                f"capture_events() selects by event name or Event subclass, not {selector!r}"
            )
        if selector in (HookFailed, HookFailed.name):
            raise ValueError(
                "event_hook.failed is never handed to hooks (a failing hook must not loop): "
                "it is only logged"
            )
    names = frozenset(s for s in selectors if isinstance(s, str))
    classes = tuple(s for s in selectors if not isinstance(s, str))
    unknown = names - _known_names()
    if unknown:
        raise ValueError(f"no event record is named {', '.join(sorted(unknown))}")
    return _capture(names, classes, select_all=not selectors)


@contextmanager
def _capture(
    names: frozenset[str], classes: tuple[type[Event], ...], *, select_all: bool
) -> Iterator[list[Event]]:
    captured: list[Event] = []

    def hook(event: Event) -> None:
        if select_all or event.name in names or isinstance(event, classes):
            captured.append(event)

    remove = observe.add_event_hook(hook)
    try:
        yield captured
    finally:
        remove()


def _known_names() -> set[str]:
    """The names of every record class defined so far (the runtime's and any other)."""
    known: set[str] = set()
    pending = [Event]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        name = getattr(cls, "name", None)
        if isinstance(name, str):
            known.add(name)
    return known
