"""Directives: what a supervisor does after a failure, by error class and code.

Adapters classify; supervisors decide. This module holds the default decision for every
error class (with per-code exceptions):

* provider transient and tool transient → ``restart`` (with backoff, honouring
  ``retry_after``);
* validation, provider capability, tool terminal and limits → ``stop``: fatal, never
  retried (a denied tool call re-denies, a budget stays exceeded);
* provider fatal (auth, payment, model_not_found, content_filter, …), security,
  supervision failures and ``internal`` → ``escalate`` to the parent;
* store → ``restart`` (the journal's retry schedule), but a corrupt event log escalates;
* cancellation has **no** directive: a cancelled subtree runs no policy at all.

A :class:`Policy` overrides the defaults. Lookup for an error, first match wins:

1. ``by_exception`` — for a foreign exception (the ``__cause__`` of an ``internal`` or
   ``execution_failed`` error), its type's MRO is walked: the **most specific** mapped type
   wins, whatever the declaration order;
2. ``by_code``;
3. ``by_class``;
4. the defaults below (``DEFAULT_BY_CODE``, then ``DEFAULT_BY_CLASS``).

An error standing for a group (``errors`` non-empty) gets the most severe directive of its
members: ``abort > escalate > stop > restart > resume``. A policy keyed on cancellation
(the ``cancelled`` code, the ``cancellation`` class, ``trio.Cancelled``) or on
``KeyboardInterrupt`` / ``SystemExit`` is rejected at construction: those are never
decided by policy.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import attrs
import trio

from actors import CODE_TABLE, ActorError, Code, ErrorClass


class Directive(enum.StrEnum):
    """A supervisor's answer to a failure, from mildest to most severe."""

    RESUME = "resume"
    RESTART = "restart"
    STOP = "stop"
    ESCALATE = "escalate"
    ABORT = "abort"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]


_SEVERITY: Final = {
    Directive.RESUME: 0,
    Directive.RESTART: 1,
    Directive.STOP: 2,
    Directive.ESCALATE: 3,
    Directive.ABORT: 4,
}


