"""Typed event records: what the runtime reports, one frozen class per event name.

Every event the runtime emits is an :class:`Event` record: ``name`` (the event name in
the log, e.g. ``"actor.crashed"``) and ``level`` are class constants, the facts are
typed fields (an error is an :class:`~actors.ActorError`, counts are ``int``, times and
delays ``float``). :func:`actors.observe.emit` hands each record to every hook
(:func:`actors.observe.add_event_hook`, whatever the log level), then logs it through
structlog — the default sink — if the configured level lets it through.

What a hook gets is safe to hand anywhere: :meth:`Event.redacted`, made once per emit
when a hook is installed, redacts text and snapshots errors (see :func:`safe_error`).

Families (docs/events.md lists every record with its fields):

* actor lifecycle — :class:`ActorStarted`, :class:`ActorStartFailed`,
  :class:`ActorCrashed`, :class:`ActorRestarting`, :class:`ActorStopped`,
  :class:`ActorLateReply`, :class:`ActorCastFailed`, :class:`ActorCleanupFailed`,
  :class:`ActorCleanupTimeout`, :class:`ErrorSuppressed`;
* supervisors — :class:`SupervisorDecision`, :class:`SupervisorEscalated`,
  :class:`ChildStarted`, :class:`ChildStopped`;
* resilience — :class:`RetryScheduled`, :class:`BreakerTransition`,
  :class:`BudgetWarning`, :class:`BudgetPaused`, :class:`PoolAttempt`,
  :class:`PoolAttemptFailed`, :class:`PoolAttemptCancelled`, :class:`PoolEscalated`;
* tools — :class:`ToolRetried`, :class:`ToolCallFailed`, :class:`ToolFallback`,
  :class:`ToolCleanupOverrun`;
* runs (the event stream of a workflow run) — :class:`RunStarted`,
  :class:`NodeStarted`, :class:`NodeRetrying`, :class:`NodeCompleted`,
  :class:`NodeFailed`, :class:`NodeSkipped`, :class:`ToolCalled`,
  :class:`RunBudgetWarning`, :class:`RunBudgetPaused`, :class:`ApprovalRequested`,
  :class:`ApprovalDecided`, :class:`RunCompleted`, :class:`RunFailed`,
  :class:`RunCancelled`, :class:`RunResumed` (all :class:`RunEvent`), and
  :class:`RunErrorDetail`, their failures' detail for the log;
* journal — :class:`JournalAppendFailed`, :class:`JournalRecovered`,
  :class:`JournalUnavailable`, :class:`JournalLeaseLost`, :class:`JournalLeaseRenewFailed`,
  :class:`JournalLeaseGiveBackFailed`, :class:`JournalAdoptFailed`, :class:`RunNotResumed`;
* shared state — :class:`StateDegraded`, :class:`StateRecovered`,
  :class:`StateUsageUnmerged`;
* daemon — :class:`DaemonStopping`;
* diagnostics — :class:`TaskFailed`, :class:`DeadLetterReported`,
  :class:`DeadLettersThrottled`, :class:`ClassifyUnplaced`, :class:`HookFailed`.
"""

from actors.events._base import (
    Event,
    EventHook,
    RedactedCause,
    safe_error,
)
from actors.events.daemon import DaemonStopping
from actors.events.diagnostics import (
    ClassifyUnplaced,
    DeadLetterReported,
    DeadLettersThrottled,
    HookFailed,
    TaskFailed,
)
from actors.events.journal import (
    JournalAdoptFailed,
    JournalAppendFailed,
    JournalLeaseGiveBackFailed,
    JournalLeaseLost,
    JournalLeaseRenewFailed,
    JournalRecovered,
    JournalUnavailable,
    RunNotResumed,
)
from actors.events.lifecycle import (
    ActorCastFailed,
    ActorCleanupFailed,
    ActorCleanupTimeout,
    ActorCrashed,
    ActorLateReply,
    ActorRestarting,
    ActorStarted,
    ActorStartFailed,
    ActorStopped,
    ErrorSuppressed,
)
from actors.events.resilience import (
    AttemptRecord,
    BreakerTransition,
    BudgetPaused,
    BudgetWarning,
    PoolAttempt,
    PoolAttemptCancelled,
    PoolAttemptFailed,
    PoolEscalated,
    RetryScheduled,
)
from actors.events.runs import (
    ApprovalDecided,
    ApprovalRequested,
    NodeAttempt,
    NodeCompleted,
    NodeFailed,
    NodeRetrying,
    NodeSkipped,
    NodeStarted,
    RunBudgetPaused,
    RunBudgetWarning,
    RunCancelled,
    RunCompleted,
    RunErrorDetail,
    RunEvent,
    RunFailed,
    RunResumed,
    RunStarted,
    ToolCalled,
    run_outcome,
)
from actors.events.state import StateDegraded, StateRecovered, StateUsageUnmerged
from actors.events.supervision import (
    ChildStarted,
    ChildStopped,
    SupervisorDecision,
    SupervisorEscalated,
)
from actors.events.tools import (
    ToolCallFailed,
    ToolCleanupOverrun,
    ToolFallback,
    ToolRetried,
)

