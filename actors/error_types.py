"""The typed error, its families, and failures as values.

:class:`ActorError` is the one exception type the runtime raises and reports. Its
``code`` decides everything; ``error_class`` and ``retryable`` default from the code
table (:mod:`actors.codes`) and may be overridden per instance (for example a
``sandbox_error`` from a wall-clock trip is retryable, or ``x-should-retry: false`` on a
503). Context goes in fields, never in the message.

Two faces: ``message`` is internal detail for logs (redacted of secrets at
construction), ``user_message`` is safe to show a person; ``correlation_id`` joins them.

Build errors with :meth:`ActorError.from_code`, which picks the family subclass
(:class:`ProviderError`, :class:`ToolError`, …) so callers may narrow with ``except``.
"""

from __future__ import annotations

import itertools
import math
import sys
import uuid
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal

import attrs

from actors.codes import Code, ErrorClass, info, parse_code
from actors.redact import redact_text
from actors.usage import Usage

_ID_PREFIX = uuid.uuid4().hex[:16]
_id_counter = itertools.count(1)


def new_correlation_id() -> str:
    """A fresh, secret-free id joining a user-facing message to the internal log.

    A random per-process prefix and a counter: unique across processes in practice,
    without a system call per error.
    """
    return f"{_ID_PREFIX}{next(_id_counter):08x}"


def _error_class(self: ActorError) -> ErrorClass:
    return info(self.code).error_class


def _retryable(self: ActorError) -> bool:
    return info(self.code).retryable


def _seconds_hint(value: object) -> float | None:
    if value is None:
        return None
    if type(value) is float:  # the common case, at once: NaN and negatives compare false
        return value if value >= 0 else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value < 0:  # NaN, negative
        return None
    return float(value) if value < _FLOAT_MAX else math.inf


_FLOAT_MAX = sys.float_info.max


def _user_message(self: ActorError) -> str:
    return info(self.code).user_message


@attrs.define(kw_only=True, eq=False)
class ActorError(Exception):
    """A classified failure. Narrow on ``code``; read context from fields.

    ``partial_text`` is what a failed stream had already delivered (model output: kept on
    the error for the caller, never written to logs or events).

    ``delivered`` says what is safe to retry after an actor call failed: ``False`` — the
    request never started (safe to retry); ``True`` — it started and its outcome is
    unknown; ``None`` — not an actor-call failure.

    ``errors`` holds the members when this error stands for several (an exception group
    reduced by :func:`actors.errors.normalize`); the cause chain (``__cause__``) keeps
    the original exception.
    """

    code: Code = attrs.field(converter=parse_code)
    message: str = attrs.field(default="", converter=redact_text)
    error_class: ErrorClass = attrs.field(
        default=attrs.Factory(_error_class, takes_self=True), converter=ErrorClass
    )
    retryable: bool = attrs.field(default=attrs.Factory(_retryable, takes_self=True))
    user_message: str = attrs.field(default=attrs.Factory(_user_message, takes_self=True))
    run_id: str | None = None
    node_id: str | None = None
    actor: str | None = None
    provider: str | None = None
    model: str | None = None
    #: The tool a tool error is about (its registered name).
    tool: str | None = None
    attempt: int | None = None
    correlation_id: str = attrs.field(factory=new_correlation_id)
    #: Seconds before a retry may help (``inf``: not before something changes). Set from
    #: anywhere — a header, a tool's own error — so it is read as a number: anything
    #: that is not one >= 0 (NaN, negative, a string) becomes ``None`` (no hint, the
    #: retry schedule applies) instead of failing the code that reads it.
    retry_after: float | None = attrs.field(default=None, converter=_seconds_hint)
    usage: Usage | None = None
    http_status: int | None = None
    delivered: bool | None = None
    partial_text: str | None = attrs.field(default=None, repr=False)
    errors: tuple[ActorError, ...] = ()

    #: Field names that may be passed as context to :func:`fail` and ``from_code``.
    CONTEXT_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {
            "run_id",
            "node_id",
            "actor",
            "provider",
            "model",
            "tool",
            "attempt",
            "correlation_id",
            "retry_after",
            "usage",
            "http_status",
            "delivered",
            "partial_text",
            "user_message",
            "error_class",
            "errors",
        }
    )

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}" if self.message else f"[{self.code}]"

    @classmethod
    def from_code(
        cls,
        code: Code | str,
        message: str = "",
        *,
        cause: BaseException | None = None,
        **fields: Any,
    ) -> ActorError:
        """Build the family subclass for ``code``, with ``cause`` chained as ``__cause__``."""
        parsed = parse_code(code)
        family = FAMILY_BY_CLASS[info(parsed).error_class]
        err = family(code=parsed, message=message, **fields)
        if cause is not None:
            err.__cause__ = cause
        return err

    def context(self) -> dict[str, Any]:
        """The context fields that are set (for logs and events)."""
        pairs = {
            "run_id": self.run_id,
            "node_id": self.node_id,
            "actor": self.actor,
            "provider": self.provider,
            "model": self.model,
            "tool": self.tool,
            "attempt": self.attempt,
            "http_status": self.http_status,
            "retry_after": self.retry_after,
            "delivered": self.delivered,
        }
        return {k: v for k, v in pairs.items() if v is not None}