DEFAULT_BY_CLASS: Final[Mapping[ErrorClass, Directive | None]] = MappingProxyType(
    {
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
)

DEFAULT_BY_CODE: Final[Mapping[Code, Directive]] = MappingProxyType(
    {
        # Local back-pressure and breaker refusals pass: restart after their retry_after.
        Code.CIRCUIT_OPEN: Directive.RESTART,
        Code.MAILBOX_FULL: Directive.RESTART,
        # A dependency that timed out or was not reached is transient for the caller.
        Code.CALL_TIMEOUT: Directive.RESTART,
        Code.NOT_DELIVERED: Directive.RESTART,
        Code.EVENT_LOG_CORRUPT: Directive.ESCALATE,
        # Another daemon owns the run now: doing it again here is what must not happen.
        Code.LEASE_LOST: Directive.STOP,
        # A child supervisor that gave up is restarted by its parent (within the parent's
        # own intensity), unlike OTP's `shutdown` exit which a transient child would keep.
        Code.RESTART_INTENSITY_EXCEEDED: Directive.RESTART,
    }
)


def default_directive(code: Code) -> Directive | None:
    """The default directive for ``code``; ``None`` for cancellation (no policy runs)."""
    by_code = DEFAULT_BY_CODE.get(code)
    if by_code is not None:
        return by_code
    return DEFAULT_BY_CLASS[CODE_TABLE[code].error_class]


_NEVER_BY_POLICY: Final = (trio.Cancelled, KeyboardInterrupt, SystemExit)


def _check_codes(_: object, __: object, value: Mapping[Code, Directive]) -> None:
    if Code.CANCELLED in value:
        raise ValueError("a policy cannot decide 'cancelled': cancellation runs no policy")


def _check_classes(_: object, __: object, value: Mapping[ErrorClass, Directive]) -> None:
    if ErrorClass.CANCELLATION in value:
        raise ValueError("a policy cannot decide the 'cancellation' class")


def _check_exceptions(
    _: object, __: object, value: Mapping[type[BaseException], Directive]
) -> None:
    for key in value:
        if not isinstance(key, type) or not issubclass(key, BaseException):
            raise TypeError(f"by_exception keys must be exception types, got {key!r}")
        if issubclass(key, _NEVER_BY_POLICY):
            raise ValueError(f"a policy cannot decide {key.__name__}: it always propagates")


def _frozen_codes(value: Mapping[str, str] | Mapping[Code, Directive]) -> Mapping[Code, Directive]:
    return MappingProxyType({Code(k): Directive(v) for k, v in value.items()})


def _frozen_classes(
    value: Mapping[str, str] | Mapping[ErrorClass, Directive],
) -> Mapping[ErrorClass, Directive]:
    return MappingProxyType({ErrorClass(k): Directive(v) for k, v in value.items()})


def _frozen_exceptions(
    value: Mapping[type[BaseException], Directive | str],
) -> Mapping[type[BaseException], Directive]:
    return MappingProxyType({k: Directive(v) for k, v in value.items()})


@attrs.frozen(kw_only=True)
class Policy:
    """Directive overrides by exception type, code and class (see the module docstring)."""

    by_code: Mapping[Code, Directive] = attrs.field(
        factory=dict, converter=_frozen_codes, validator=_check_codes
    )
    by_class: Mapping[ErrorClass, Directive] = attrs.field(
        factory=dict, converter=_frozen_classes, validator=_check_classes
    )
    by_exception: Mapping[type[BaseException], Directive] = attrs.field(
        factory=dict, converter=_frozen_exceptions, validator=_check_exceptions
    )

    def lookup(self, error: ActorError) -> Directive | None:
        """This policy's directive for ``error``, or ``None`` when it has no opinion."""
        cause = error.__cause__
        if self.by_exception and cause is not None and not isinstance(cause, ActorError):
            for klass in type(cause).__mro__:
                directive = self.by_exception.get(klass)
                if directive is not None:
                    return directive
        directive = self.by_code.get(error.code)
        if directive is not None:
            return directive
        return self.by_class.get(error.error_class)


def directive_for(error: ActorError, *policies: Policy | None) -> Directive | None:
    """The directive for ``error``: the first policy with an opinion, else the defaults.

    ``None`` only for a cancellation, which no policy decides. A group error gets its
    most severe member's directive.
    """
    if error.code is Code.CANCELLED:
        return None
    if error.errors:
        found = [directive_for(member, *policies) for member in error.errors]
        directives = [d for d in found if d is not None]
        if not directives:
            return None
        return max(directives, key=lambda d: d.severity)
    for policy in policies:
        if policy is not None:
            directive = policy.lookup(error)
            if directive is not None:
                return directive
    return default_directive(error.code)


decide = directive_for
"""Deprecated alias of :func:`directive_for` (its name before 0.3); removed in 1.0."""


def _every_class(directive: Directive) -> dict[ErrorClass, Directive]:
    return {c: directive for c in ErrorClass if c is not ErrorClass.CANCELLATION}


#: Restart on a crash of any class: for workers that are an isolation boundary (tool
#: hosts, node runners) — a bug in what they run (``internal``) must not escalate and
#: take the tree down. Their supervisor's intensity still bounds one that keeps crashing.
RESTART_ON_ANY_CRASH: Final = Policy(by_class=_every_class(Directive.RESTART))
#: Stop a failed child, whatever its class, and decide nothing more: for a supervisor of
#: temporary children that end alone (a run's supervisor that gave up ends that run only).
STOP_ON_ANY_CRASH: Final = Policy(
    by_class=_every_class(Directive.STOP),
    by_code={Code.RESTART_INTENSITY_EXCEEDED: Directive.STOP},
)
