"""Hooks and capture against hostile input: broken hooks, equal hooks, mutating hooks,
str subclasses hiding secrets, wrong selectors, a user's logger using event names."""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

import pytest

from actors import ActorError, Code, get_logger
from actors.events import ActorCrashed, Event, HookFailed
from actors.lowlevel import cell_of
from actors.observe import add_event_hook, configure_logging, emit
from actors.redact import REDACTED
from actors.testing import capture_events

KEY = "sk-hostile-0123456789abcdef"


def _crash(message: str = "boom") -> ActorCrashed:
    return ActorCrashed(
        actor="/a", error=ActorError.from_code(Code.TOOL_FAILED, message), restarts=0
    )


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


class _BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")

    def __call__(self, event: Event) -> None:
        raise ValueError("hook failed")


class _BrokenStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str is broken")


def test_a_hook_with_a_broken_repr_and_a_non_string_qualname_is_reported_by_type() -> None:
    stream = io.StringIO()
    configure_logging(mode="json", level="info", stream=stream)
    hook = _BrokenRepr()
    hook.__qualname__ = 42  # type: ignore[attr-defined]
    remove = add_event_hook(hook)
    try:
        emit(_crash())  # does not raise
    finally:
        remove()
    logged, failed = _lines(stream)
    assert logged["event"] == "actor.crashed"
    assert (failed["event"], failed["hook"], failed["error"]) == (
        "event_hook.failed",
        "_BrokenRepr",
        "ValueError: hook failed",
    )


def test_a_hook_raising_an_exception_whose_str_is_broken_is_reported_by_type() -> None:
    stream = io.StringIO()
    configure_logging(mode="json", level="info", stream=stream)

    def hook(event: Event) -> None:
        raise _BrokenStr

    remove = add_event_hook(hook)
    try:
        emit(_crash())
    finally:
        remove()
    failed = _lines(stream)[1]
    assert failed["error"] == "_BrokenStr: <str() raised RuntimeError>"


@dataclasses.dataclass
class _Recorder:
    seen: list[str] = dataclasses.field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.seen.append(event.name)


def test_equal_hooks_are_two_registrations_removed_by_identity() -> None:
    a, b = _Recorder(), _Recorder()
    assert a == b
    remove_a, remove_b = add_event_hook(a), add_event_hook(b)
    remove_b()
    emit(_crash())
    remove_a()
    remove_a()  # a second call does nothing
    emit(_crash())
    assert (a.seen, b.seen) == (["actor.crashed"], [])


def test_a_hook_mutating_the_error_snapshot_does_not_reach_the_log_line() -> None:
    stream = io.StringIO()
    configure_logging(mode="json", level="info", stream=stream)

    def vandal(event: Event) -> None:
        assert isinstance(event, ActorCrashed)
        event.error.message = "rewritten by a hook"

    remove = add_event_hook(vandal)
    try:
        emit(_crash("the real message"))
    finally:
        remove()
    assert _lines(stream)[0]["error"]["message"] == "the real message"


class _Sneaky(str):
    """A str subclass whose methods would hide its text from redaction."""

    def __str__(self) -> str:
        return "harmless"

    def replace(self, *args: Any) -> str:  # type: ignore[override]
        return "harmless"


def test_a_secret_in_a_str_subclass_field_is_redacted_for_hooks() -> None:
    error = ActorError.from_code(Code.TOOL_FAILED, "x", provider=_Sneaky(KEY))
    with capture_events(ActorCrashed) as events:
        emit(ActorCrashed(actor="/a", error=error, restarts=0))
    assert events[0].error.provider == REDACTED  # type: ignore[attr-defined]
    assert KEY not in repr(events[0])


@pytest.mark.parametrize("selector", [int, ActorError, 42, None, object()])
def test_capture_refuses_what_is_neither_a_name_nor_a_record_class(selector: Any) -> None:
    with pytest.raises(TypeError, match=r"^capture_events\(\) selects by event name or Event"):
        capture_events(selector)


@pytest.mark.parametrize("selector", [HookFailed, "event_hook.failed"])
def test_capture_refuses_the_record_hooks_never_get(selector: Any) -> None:
    with pytest.raises(ValueError, match=r"^event_hook.failed is never handed to hooks"):
        capture_events(selector)


def test_a_users_logger_may_use_event_names_while_hooks_are_installed() -> None:
    """Only records reach hooks: a user's log line named like a runtime event is a log
    line, whatever its fields."""
    log = get_logger("user")
    with capture_events() as events:
        log.info("supervisor.decision", child=None)
        log.info("actor.restarting", restarts="many")
        log.info("child.stopped")
    assert events == []


@pytest.mark.parametrize("thing", [None, "ref", 42, object()])
def test_cell_of_refuses_what_is_not_a_ref(thing: Any) -> None:
    with pytest.raises(TypeError, match=r"^cell_of\(\) takes an ActorRef, not "):
        cell_of(thing)


@pytest.mark.parametrize("hook", [None, 42, "hook"])
def test_a_hook_that_is_not_callable_is_refused_at_once(hook: Any) -> None:
    with pytest.raises(TypeError, match=r"^an event hook is called with each record, not "):
        add_event_hook(hook)
    with capture_events() as events:
        emit(_crash())
    assert [type(e) for e in events] == [ActorCrashed]  # nothing half-installed
