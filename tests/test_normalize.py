"""normalize(): returned failures, raised errors, foreign exceptions and groups -> one error."""

from __future__ import annotations

import httpx
import pytest
import trio
from trio.testing import MockClock

from actors import (
    ActorError,
    CancelledError,
    Code,
    Failure,
    ToolError,
    Usage,
    fail,
    normalize,
)


def test_failure_with_omitted_retryable_becomes_not_retryable() -> None:
    failure = fail(Code.TOOL_FAILED, "disk busy")
    assert isinstance(failure, Failure)
    assert failure.tag == "failure"
    assert failure.retryable is None
    err = normalize(failure)
    assert isinstance(err, ToolError)
    assert (err.code, err.retryable, err.message) == (Code.TOOL_FAILED, False, "disk busy")


def test_failure_keeps_an_explicit_retryable_cause_and_context() -> None:
    cause = OSError("EBUSY")
    usage = Usage(input_tokens=10, output_tokens=2)
    failure = fail(
        "rate_limited",
        "slow",
        retryable=True,
        cause=cause,
        run_id="r1",
        retry_after=3.0,
        usage=usage,
    )
    err = normalize(failure)
    assert (err.code, err.retryable, err.run_id, err.retry_after) == (
        Code.RATE_LIMITED,
        True,
        "r1",
        3.0,
    )
    assert err.usage == usage
    assert err.__cause__ is cause


def test_fail_rejects_unknown_codes_and_context_names() -> None:
    with pytest.raises(ValueError, match="closed set"):
        fail("my_domain_code", "x")
    with pytest.raises(TypeError, match="colour"):
        fail(Code.TOOL_FAILED, "x", colour="red")


def test_a_raised_actor_error_is_itself() -> None:
    err = ActorError.from_code(Code.AUTH, "revoked")
    assert normalize(err) is err


def test_thrown_value_error_becomes_internal_with_cause() -> None:
    exc = ValueError("bad thing")
    err = normalize(exc)
    assert (err.code, err.retryable) == (Code.INTERNAL, False)
    assert err.__cause__ is exc
    assert "ValueError" in err.message


def test_thrown_value_error_in_a_step_becomes_execution_failed() -> None:
    exc = ValueError("bad thing")
    err = normalize(exc, step=True)
    assert (err.code, err.retryable) == (Code.EXECUTION_FAILED, False)
    assert err.__cause__ is exc


def test_thrown_httpx_error_keeps_its_meaning() -> None:
    err = normalize(httpx.ConnectError("refused"), step=True)
    assert (err.code, err.retryable) == (Code.NETWORK, True)


def test_group_fatal_wins_over_retryable_and_keeps_both() -> None:
    limited = ActorError.from_code(Code.RATE_LIMITED, "429")
    auth = ActorError.from_code(Code.AUTH, "401")
    group = ExceptionGroup("two", [limited, auth])
    err = normalize(group)
    assert err.code is Code.AUTH
    assert err.correlation_id == auth.correlation_id
    assert err.errors == (limited, auth)
    assert err.__cause__ is group


def test_group_of_retryables_gives_the_first() -> None:
    first = ActorError.from_code(Code.UNAVAILABLE, "503")
    second = ActorError.from_code(Code.RATE_LIMITED, "429")
    err = normalize(ExceptionGroup("two", [first, second]))
    assert err.code is Code.UNAVAILABLE
    assert [m.code for m in err.errors] == [Code.UNAVAILABLE, Code.RATE_LIMITED]


def test_nested_groups_are_flattened_in_order() -> None:
    inner = ExceptionGroup("inner", [ValueError("v"), ActorError.from_code(Code.TOOL_FAILED)])
    group = ExceptionGroup("outer", [ActorError.from_code(Code.TIMEOUT), inner])
    err = normalize(group)
    assert [m.code for m in err.errors] == [Code.TIMEOUT, Code.INTERNAL, Code.TOOL_FAILED]
    assert err.code is Code.INTERNAL


async def test_group_containing_a_cancellation_is_cancelled(autojump_clock: MockClock) -> None:
    auth = ActorError.from_code(Code.AUTH, "401")
    caught: BaseExceptionGroup[BaseException] | None = None
    with trio.CancelScope() as scope:
        scope.cancel(reason="run cancelled by user")
        try:
            await trio.sleep(1)
        except trio.Cancelled as cancelled:
            caught = BaseExceptionGroup("mixed", [auth, ValueError("x"), cancelled])
            raise
    assert caught is not None
    err = normalize(caught)
    assert isinstance(err, CancelledError)
    assert (err.code, err.retryable) == (Code.CANCELLED, False)
    assert err.message == "run cancelled by user"
    assert [m.code for m in err.errors] == [Code.AUTH, Code.INTERNAL, Code.CANCELLED]


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(1)], ids=["kbint", "exit"])
def test_interpreter_exits_are_never_normalized(exc: BaseException) -> None:
    with pytest.raises(TypeError):
        normalize(exc)
    with pytest.raises(TypeError):
        normalize(BaseExceptionGroup("g", [ValueError("v"), exc]))