@attrs.define(kw_only=True, eq=False)
class ValidationError(ActorError):
    """Bad input or configuration: fatal within the run, fix and start again."""


@attrs.define(kw_only=True, eq=False)
class ProviderError(ActorError):
    """A model provider failed: transient, capability or fatal (see ``error_class``)."""


@attrs.define(kw_only=True, eq=False)
class ToolError(ActorError):
    """A tool failed (``tool_failed``, retryable) or was refused (``tool_denied``, fatal)."""


@attrs.define(kw_only=True, eq=False)
class LimitError(ActorError):
    """A budget, time, turn, breaker or mailbox limit was reached."""


@attrs.define(kw_only=True, eq=False)
class SecurityError(ActorError):
    """A security boundary was crossed; never retried."""


@attrs.define(kw_only=True, eq=False)
class StoreError(ActorError):
    """The journal or state store failed."""


@attrs.define(kw_only=True, eq=False)
class CancelledError(ActorError):
    """The work was cancelled; carries the cancel reason in ``message``.

    Not an exception that cancels anything: it *reports* a cancellation after trio's own
    ``Cancelled`` has done its work.
    """


@attrs.define(kw_only=True, eq=False)
class SupervisionError(ActorError):
    """Actor plumbing and supervision: timeouts, delivery, restart intensity."""


@attrs.define(kw_only=True, eq=False)
class InternalError(ActorError):
    """A bug or an unplaced failure: loud, not retryable by default."""


FAMILY_BY_CLASS: Final[Mapping[ErrorClass, type[ActorError]]] = {
    ErrorClass.VALIDATION: ValidationError,
    ErrorClass.PROVIDER_TRANSIENT: ProviderError,
    ErrorClass.PROVIDER_CAPABILITY: ProviderError,
    ErrorClass.PROVIDER_FATAL: ProviderError,
    ErrorClass.TOOL_TRANSIENT: ToolError,
    ErrorClass.TOOL_TERMINAL: ToolError,
    ErrorClass.LIMIT: LimitError,
    ErrorClass.SECURITY: SecurityError,
    ErrorClass.STORE: StoreError,
    ErrorClass.CANCELLATION: CancelledError,
    ErrorClass.SUPERVISION: SupervisionError,
    ErrorClass.INTERNAL: InternalError,
}


@attrs.frozen(kw_only=True)
class Failure:
    """A failure returned as a value (errors are values).

    Build it with :func:`fail`. ``retryable=None`` means "not said"; normalization turns
    it into ``False`` — a step must opt in to being retried.
    """

    tag: Literal["failure"] = "failure"
    code: Code = attrs.field(converter=parse_code)
    message: str = ""
    retryable: bool | None = None
    cause: BaseException | None = None
    context: Mapping[str, Any] = attrs.field(factory=dict)

    def to_error(self) -> ActorError:
        """The :class:`ActorError` this failure stands for."""
        return ActorError.from_code(
            self.code,
            self.message,
            cause=self.cause,
            retryable=bool(self.retryable),
            **self.context,
        )


def fail(
    code: Code | str,
    message: str = "",
    *,
    retryable: bool | None = None,
    cause: BaseException | None = None,
    **context: Any,
) -> Failure:
    """Return a :class:`Failure` for a step to ``return`` instead of raising.

    ``context`` takes the :class:`ActorError` context fields (``run_id``, ``provider``,
    ``retry_after``, ``usage``, …); an unknown name raises ``TypeError`` at once, and an
    unknown code raises ``ValueError`` — codes are a closed set.
    """
    unknown = set(context) - ActorError.CONTEXT_FIELDS
    if unknown:
        raise TypeError(f"fail() got unknown context field(s): {sorted(unknown)}")
    return Failure(code=code, message=message, retryable=retryable, cause=cause, context=context)
