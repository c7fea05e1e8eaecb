"""The typed error: defaults from the table, families, two faces, cause chaining."""

from __future__ import annotations

import pytest

from actors import (
    CODE_TABLE,
    ActorError,
    CancelledError,
    Code,
    ErrorClass,
    InternalError,
    LimitError,
    ProviderError,
    SecurityError,
    StoreError,
    SupervisionError,
    ToolError,
    ValidationError,
)
from actors.errors import FAMILY_BY_CLASS


def test_every_code_has_a_row_and_a_family() -> None:
    assert set(CODE_TABLE) == set(Code)
    assert set(FAMILY_BY_CLASS) == set(ErrorClass)


@pytest.mark.parametrize(
    ("code", "family", "error_class", "retryable"),
    [
        (Code.RATE_LIMITED, ProviderError, ErrorClass.PROVIDER_TRANSIENT, True),
        (Code.CONTEXT_WINDOW_EXCEEDED, ProviderError, ErrorClass.PROVIDER_CAPABILITY, False),
        (Code.AUTH, ProviderError, ErrorClass.PROVIDER_FATAL, False),
        (Code.TOOL_FAILED, ToolError, ErrorClass.TOOL_TRANSIENT, True),
        (Code.TOOL_DENIED, ToolError, ErrorClass.TOOL_TERMINAL, False),
        (Code.BUDGET_EXCEEDED, LimitError, ErrorClass.LIMIT, False),
        (Code.PERMISSION_DENIED, SecurityError, ErrorClass.SECURITY, False),
        (Code.PERSISTENCE_UNAVAILABLE, StoreError, ErrorClass.STORE, True),
        (Code.CANCELLED, CancelledError, ErrorClass.CANCELLATION, False),
        (Code.RESTART_INTENSITY_EXCEEDED, SupervisionError, ErrorClass.SUPERVISION, False),
        (Code.NODE_CONFIG, ValidationError, ErrorClass.VALIDATION, False),
        (Code.INTERNAL, InternalError, ErrorClass.INTERNAL, False),
    ],
)
def test_from_code_picks_the_family_and_table_defaults(
    code: Code, family: type[ActorError], error_class: ErrorClass, retryable: bool
) -> None:
    err = ActorError.from_code(code, "detail")
    assert type(err) is family
    assert (err.error_class, err.retryable) == (error_class, retryable)
    assert err.user_message == CODE_TABLE[code].user_message


def test_overrides_and_context_are_fields_not_message() -> None:
    err = ActorError.from_code(
        Code.SANDBOX_ERROR, "wall clock", retryable=True, run_id="r", node_id="n", attempt=3
    )
    assert (err.code, err.retryable) == (Code.SANDBOX_ERROR, True)
    assert err.context() == {"run_id": "r", "node_id": "n", "attempt": 3}
    assert str(err) == "[sandbox_error] wall clock"


def test_correlation_ids_are_generated_and_distinct() -> None:
    first, second = ActorError.from_code(Code.INTERNAL), ActorError.from_code(Code.INTERNAL)
    assert first.correlation_id and second.correlation_id
    assert first.correlation_id != second.correlation_id
    given = ActorError.from_code(Code.INTERNAL, correlation_id="abc")
    assert given.correlation_id == "abc"


def test_string_codes_are_parsed_and_unknown_ones_refused() -> None:
    assert ActorError(code="timeout").code is Code.TIMEOUT  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="closed set"):
        ActorError.from_code("nope")


def test_cause_is_kept_when_raised_from() -> None:
    cause = OSError("disk")
    with pytest.raises(StoreError) as caught:
        raise ActorError.from_code(Code.PERSISTENCE_UNAVAILABLE, "write failed") from cause
    assert caught.value.__cause__ is cause
