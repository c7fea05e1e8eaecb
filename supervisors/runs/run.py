"""A run as its owner sees it: :class:`Run` (the stream, the decisions, the cancel) and
:class:`RunOutcome` (how it ended)."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from actors import ActorError, Code
from actors.events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    RunBudgetPaused,
    RunBudgetWarning,
    RunErrorDetail,
    RunEvent,
    RunFailed,
)
from actors.events import BudgetWarning as BudgetWarningRecord
from actors.lowlevel import cancelled_around, emit
from supervisors.resilience.budget import BudgetLimits, BudgetRequest
from supervisors.runs.kinds import NOTHING

if TYPE_CHECKING:
    from supervisors.runs.graph import Approval
    from supervisors.runs.journaled import RunJournal

Status = Literal["running", "completed", "failed", "cancelled", "interrupted"]
ApprovalChoice = Literal["approve", "deny"]


@attrs.frozen
class RunOutcome:
    """How a run ended: ``status``, the final ``state``, and the ``error`` of a failed run
    (``None`` when it completed or was cancelled; a cancelled run's ``reason``).

    ``interrupted`` is not an end: a shutdown cancelled a journalled run *resumable* —
    the journal keeps it unfinished and the next daemon on it resumes it (its
    ``run:cancelled`` says ``resumable: true``). ``cancelled`` is for good."""

    run_id: str
    status: Status
    state: Mapping[str, Any]
    error: ActorError | None = None
    reason: str | None = None

    @property
    def code(self) -> str | None:
        """The terminal code: the error's, ``"cancelled"`` (also for ``interrupted``), or
        ``None`` when completed."""
        if self.error is not None:
            return str(self.error.code)
        return "cancelled" if self.status in ("cancelled", "interrupted") else None


class _Pending:
    __slots__ = ("decided", "decision")

    def __init__(self) -> None:
        self.decided = trio.Event()
        self.decision: tuple[ApprovalChoice, str, str, BudgetLimits | None] | None = None


class Run:
    """One run of a workflow (made by :meth:`~supervisors.runs.Runs.start`).

    ``events()`` iterates over the run's stream from its first record and follows it
    live, ending after the terminal record; ``history`` is what was published so far.
    ``cancel(reason)`` cancels it; ``decide`` answers an approval node; ``decide_budget``
    a budget pause. ``await wait()`` returns the :class:`RunOutcome` (cancelling the
    waiter does not cancel the run).
    """

    def __init__(self, run_id: str, workflow: str, inputs: dict[str, Any]) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.status: Status = "running"
        self.error: ActorError | None = None
        #: The run's inputs (a copy: changing the caller's dict changes nothing).
        self.inputs: dict[str, Any] = inputs
        #: The run state: a new dict at each node's updates (never changed in place).
        self.state: dict[str, Any] = inputs
        self.wall_time = time.time()
        self._events: list[RunEvent] = []
        #: The ``seq`` of the next record, and what is added to trio time for ``at`` (a
        #: resumed run's stream goes on from its journal's last time).
        self._seq = 0
        self._at_offset = 0.0
        #: The journal side, when the runs have a journal.
        self.journaled: RunJournal | None = None
        #: Approval decisions recorded before a resume, used before waiting again.
        self._preset: dict[str, list[list[str]]] = {}
        self._changed: trio.Event | None = None
        self._done = trio.Event()
        self._ended = False
        self._detailed: str | None = None
        #: What waits for a decision, oldest first, by node id (``None``: the budget).
        self._pending: dict[str | None, list[_Pending]] = {}
        #: The engine's cancel, once it drives the run.
        self._cancel: Callable[..., None] | None = None
        self._early_cancel: str | None = None
        #: Scopes of the callers waiting through ``Runs.run`` (their cancel is the run's).
        self._callers: list[trio.CancelScope] = []

    def caller_cancel(self) -> str | None:
        """The reason of a cancel on its way to a caller waiting through ``Runs.run``
        (that caller cancels the run with it once its task runs: it came first)."""
        reasons = (cancelled_around(scope) for scope in self._callers)
        return next((reason for reason in reasons if reason is not None), None)

    @contextlib.contextmanager
    def awaited(self) -> Iterator[None]:
        """The block in which a caller waits on the run (``Runs.run``)."""
        with trio.CancelScope() as scope:
            self._callers.append(scope)
            try:
                yield
            finally:
                self._callers.remove(scope)

    def restore(
        self,
        records: Iterable[RunEvent],
        *,
        seq: int,
        last_at: float,
        decisions: Mapping[str, list[list[str]]],
        wall_time: float,
        state: Mapping[str, Any],
    ) -> None:
        """Put a resumed run where its journal left it, before its engine starts: the
        journalled ``records`` are its history, ``seq`` its next record's number, its
        ``at`` goes on from ``last_at`` (the time the daemon was down does not count),
        the approval ``decisions`` made before the stop are used before waiting again."""
        self.wall_time = wall_time
        self.state = dict(state)
        self._events.extend(records)
        self._seq = seq
        self._at_offset = last_at - trio.current_time()
        self._preset = {k: [list(d) for d in v] for k, v in decisions.items()}

    @property
    def at_offset(self) -> float:
        """Seconds added to trio time for a record's ``at`` (0 but for a resumed run)."""
        return self._at_offset

    def decided_before(self, node_id: str) -> bool:
        """Whether an approval of ``node_id`` was decided before the run was resumed
        and not used yet (the node will not wait for a decision)."""
        return bool(self._preset.get(node_id))

    def drive(self, cancel: Callable[..., None]) -> None:
        """Its engine now drives the run: :meth:`cancel` calls ``cancel``; a cancel asked
        before (while the run was starting) is passed on at once."""
        self._cancel = cancel
        if self._early_cancel is not None:
            cancel(self._early_cancel)

    def interrupt(self, reason: str) -> None:
        """Cancel the run *resumably* (a graceful shutdown's cancel): ``run:cancelled``
        with ``resumable`` set, so a journal keeps it unfinished for the next daemon."""
        assert self._cancel is not None  # a live run has its engine
        self._cancel(reason, resumable=True)

    # -- the stream -----------------------------------------------------------------

    @property
    def history(self) -> tuple[RunEvent, ...]:
        """Every record of the run's stream so far, in ``seq`` order (a resumed run's
        journalled ones first)."""
        return tuple(self._events)

    @property
    def done(self) -> bool:
        """Whether the run has ended and its terminal record is delivered."""
        return self._done.is_set()

    def events(self) -> RunStream:
        """An async iterator over the stream, from ``seq`` 0 (see the class docstring)."""
        return RunStream(self)

    def publish(self, cls: type[RunEvent], **fields: Any) -> None:
        """Append one record to the stream (engine side), wake the readers, emit it."""
        if self._ended:
            return  # nothing follows the terminal record
        record = cls(
            run_id=self.run_id,
            seq=self._seq,
            at=trio.current_time() + self._at_offset,
            **fields,
        )
        self._seq += 1
        if self.journaled is None:
            self.deliver(record)
        else:
            self.journaled.record(record)  # delivered once durable

    def deliver(self, record: RunEvent) -> None:
        """Add a published record to the stream, wake the readers, emit it."""
        self._events.append(record)
        changed = self._changed
        if changed is not None:
            self._changed = None
            changed.set()
        emit(record)

    def detail(self, node_id: str | None, error: ActorError) -> None:
        """The full error of a failure record, for the log (not part of the stream)."""
        if error.correlation_id != self._detailed:  # once per error
            self._detailed = error.correlation_id
            emit(RunErrorDetail(run_id=self.run_id, node_id=node_id, error=error))

    def end(
        self, cls: type[RunEvent], status: Status, error: ActorError | None, **fields: Any
    ) -> None:
        """Publish the terminal record and fix the outcome (once); :meth:`settle` then
        releases the waiters, once the run's supervisor is gone."""
        if self._ended:
            return
        self.publish(cls, **fields)
        self._ended = True
        if error is not None:
            self.detail(fields.get("node_id"), error)
        self.status = status
        self.error = error
        self._reason = fields.get("reason")
        for waiting in self._pending.values():
            for pending in waiting:
                pending.decided.set()

    def rewind(self, seq: int) -> None:
        """The records from ``seq`` on were never shown (a halted journal lost them):
        the next record takes ``seq``."""
        self._seq = seq

    def end_again(self, error: ActorError, ended: Any) -> None:
        """The terminal record ``ended`` was never shown (a halted journal lost it): the
        run ends with ``error`` instead, its totals kept."""
        self._ended = False
        self.end_failed(error, None, duration=ended.duration, tokens=ended.tokens, cost=ended.cost)

    def end_failed(self, error: ActorError, node_id: str | None, **fields: Any) -> None:
        """:meth:`end` with ``run:failed`` for ``error``."""
        self.end(RunFailed, "failed", error, **shown(error), node_id=node_id, **fields)

    def settle(self) -> None:
        """The run is over and its supervisor removed: wake ``wait()`` and the readers."""
        self._done.set()
        changed = self._changed
        if changed is not None:
            self._changed = None
            changed.set()

    async def wait(self) -> RunOutcome:
        """Wait for the run to end; its :class:`RunOutcome`. Cancelling the waiter does not
        cancel the run."""
        await self._done.wait()
        return self.outcome()

    def outcome(self) -> RunOutcome:
        """The outcome so far (``status`` ``running`` until the run ends)."""
        return RunOutcome(
            self.run_id, self.status, self.state, self.error, getattr(self, "_reason", None)
        )

    # -- control ----------------------------------------------------------------------

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the run: ``run:cancelled`` with ``reason`` (the first reason wins; a
        no-op once the run has ended)."""
        if type(reason) is not str or not reason:
            raise ActorError.from_code(
                Code.INPUT_VALIDATION, "Run.cancel: reason must be a non-empty string"
            )
        if self._cancel is None:
            self._early_cancel = self._early_cancel or reason
            return
        self._cancel(reason)

    @property
    def pending(self) -> tuple[str | None, ...]:
        """What waits for a decision: approval node ids, ``None`` for a budget pause."""
        return tuple(
            key for key, waiting in self._pending.items() for p in waiting if p.decision is None
        )

    def decide(self, node_id: str, decision: ApprovalChoice, *, by: str, reason: str = "") -> None:
        """Answer the approval node ``node_id``: ``"approve"`` or ``"deny"`` (audited in
        ``approval:decided`` with ``by`` and ``reason``). ``input_validation`` when nothing
        waits under that id or the arguments are wrong."""
        self._decide(node_id, decision, by, reason, None)

    def decide_budget(
        self,
        decision: ApprovalChoice,
        *,
        by: str,
        limits: BudgetLimits | None = None,
        reason: str = "",
    ) -> None:
        """Answer a budget pause: ``"approve"`` with raised ``limits`` goes on, ``"deny"``
        (or approve without limits) ends the run with the cap's code."""
        if limits is not None and not isinstance(limits, BudgetLimits):
            raise _bad("limits must be a BudgetLimits or None")
        self._decide(None, decision, by, reason, limits)

    def _decide(
        self,
        key: str | None,
        decision: Any,
        by: Any,
        reason: Any,
        limits: BudgetLimits | None,
    ) -> None:
        if key is not None and type(key) is not str:
            raise _bad("node must be a node id (a string)")
        if decision not in ("approve", "deny"):
            raise _bad("decision must be 'approve' or 'deny'")
        if type(by) is not str or not by or type(reason) is not str:
            raise _bad("by must be a non-empty string and reason a string")
        undecided = [p for p in self._pending.get(key, ()) if p.decision is None]
        if not undecided:
            what = "the budget" if key is None else f"node {key!r}"
            raise _bad(f"run {self.run_id}: {what} waits for no decision")
        # A node reached twice waits twice: one decision each, oldest first. A budget
        # paused in several branches at once is one decision for all of them.
        for pending in undecided if key is None else undecided[:1]:
            pending.decision = (decision, by, reason, limits)
            pending.decided.set()
        # Audited when it is made, in the order decisions are made.
        self.publish(ApprovalDecided, node_id=key, decision=decision, by=by, reason=reason)

    # -- waits of the engine --------------------------------------------------------------

    async def wait_approval(self, node: Approval) -> Any:
        """An approval node's attempt: its (empty) updates, ``permission_denied``, or —
        past the node's ``timeout`` with no decision — ``timeout``. A decision made in
        the very instant the timeout trips counts."""
        decided = await self._wait_decision(node.id, node.prompt, node.timeout)
        if decided is None:
            return ActorError.from_code(
                Code.TIMEOUT, f"no decision within {node.timeout} s", node_id=node.id
            )
        decision, by, _, _ = decided
        if decision == "approve":
            return NOTHING
        return ActorError.from_code(
            Code.PERMISSION_DENIED, f"node {node.id!r} denied by {by}", node_id=node.id
        )

    async def approve_budget(self, request: BudgetRequest) -> BudgetLimits | None:
        """The budget's ``approve`` hook: ``budget:paused``, then the decision."""
        limit = request.limits.cap(request.dimension) or 0.0
        self.publish(
            RunBudgetPaused, dimension=str(request.dimension), used=request.used, limit=limit
        )
        decided = await self._wait_decision(None, str(request.dimension), None)
        assert decided is not None  # no timeout: a decision, or the run's end (raised)
        decision, _, _, limits = decided
        return limits if decision == "approve" else None

    async def _wait_decision(
        self, key: str | None, prompt: str, timeout: float | None
    ) -> tuple[ApprovalChoice, str, str, BudgetLimits | None] | None:
        """The decision for ``key``; ``None`` when ``timeout`` passed without one."""
        preset = self._preset.get(key) if key is not None else None
        if preset:  # decided before the run was resumed
            made, who, why = preset.pop(0)
            await trio.lowlevel.checkpoint()
            return ("approve" if made == "approve" else "deny", who, why, None)
        pending = _Pending()
        waiting = self._pending.setdefault(key, [])
        waiting.append(pending)
        try:
            self.publish(ApprovalRequested, node_id=key, prompt=prompt)
            with trio.move_on_after(math.inf if timeout is None else timeout):
                await pending.decided.wait()
        finally:
            waiting.remove(pending)
            if not waiting:
                del self._pending[key]
        decision = pending.decision
        if decision is None and self._ended:  # the run ended meanwhile
            await trio.lowlevel.checkpoint()
            raise ActorError.from_code(Code.CANCELLED, "run ended")
        return decision

    def budget_record(self, record: Event) -> None:
        """The budget's warning and pause records, copied into the stream."""
        if isinstance(record, BudgetWarningRecord):  # a pause is published by approve_budget
            self.publish(
                RunBudgetWarning,
                dimension=record.dimension,
                used=record.used,
                limit=record.limit,
                exceeded=record.exceeded,
            )


def shown(error: ActorError) -> dict[str, Any]:
    """What a failure record of the stream shows of ``error``: its code, the code's
    user-safe message and the correlation id (never the error's own text)."""
    return {
        "code": str(error.code),
        "message": error.user_message,
        "correlation_id": error.correlation_id,
    }


def _bad(text: str) -> ActorError:
    return ActorError.from_code(Code.INPUT_VALIDATION, text)


class RunStream:
    """Iterates over a run's records from ``seq`` 0, waiting for new ones, and stops
    after the terminal record."""

    __slots__ = ("_next", "_run")

    def __init__(self, run: Run) -> None:
        self._run = run
        self._next = 0

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> RunEvent:
        run = self._run
        while self._next >= len(run._events):
            if run._done.is_set():
                raise StopAsyncIteration
            if run._changed is None:
                run._changed = trio.Event()
            await run._changed.wait()
        record = run._events[self._next]
        self._next += 1
        return record
