"""Run records: the event stream of a workflow run (:mod:`supervisors.runs`).

Each record is one entry of a run's stream, in order: ``run_id``, ``seq`` (0, 1, 2, …
without gaps, per run) and ``at`` (``trio.current_time()`` when it was published). The
same records go to every hook and to the log, as every other record does.

What a record holds is what a reader of the stream may see: a failure is its ``code``,
the code's user-safe ``message`` and a ``correlation_id`` that joins it to the log line
with the full detail (``run.error``, :class:`RunErrorDetail`) — never the exception,
its text, a secret or a path. State values appear only where they are the run's own
data: the ``inputs`` of ``run:started``, the ``updates`` a node wrote, the final
``state`` of ``run:completed``. Those are enough to rebuild a run's state from its
stream alone (the journal does).

Hooks and the stream get those values whole. The log line gets a bounded summary
(:func:`logged_values`): at most 20 keys, each value a short ``repr`` (3 levels, 10
items a container, 200 characters), so a large document, a value shared many times over
or an object whose ``repr`` raises costs a log line no more than that.
"""

from __future__ import annotations

import logging
import reprlib
from collections.abc import Mapping
from typing import Any, ClassVar, Final

import attrs

from actors.error_types import ActorError
from actors.events._base import Event

#: How many keys of a state mapping a log line shows, and how long each value's text is.
LOGGED_KEYS: Final = 20
LOGGED_CHARS: Final = 200

_SHORT: Final = reprlib.Repr()
_SHORT.maxlevel = 3
_SHORT.maxstring = 80
_SHORT.maxother = 80
_SHORT.maxlong = 40
for _attribute in ("maxdict", "maxlist", "maxtuple", "maxset", "maxfrozenset", "maxdeque"):
    setattr(_SHORT, _attribute, 10)


def logged_values(values: Mapping[str, Any]) -> dict[str, str]:
    """State values as a log line shows them: the first :data:`LOGGED_KEYS` keys (cut to
    64 characters), each with a short ``repr`` of its value cut to :data:`LOGGED_CHARS`
    characters; more keys are counted under ``"…"``. A value whose ``repr`` cannot be
    made shows as ``<unprintable TYPE: ERROR>``."""
    shown: dict[str, str] = {}
    for index, (key, value) in enumerate(values.items()):
        if index == LOGGED_KEYS:
            shown["…"] = f"{len(values) - LOGGED_KEYS} more keys"
            break
        try:
            text = _SHORT.repr(value)
        except Exception as exc:  # noqa: BLE001 - classified: shown as unprintable, never raised
            text = f"<unprintable {type(value).__name__}: {type(exc).__name__}>"
        shown[str(key)[:64]] = text if len(text) <= LOGGED_CHARS else text[: LOGGED_CHARS - 1] + "…"
    return shown


@attrs.frozen(kw_only=True, slots=True)
class RunEvent(Event):
    """The fields every entry of a run's stream has (a base: not a record itself)."""

    level: ClassVar[int] = logging.INFO

    run_id: str
    #: Position in the run's stream, from 0, without gaps.
    seq: int
    #: ``trio.current_time()`` when the record was published.
    at: float


@attrs.frozen(kw_only=True, slots=True)
class RunStarted(RunEvent):
    """A run passed validation and starts at its workflow's ``start`` node(s)."""

    name: ClassVar[str] = "run:started"

    workflow: str
    #: The run's initial state (its inputs).
    inputs: Mapping[str, Any]
    #: Wall-clock seconds since the epoch (``time.time()``): for people, not for timing.
    wall_time: float

    def fields(self) -> dict[str, Any]:
        """The log fields, ``inputs`` as a bounded summary (:func:`logged_values`)."""
        fields = super().fields()
        fields["inputs"] = logged_values(self.inputs)
        return fields