#: Every record class of the runtime, by family (docs/events.md lists each).
RECORDS: tuple[type[Event], ...] = (
    ActorStarted,
    ActorStartFailed,
    ActorCrashed,
    ActorRestarting,
    ActorStopped,
    ActorLateReply,
    ActorCastFailed,
    ActorCleanupFailed,
    ActorCleanupTimeout,
    ErrorSuppressed,
    SupervisorDecision,
    SupervisorEscalated,
    ChildStarted,
    ChildStopped,
    RetryScheduled,
    BreakerTransition,
    BudgetWarning,
    BudgetPaused,
    PoolAttempt,
    PoolAttemptCancelled,
    PoolAttemptFailed,
    PoolEscalated,
    ToolRetried,
    ToolCallFailed,
    ToolFallback,
    ToolCleanupOverrun,
    TaskFailed,
    DeadLetterReported,
    DeadLettersThrottled,
    ClassifyUnplaced,
    HookFailed,
    RunStarted,
    RunResumed,
    NodeStarted,
    NodeRetrying,
    NodeCompleted,
    NodeFailed,
    NodeSkipped,
    ToolCalled,
    RunBudgetWarning,
    RunBudgetPaused,
    ApprovalRequested,
    ApprovalDecided,
    RunCompleted,
    RunFailed,
    RunCancelled,
    RunErrorDetail,
    JournalAdoptFailed,
    JournalAppendFailed,
    JournalLeaseLost,
    JournalLeaseGiveBackFailed,
    JournalLeaseRenewFailed,
    JournalRecovered,
    JournalUnavailable,
    RunNotResumed,
    StateDegraded,
    StateRecovered,
    StateUsageUnmerged,
    DaemonStopping,
)

__all__ = [
    "RECORDS",
    "ActorCastFailed",
    "ActorCleanupFailed",
    "ActorCleanupTimeout",
    "ActorCrashed",
    "ActorLateReply",
    "ActorRestarting",
    "ActorStartFailed",
    "ActorStarted",
    "ActorStopped",
    "ApprovalDecided",
    "ApprovalRequested",
    "AttemptRecord",
    "BreakerTransition",
    "BudgetPaused",
    "BudgetWarning",
    "ChildStarted",
    "ChildStopped",
    "ClassifyUnplaced",
    "DaemonStopping",
    "DeadLetterReported",
    "DeadLettersThrottled",
    "ErrorSuppressed",
    "Event",
    "EventHook",
    "HookFailed",
    "JournalAdoptFailed",
    "JournalAppendFailed",
    "JournalLeaseGiveBackFailed",
    "JournalLeaseLost",
    "JournalLeaseRenewFailed",
    "JournalRecovered",
    "JournalUnavailable",
    "NodeAttempt",
    "NodeCompleted",
    "NodeFailed",
    "NodeRetrying",
    "NodeSkipped",
    "NodeStarted",
    "PoolAttempt",
    "PoolAttemptCancelled",
    "PoolAttemptFailed",
    "PoolEscalated",
    "RedactedCause",
    "RetryScheduled",
    "RunBudgetPaused",
    "RunBudgetWarning",
    "RunCancelled",
    "RunCompleted",
    "RunErrorDetail",
    "RunEvent",
    "RunFailed",
    "RunNotResumed",
    "RunResumed",
    "RunStarted",
    "StateDegraded",
    "StateRecovered",
    "StateUsageUnmerged",
    "SupervisorDecision",
    "SupervisorEscalated",
    "TaskFailed",
    "ToolCallFailed",
    "ToolCalled",
    "ToolCleanupOverrun",
    "ToolFallback",
    "ToolRetried",
    "run_outcome",
    "safe_error",
]
