"""Pins of supervisors.tree.policy: every default row, the severity order, the lookup edges.

Each test fails if one table entry, one default or one validation message changes
(``make mutate MODULE=supervisors/tree/policy.py`` measures how well they do).
"""

from __future__ import annotations

from typing import Any

import pytest

from actors import CODE_TABLE, ActorError, Code, ErrorClass, normalize
from supervisors import (
    DEFAULT_BY_CLASS,
    DEFAULT_BY_CODE,
    Directive,
    Policy,
    default_directive,
    directive_for,
)


def err(code: Code, **fields: Any) -> ActorError:
    return ActorError.from_code(code, "pinned", **fields)


def group(*members: ActorError) -> ActorError:
    return normalize(ExceptionGroup("members", list(members)))


def test_directives_from_mildest_to_most_severe() -> None:
    assert [(d.value, d.severity) for d in Directive] == [
        ("resume", 0),
        ("restart", 1),
        ("stop", 2),
        ("escalate", 3),
        ("abort", 4),
    ]


def test_default_by_class_table() -> None:
    assert dict(DEFAULT_BY_CLASS) == {
        ErrorClass.VALIDATION: Directive.STOP,
        ErrorClass.PROVIDER_TRANSIENT: Directive.RESTART,
        ErrorClass.PROVIDER_CAPABILITY: Directive.STOP,
        ErrorClass.PROVIDER_FATAL: Directive.ESCALATE,
        ErrorClass.TOOL_TRANSIENT: Directive.RESTART,
        ErrorClass.TOOL_TERMINAL: Directive.STOP,
        ErrorClass.LIMIT: Directive.STOP,
        ErrorClass.SECURITY: Directive.ESCALATE,
        ErrorClass.STORE: Directive.RESTART,
        ErrorClass.CANCELLATION: None,
        ErrorClass.SUPERVISION: Directive.ESCALATE,
        ErrorClass.INTERNAL: Directive.ESCALATE,
    }
    assert set(DEFAULT_BY_CLASS) == set(ErrorClass)  # every class has a row


def test_default_by_code_table() -> None:
    assert dict(DEFAULT_BY_CODE) == {
        Code.CIRCUIT_OPEN: Directive.RESTART,
        Code.MAILBOX_FULL: Directive.RESTART,
        Code.CALL_TIMEOUT: Directive.RESTART,
        Code.NOT_DELIVERED: Directive.RESTART,
        Code.EVENT_LOG_CORRUPT: Directive.ESCALATE,
        Code.LEASE_LOST: Directive.STOP,
        Code.RESTART_INTENSITY_EXCEEDED: Directive.RESTART,
    }


@pytest.mark.parametrize(
    ("code", "by_class", "by_code"),
    [
        (Code.CIRCUIT_OPEN, Directive.STOP, Directive.RESTART),
        (Code.MAILBOX_FULL, Directive.STOP, Directive.RESTART),
        (Code.CALL_TIMEOUT, Directive.ESCALATE, Directive.RESTART),
        (Code.NOT_DELIVERED, Directive.ESCALATE, Directive.RESTART),
        (Code.EVENT_LOG_CORRUPT, Directive.RESTART, Directive.ESCALATE),
        (Code.RESTART_INTENSITY_EXCEEDED, Directive.ESCALATE, Directive.RESTART),
    ],
)
def test_a_code_row_overrides_its_class_row(
    code: Code, by_class: Directive, by_code: Directive
) -> None:
    assert DEFAULT_BY_CLASS[CODE_TABLE[code].error_class] is by_class
    assert default_directive(code) is by_code
    assert directive_for(err(code)) is by_code


@pytest.mark.parametrize(
    ("code", "directive"),
    [
        (Code.CONFIG_INVALID, Directive.STOP),
        (Code.NETWORK, Directive.RESTART),
        (Code.CAPABILITY_MISSING, Directive.STOP),
        (Code.BAD_REQUEST, Directive.ESCALATE),
        (Code.RESOURCE_BUSY, Directive.RESTART),
        (Code.SANDBOX_ERROR, Directive.STOP),
        (Code.TURN_LIMIT, Directive.STOP),
        (Code.PERMISSION_DENIED, Directive.ESCALATE),
        (Code.PERSISTENCE_UNAVAILABLE, Directive.RESTART),
        (Code.CANCELLED, None),
        (Code.START_FAILED, Directive.ESCALATE),
        (Code.EXECUTION_FAILED, Directive.ESCALATE),
    ],
)
def test_codes_without_a_row_take_their_class_default(
    code: Code, directive: Directive | None
) -> None:
    assert default_directive(code) is directive


