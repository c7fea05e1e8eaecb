"""resilient-actors: the runtime — typed errors, actors, observation.

Everything a user needs is re-exported here; submodules not listed may change. What a
supervisor uses to drive actor slots is in :mod:`actors.lowlevel`.
"""

from actors.actor import Actor, ActorRef, Receipt
from actors.deadletters import DeadLetter, DeadLetters
from actors.errors import (
    CODE_TABLE,
    ActorError,
    CancelledError,
    Code,
    CodeInfo,
    ErrorClass,
    Failure,
    InternalError,
    LimitError,
    ProviderError,
    SecurityError,
    StoreError,
    SupervisionError,
    ToolError,
    ValidationError,
    classify,
    fail,
    normalize,
    retry_after_from,
)
from actors.events import Event, EventHook
from actors.metrics import Metrics, serve_metrics
from actors.observe import add_event_hook, bind_context, configure_logging, get_logger
from actors.redact import redact_text, register_secret
from actors.runtime import Runtime, open_runtime
from actors.tracing import Tracing
from actors.usage import Usage

__all__ = [
    "CODE_TABLE",
    "Actor",
    "ActorError",
    "ActorRef",
    "CancelledError",
    "Code",
    "CodeInfo",
    "DeadLetter",
    "DeadLetters",
    "ErrorClass",
    "Event",
    "EventHook",
    "Failure",
    "InternalError",
    "LimitError",
    "Metrics",
    "ProviderError",
    "Receipt",
    "Runtime",
    "SecurityError",
    "StoreError",
    "SupervisionError",
    "ToolError",
    "Tracing",
    "Usage",
    "ValidationError",
    "add_event_hook",
    "bind_context",
    "classify",
    "configure_logging",
    "fail",
    "get_logger",
    "normalize",
    "open_runtime",
    "redact_text",
    "register_secret",
    "retry_after_from",
    "serve_metrics",
]
