"""Directives: what a supervisor does after a failure, by error class and code.

Adapters classify; supervisors decide. This module holds the default decision for every
error class (with per-code exceptions), following the seeds:

* provider transient and tool transient → ``restart`` (with backoff, honouring
  ``retry_after``);
* validation, provider capability, tool terminal and limits → ``stop``: fatal, never
  retried (a denied tool call re-denies, a budget stays exceeded);
* provider fatal (auth, payment, model_not_found, content_filter, …), security,
  supervision failures and ``internal`` → ``escalate`` to the parent;
* store → ``restart`` (the journal's retry schedule), but a corrupt event log escalates;
* cancellation has **no** directive: a cancelled subtree runs no policy at all.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from actors.errors import Code, ErrorClass, info


class Directive(enum.StrEnum):
    """A supervisor's answer to a failure, from mildest to most severe."""

    RESUME = "resume"
    RESTART = "restart"
    STOP = "stop"
    ESCALATE = "escalate"
    ABORT = "abort"


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
    }
)


def default_directive(code: Code) -> Directive | None:
    """The default directive for ``code``; ``None`` for cancellation (no policy runs)."""
    by_code = DEFAULT_BY_CODE.get(code)
    if by_code is not None:
        return by_code
    return DEFAULT_BY_CLASS[info(code).error_class]
