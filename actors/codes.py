"""The closed set of error codes, their classes, and the one table that describes them.

Every failure in the runtime carries exactly one :class:`Code`. Each code belongs to one
:class:`ErrorClass` and has a default ``retryable`` flag and a default user-facing message.
Callers narrow on ``code`` (or ``error_class``), never on a message.

The table is the single source of truth: ``docs/errors.md`` is checked against it by a
test, and supervisor policies derive their default directives from the error class.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

import attrs


class ErrorClass(enum.StrEnum):
    """The family of a code; supervisors decide by class first, by code second."""

    VALIDATION = "validation"
    PROVIDER_TRANSIENT = "provider_transient"
    PROVIDER_CAPABILITY = "provider_capability"
    PROVIDER_FATAL = "provider_fatal"
    TOOL_TRANSIENT = "tool_transient"
    TOOL_TERMINAL = "tool_terminal"
    LIMIT = "limit"
    SECURITY = "security"
    STORE = "store"
    CANCELLATION = "cancellation"
    SUPERVISION = "supervision"
    INTERNAL = "internal"


class Code(enum.StrEnum):
    """Every error code the runtime produces. Closed: there is no "unknown"."""

    # validation
    VALIDATION = "validation"
    INPUT_VALIDATION = "input_validation"
    OUTPUT_VALIDATION = "output_validation"
    CONFIG_INVALID = "config_invalid"
    NODE_CONFIG = "node_config"
    UNSUPPORTED_NODE_TYPE = "unsupported_node_type"
    AGENT_NOT_FOUND = "agent_not_found"
    # provider, transient
    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"
    NETWORK = "network"
    MALFORMED_RESPONSE = "malformed_response"
    # provider, capability
    CAPABILITY_MISSING = "capability_missing"
    CONTEXT_WINDOW_EXCEEDED = "context_window_exceeded"
    # provider, fatal
    AUTH = "auth"
    PAYMENT = "payment"
    MODEL_NOT_FOUND = "model_not_found"
    BAD_REQUEST = "bad_request"
    CONTENT_FILTER = "content_filter"
    ALL_PROVIDERS_FAILED = "all_providers_failed"
    # tools, transient
    TOOL_FAILED = "tool_failed"
    TOOL_TIMEOUT = "tool_timeout"
    RESOURCE_BUSY = "resource_busy"
    MCP_GATEWAY = "mcp_gateway"
    MCP_TOOL_FAILED = "mcp_tool_failed"
    AGENT_LOAD_FAILED = "agent_load_failed"
    # tools, terminal
    TOOL_DENIED = "tool_denied"
    TOOL_NOT_FOUND = "tool_not_found"
    SANDBOX_ERROR = "sandbox_error"
    # limits
    BUDGET_EXCEEDED = "budget_exceeded"
    RUN_TIMEOUT = "run_timeout"
    TURN_LIMIT = "turn_limit"
    CIRCUIT_OPEN = "circuit_open"
    MAILBOX_FULL = "mailbox_full"
    # security
    PERMISSION_DENIED = "permission_denied"
    SUPERVISOR_ROUTING = "supervisor_routing"
    # store
    PERSISTENCE_UNAVAILABLE = "persistence_unavailable"
    EVENT_LOG_CORRUPT = "event_log_corrupt"
    LEASE_LOST = "lease_lost"
    # cancellation
    CANCELLED = "cancelled"
    # supervision and actor plumbing
    CALL_TIMEOUT = "call_timeout"
    NOT_DELIVERED = "not_delivered"
    OUTCOME_UNKNOWN = "outcome_unknown"
    ACTOR_STOPPED = "actor_stopped"
    START_FAILED = "start_failed"
    RESTART_INTENSITY_EXCEEDED = "restart_intensity_exceeded"
    CHILD_NOT_FOUND = "child_not_found"
    CHILD_RUNNING = "child_running"
    CHILD_RESTARTING = "child_restarting"
    MAX_CHILDREN = "max_children"
    NAME_TAKEN = "name_taken"
    # internal
    INTERNAL = "internal"
    EXECUTION_FAILED = "execution_failed"


@attrs.frozen
class CodeInfo:
    """What the table says about one code."""

    error_class: ErrorClass
    retryable: bool
    user_message: str


_C = ErrorClass


def _info(error_class: ErrorClass, retryable: bool, user_message: str) -> CodeInfo:
    return CodeInfo(error_class=error_class, retryable=retryable, user_message=user_message)


_TABLE: dict[Code, CodeInfo] = {
    Code.VALIDATION: _info(_C.VALIDATION, False, "The input did not pass validation."),
    Code.INPUT_VALIDATION: _info(
        _C.VALIDATION, False, "A step received input that does not match its schema."
    ),
    Code.OUTPUT_VALIDATION: _info(
        _C.VALIDATION, False, "A step produced output that does not match its schema."
    ),
    Code.CONFIG_INVALID: _info(
        _C.VALIDATION, False, "The configuration is invalid; fix the named field."
    ),
    Code.NODE_CONFIG: _info(
        _C.VALIDATION, False, "A workflow node is missing required configuration."
    ),
    Code.UNSUPPORTED_NODE_TYPE: _info(
        _C.VALIDATION, False, "The workflow uses a node type this runtime does not support."
    ),
    Code.AGENT_NOT_FOUND: _info(
        _C.VALIDATION, False, "The workflow names an agent that is not registered."
    ),
    Code.RATE_LIMITED: _info(
        _C.PROVIDER_TRANSIENT, True, "The model provider is rate-limiting requests; retrying later."
    ),
    Code.TIMEOUT: _info(_C.PROVIDER_TRANSIENT, True, "The model provider did not answer in time."),
    Code.UNAVAILABLE: _info(
        _C.PROVIDER_TRANSIENT, True, "The model provider is temporarily unavailable."
    ),
    Code.NETWORK: _info(
        _C.PROVIDER_TRANSIENT, True, "The connection to the model provider failed."
    ),
    Code.MALFORMED_RESPONSE: _info(
        _C.PROVIDER_TRANSIENT, True, "The model provider sent an answer that could not be read."
    ),
    Code.CAPABILITY_MISSING: _info(
        _C.PROVIDER_CAPABILITY,
        False,
        "The chosen model lacks a capability this request needs; choose another model.",
    ),
    Code.CONTEXT_WINDOW_EXCEEDED: _info(
        _C.PROVIDER_CAPABILITY,
        False,
        "The conversation is too long for the model's context window.",
    ),
    Code.AUTH: _info(
        _C.PROVIDER_FATAL,
        False,
        "The model provider rejected the credentials; check the API key for this provider.",
    ),
    Code.PAYMENT: _info(
        _C.PROVIDER_FATAL,
        False,
        "The model provider account has no quota or credit left; check billing.",
    ),
    Code.MODEL_NOT_FOUND: _info(
        _C.PROVIDER_FATAL, False, "The model provider does not know the requested model."
    ),
    Code.BAD_REQUEST: _info(
        _C.PROVIDER_FATAL, False, "The model provider rejected the request as malformed."
    ),
    Code.CONTENT_FILTER: _info(
        _C.PROVIDER_FATAL, False, "The model provider blocked the content under its policy."
    ),
    Code.ALL_PROVIDERS_FAILED: _info(
        _C.PROVIDER_FATAL, False, "Every configured model provider failed for this request."
    ),
    Code.TOOL_FAILED: _info(_C.TOOL_TRANSIENT, True, "A tool failed while running."),
    Code.TOOL_TIMEOUT: _info(_C.TOOL_TRANSIENT, True, "A tool did not finish in time."),
    Code.RESOURCE_BUSY: _info(
        _C.TOOL_TRANSIENT, True, "A resource a tool needs is busy; retrying later."
    ),
    Code.MCP_GATEWAY: _info(_C.TOOL_TRANSIENT, True, "The MCP gateway could not be reached."),
    Code.MCP_TOOL_FAILED: _info(_C.TOOL_TRANSIENT, True, "An MCP tool reported a failure."),
    Code.AGENT_LOAD_FAILED: _info(
        _C.TOOL_TRANSIENT, True, "An agent definition could not be loaded; retrying."
    ),
    Code.TOOL_DENIED: _info(
        _C.TOOL_TERMINAL, False, "The tool call is not permitted by the tool's grants."
    ),
    Code.TOOL_NOT_FOUND: _info(_C.TOOL_TERMINAL, False, "The requested tool does not exist."),
    Code.SANDBOX_ERROR: _info(
        _C.TOOL_TERMINAL, False, "An expression failed to evaluate in the sandbox."
    ),
    Code.BUDGET_EXCEEDED: _info(_C.LIMIT, False, "The run used up its budget."),
    Code.RUN_TIMEOUT: _info(_C.LIMIT, False, "The run exceeded its time limit."),
    Code.TURN_LIMIT: _info(_C.LIMIT, False, "The agent reached its turn limit."),
    Code.CIRCUIT_OPEN: _info(
        _C.LIMIT, True, "The provider is paused after repeated failures; retrying later."
    ),
    Code.MAILBOX_FULL: _info(_C.LIMIT, True, "The component is overloaded; retrying later."),
    Code.PERMISSION_DENIED: _info(
        _C.SECURITY, False, "An agent attempted an action it is not permitted to take."
    ),
    Code.SUPERVISOR_ROUTING: _info(
        _C.SECURITY, False, "A supervisor routed work to a node it does not manage."
    ),
    Code.PERSISTENCE_UNAVAILABLE: _info(
        _C.STORE, True, "The run journal cannot be written right now."
    ),
    Code.EVENT_LOG_CORRUPT: _info(
        _C.STORE, False, "The run's event log is damaged and cannot be replayed."
    ),
    Code.LEASE_LOST: _info(_C.STORE, False, "Another daemon took this run over; it goes on there."),
    Code.CANCELLED: _info(_C.CANCELLATION, False, "The work was cancelled."),
    Code.CALL_TIMEOUT: _info(
        _C.SUPERVISION, False, "An internal component did not answer in time."
    ),
    Code.NOT_DELIVERED: _info(
        _C.SUPERVISION, True, "The request was not delivered; it is safe to retry."
    ),
    Code.OUTCOME_UNKNOWN: _info(
        _C.SUPERVISION, False, "An internal component stopped while handling the request."
    ),
    Code.ACTOR_STOPPED: _info(_C.SUPERVISION, False, "An internal component is stopped."),
    Code.START_FAILED: _info(_C.SUPERVISION, False, "An internal component failed to start."),
    Code.RESTART_INTENSITY_EXCEEDED: _info(
        _C.SUPERVISION, False, "A component kept failing and was shut down."
    ),
    Code.CHILD_NOT_FOUND: _info(_C.SUPERVISION, False, "No such supervised component."),
    Code.CHILD_RUNNING: _info(_C.SUPERVISION, False, "The supervised component is running."),
    Code.CHILD_RESTARTING: _info(_C.SUPERVISION, False, "The supervised component is restarting."),
    Code.MAX_CHILDREN: _info(
        _C.SUPERVISION, False, "The supervisor has reached its maximum number of components."
    ),
    Code.NAME_TAKEN: _info(_C.SUPERVISION, False, "A component with this name is already running."),
    Code.INTERNAL: _info(
        _C.INTERNAL, False, "An internal error occurred; quote the correlation id to support."
    ),
    Code.EXECUTION_FAILED: _info(
        _C.INTERNAL, False, "A step failed unexpectedly; quote the correlation id to support."
    ),
}

#: Read-only view of the code table. Every :class:`Code` has exactly one row.
CODE_TABLE: Mapping[Code, CodeInfo] = MappingProxyType(_TABLE)

_missing = set(Code) - set(_TABLE)
if _missing:  # pragma: no cover - guarded by tests; fails at import if the table drifts
    raise RuntimeError(f"codes without a table row: {sorted(_missing)}")


def info(code: Code) -> CodeInfo:
    """Return the table row for ``code``."""
    return _TABLE[code]


def parse_code(value: str | Code) -> Code:
    """Turn a string into a :class:`Code`; raise ``ValueError`` naming it if unknown."""
    try:
        return Code(value)
    except ValueError:
        raise ValueError(f"unknown error code {value!r}; codes are a closed set") from None