def test_a_policy_keyed_on_cancelled_is_refused_with_its_reason() -> None:
    with pytest.raises(
        ValueError, match=r"^a policy cannot decide 'cancelled': cancellation runs no policy$"
    ):
        Policy(by_code={Code.CANCELLED: Directive.RESTART})
    with pytest.raises(ValueError, match=r"^a policy cannot decide the 'cancellation' class$"):
        Policy(by_class={ErrorClass.CANCELLATION: Directive.STOP})
    with pytest.raises(
        ValueError, match=r"^a policy cannot decide KeyboardInterrupt: it always propagates$"
    ):
        Policy(by_exception={KeyboardInterrupt: Directive.STOP})


@pytest.mark.parametrize(("key", "shown"), [(int, "<class 'int'>"), ("ValueError", "'ValueError'")])
def test_by_exception_keys_must_be_exception_types(key: object, shown: str) -> None:
    with pytest.raises(
        TypeError, match=rf"^by_exception keys must be exception types, got {shown}$"
    ):
        Policy(by_exception={key: Directive.STOP})  # type: ignore[dict-item]


def test_policy_tables_accept_plain_strings() -> None:
    policy = Policy(
        by_code={"tool_failed": "resume"},
        by_class={"limit": "abort"},
        by_exception={KeyError: "stop"},
    )
    assert dict(policy.by_code) == {Code.TOOL_FAILED: Directive.RESUME}
    assert dict(policy.by_class) == {ErrorClass.LIMIT: Directive.ABORT}
    assert dict(policy.by_exception) == {KeyError: Directive.STOP}


def test_by_exception_ignores_a_cause_that_is_an_actor_error() -> None:
    policy = Policy(by_exception={Exception: Directive.ABORT})
    chained = err(Code.TOOL_FAILED, cause=err(Code.TIMEOUT))
    assert isinstance(chained.__cause__, ActorError)
    assert policy.lookup(chained) is None
    assert directive_for(chained, policy) is Directive.RESTART
    # the same rule does apply to a foreign cause, and not to an error without one
    assert directive_for(err(Code.TOOL_FAILED, cause=KeyError("k")), policy) is Directive.ABORT
    assert directive_for(err(Code.TOOL_FAILED), policy) is Directive.RESTART


def test_by_exception_without_a_match_falls_through_to_code_then_class() -> None:
    policy = Policy(
        by_exception={KeyError: Directive.ABORT},
        by_code={Code.INTERNAL: Directive.RESUME},
        by_class={ErrorClass.INTERNAL: Directive.STOP},
    )
    assert directive_for(normalize(ValueError("v")), policy) is Directive.RESUME
    assert directive_for(err(Code.EXECUTION_FAILED), policy) is Directive.STOP


def test_by_class_follows_the_errors_own_class() -> None:
    policy = Policy(by_class={ErrorClass.LIMIT: Directive.RESUME})
    relabelled = err(Code.TOOL_FAILED, error_class=ErrorClass.LIMIT)
    assert policy.lookup(relabelled) is Directive.RESUME
    assert policy.lookup(err(Code.TOOL_FAILED)) is None


def test_a_group_mixing_resume_and_escalate_escalates() -> None:
    resume = Policy(by_code={Code.TOOL_FAILED: Directive.RESUME})
    assert directive_for(group(err(Code.TOOL_FAILED), err(Code.AUTH)), resume) is (
        Directive.ESCALATE
    )
    assert directive_for(group(err(Code.AUTH), err(Code.TOOL_FAILED)), resume) is (
        Directive.ESCALATE
    )
    assert directive_for(group(err(Code.TOOL_FAILED), err(Code.TOOL_TIMEOUT)), resume) is (
        Directive.RESTART
    )


def test_a_group_holding_a_cancellation_has_no_directive() -> None:
    resume = Policy(by_code={Code.TOOL_FAILED: Directive.RESUME})
    mixed = group(err(Code.CANCELLED), err(Code.TOOL_FAILED))
    assert mixed.code is Code.CANCELLED
    assert directive_for(mixed, resume) is None


def test_a_group_whose_members_have_no_directive_has_none() -> None:
    cancelled = err(Code.INTERNAL, errors=(err(Code.CANCELLED), err(Code.CANCELLED)))
    assert directive_for(cancelled) is None
    partly = err(Code.INTERNAL, errors=(err(Code.CANCELLED), err(Code.TOOL_DENIED)))
    assert directive_for(partly) is Directive.STOP


def test_the_first_policy_with_an_opinion_wins_and_none_is_skipped() -> None:
    child = Policy(by_code={Code.AUTH: Directive.STOP})
    parent = Policy(by_code={Code.AUTH: Directive.ABORT, Code.TOOL_FAILED: Directive.RESUME})
    assert directive_for(err(Code.AUTH), None, child, parent) is Directive.STOP
    assert directive_for(err(Code.TOOL_FAILED), None, child, parent) is Directive.RESUME
    assert directive_for(err(Code.TIMEOUT), None, child, parent) is Directive.RESTART