@attrs.frozen(kw_only=True, slots=True)
class RunResumed(RunEvent):
    """A run was resumed from its journal (after a crash, a halt or a restart): the
    stream goes on from the journal's last record. ``in_flight`` nodes are run again
    (same execution, same idempotency keys); ``ready`` nodes were due and had not
    started; ``pending`` approvals wait again."""

    name: ClassVar[str] = "run:resumed"

    in_flight: tuple[str, ...]
    ready: tuple[str, ...]
    pending: tuple[str, ...]
    #: Wall-clock seconds since the epoch (``time.time()``).
    wall_time: float


@attrs.frozen(kw_only=True, slots=True)
class NodeAttempt(RunEvent):
    """The fields of the records about one attempt of a node (a base: not a record)."""

    node_id: str
    #: How many times the node has started in this run, this one included (loops).
    execution: int
    #: The attempt of this execution, from 1 (retries add one).
    attempt: int


@attrs.frozen(kw_only=True, slots=True)
class NodeStarted(NodeAttempt):
    """An attempt of a node starts on a node runner."""

    name: ClassVar[str] = "node:started"
    level: ClassVar[int] = logging.DEBUG

    #: ``step``, ``llm``, ``agent``, ``router`` or ``approval``.
    kind: str


@attrs.frozen(kw_only=True, slots=True)
class NodeRetrying(NodeAttempt):
    """A node's attempt (the one that failed; the retry is ``attempt + 1``) failed with
    a retryable error and will be retried after ``delay`` seconds (the audit trail of
    the node's retry policy)."""

    name: ClassVar[str] = "node:retrying"

    code: str
    message: str
    correlation_id: str
    delay: float


@attrs.frozen(kw_only=True, slots=True)
class NodeCompleted(NodeAttempt):
    """A node succeeded: its ``updates`` are in the run state, ``next`` are the nodes
    its edges (or its pick, for a router) lead to."""

    name: ClassVar[str] = "node:completed"
    level: ClassVar[int] = logging.DEBUG

    #: The keys the node wrote and their new values.
    updates: Mapping[str, Any]
    #: The nodes that follow, in edge order.
    next: tuple[str, ...]
    #: Seconds from the execution's first ``node:started``.
    duration: float

    def fields(self) -> dict[str, Any]:
        """The log fields, ``updates`` as a bounded summary (:func:`logged_values`)."""
        fields = super().fields()
        fields["updates"] = logged_values(self.updates)
        return fields


@attrs.frozen(kw_only=True, slots=True)
class NodeFailed(NodeAttempt):
    """A node failed for good (fatal, or retries exhausted). ``handled``: an edge of the
    node handles the code and the run goes on along it (``next``); otherwise the run
    fails with this code."""

    name: ClassVar[str] = "node:failed"

    code: str
    message: str
    correlation_id: str
    handled: bool
    next: tuple[str, ...]


@attrs.frozen(kw_only=True, slots=True)
class NodeSkipped(RunEvent):
    """A node was not run: its circuit breaker is open (``code`` ``circuit_open``); the
    run goes on along the edges that handle that code (``next``)."""

    name: ClassVar[str] = "node:skipped"
    level: ClassVar[int] = logging.WARNING

    node_id: str
    code: str
    message: str
    next: tuple[str, ...]


@attrs.frozen(kw_only=True, slots=True)
class ToolCalled(RunEvent):
    """A node's tool call ended: ``code`` is ``"ok"`` or the error's code (then the model
    gets the error as its typed model-facing shape)."""

    name: ClassVar[str] = "tool:called"

    node_id: str
    tool: str
    #: The call's number within the node's execution, from 0.
    index: int
    #: The call's idempotency key (the same on a re-run of the node).
    key: str
    code: str


@attrs.frozen(kw_only=True, slots=True)
class RunBudgetWarning(RunEvent):
    """The run's budget reached its warning fraction of a cap, or passed a cap under
    ``on_exceed="warn"`` (``exceeded``)."""

    name: ClassVar[str] = "budget:warning"
    level: ClassVar[int] = logging.WARNING

    dimension: str
    used: float
    limit: float
    exceeded: bool


@attrs.frozen(kw_only=True, slots=True)
class RunBudgetPaused(RunEvent):
    """The run passed a cap under ``on_exceed="pause"`` and waits for
    ``run.decide_budget(...)``."""

    name: ClassVar[str] = "budget:paused"
    level: ClassVar[int] = logging.WARNING

    dimension: str
    used: float
    limit: float


@attrs.frozen(kw_only=True, slots=True)
class ApprovalRequested(RunEvent):
    """The run waits for a decision: on an approval node (``node_id``) or on its budget
    (``node_id`` ``None``)."""

    name: ClassVar[str] = "approval:requested"

    node_id: str | None
    #: The approval node's prompt, or the budget dimension that paused the run.
    prompt: str


@attrs.frozen(kw_only=True, slots=True)
class ApprovalDecided(RunEvent):
    """A decision arrived (audited: who, what, why)."""

    name: ClassVar[str] = "approval:decided"

    node_id: str | None
    #: ``"approve"`` or ``"deny"``.
    decision: str
    by: str
    reason: str


@attrs.frozen(kw_only=True, slots=True)
class RunCompleted(RunEvent):
    """The run ended with no node left to run."""

    name: ClassVar[str] = "run:completed"

    #: The final run state.
    state: Mapping[str, Any]
    #: Seconds from ``run:started``.
    duration: float
    #: Tokens and dollars of every provider attempt of the run, failed ones included.
    tokens: int
    cost: float

    def fields(self) -> dict[str, Any]:
        """The log fields, ``state`` as a bounded summary (:func:`logged_values`)."""
        fields = super().fields()
        fields["state"] = logged_values(self.state)
        return fields


@attrs.frozen(kw_only=True, slots=True)
class RunFailed(RunEvent):
    """The run ended with an error: a node's unhandled failure, a limit, a validation
    error (then it is the run's only record), or ``internal``."""

    name: ClassVar[str] = "run:failed"
    level: ClassVar[int] = logging.WARNING

    code: str
    message: str
    correlation_id: str
    #: The node whose failure ended the run, if one did.
    node_id: str | None
    duration: float
    tokens: int
    cost: float


@attrs.frozen(kw_only=True, slots=True)
class RunCancelled(RunEvent):
    """The run was cancelled (``run.cancel``, an enclosing scope, a shutdown, an abort):
    the nodes in flight were cancelled and nothing was retried after it."""

    name: ClassVar[str] = "run:cancelled"

    reason: str
    #: The nodes that were running when the cancel came.
    in_flight: tuple[str, ...]
    duration: float
    tokens: int
    cost: float
    #: A daemon shutting down interrupted the run (``Runs.shutdown``): with a journal,
    #: the run stays unfinished there — this record does not end it — and a restarted
    #: daemon resumes it, the nodes in flight run again.
    resumable: bool = False


@attrs.frozen(kw_only=True)
class RunErrorDetail(Event):
    """The log's side of a failure record of a run's stream: the full error (redacted as
    every record's error is), joined to the stream's record by ``correlation_id``. Not
    an entry of the stream."""

    name: ClassVar[str] = "run.error"
    level: ClassVar[int] = logging.WARNING

    run_id: str
    node_id: str | None
    error: ActorError


def run_outcome(record: RunCompleted | RunFailed | RunCancelled) -> tuple[str, str]:
    """``(outcome, code)`` of a run's terminal record, as metrics and traces label it:
    ``("completed", "")``, ``("failed", <its code>)``, ``("cancelled", "cancelled")``, or
    ``("interrupted", "cancelled")`` for a resumable cancel — a shutdown interrupted the
    run and the next daemon resumes it, so it has not ended."""
    if isinstance(record, RunFailed):
        return "failed", record.code
    if isinstance(record, RunCancelled):
        return ("interrupted" if record.resumable else "cancelled"), "cancelled"
    return "completed", ""
