"""The run loop: which node runs next, what a node's ending means for its run, how a run ends.

One :class:`Engine` drives one run, in a task of its :class:`~supervisors.runs.Runs`.
A node's attempts run on the run's node runners (:class:`~actors.nodes.NodeRunner`,
children of the run's supervisor); approvals wait in the run's own tasks. The rules:

* **Scheduling.** The start nodes are ready; a node that ends makes the targets of the
  edges it followed ready (a join once all its sources are done, see
  :mod:`supervisors.runs.graph`). When one node is ready and none runs, it runs in the
  loop's own task (a chain costs no task per node); otherwise each runs in a task.
* **A node's outcome.** One execution of a node is its attempts
  (:class:`~supervisors.runs.attempts.NodeAttempts`, which retries them and publishes
  what each meant); it answers the targets to follow, or the error that ends the run. The
  engine owns the run: it commits a successful attempt's updates (:meth:`Engine.commit`),
  hears each attempt's progress through one callback (:meth:`Engine.progress`), follows
  the targets, and ends the run.
* **Limits.** ``max_steps`` node executions, the budget's tokens, cost and turns, and
  its wall clock (the whole run is cancelled at the deadline) end the run with
  ``turn_limit``, ``budget_exceeded`` or ``run_timeout`` — never retried, never handled.
* **Cancellation wins.** ``run.cancel(reason)``, a cancel of the scope around the runs,
  an abort of the tree: every node in flight is cancelled (its tools and provider
  requests with it), nothing is retried, and the run ends ``run:cancelled`` with the
  reason — whatever the nodes raised meanwhile.
* **Nothing else is possible.** Anything the engine did not expect — a bug, a
  ``BaseException`` from a node runner — ends the run with one ``run:failed`` of code
  ``internal``, its correlation id in the log's ``run.error``. A run always ends with
  exactly one terminal record, and nothing follows it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from actors import ActorError, Code
from actors.events import (
    NodeStarted,
    RunCancelled,
    RunCompleted,
    RunResumed,
    RunStarted,
    ToolCalled,
)
from actors.lowlevel import cancel_in_effect, cancellation_reason, cancelled_around
from supervisors.resilience.budget import Budget, Dimension
from supervisors.runs.attempts import NodeAttempts
from supervisors.runs.commit import outcome_of
from supervisors.runs.context import AttemptBegan, AttemptProgress, WorkStarting
from supervisors.runs.graph import Approval, Node
from supervisors.runs.plan import Plan
from supervisors.runs.progress import Progress, follow, release

if TYPE_CHECKING:
    from supervisors.pool import ProviderPool
    from supervisors.resilience.breaker import Breaker
    from supervisors.runs.run import Run
    from supervisors.tools import Tools
    from supervisors.tools.entry import Workers


class Engine:
    """Drives one run (see the module docstring)."""

    def __init__(
        self,
        run: Run,
        plan: Plan,
        *,
        budget: Budget,
        runners: Workers,
        pools: Mapping[str, ProviderPool],
        tools: Mapping[str, Tools],
        breaker_of: Callable[[str, Node], Breaker | None],
        cancel_reason: Callable[[], str | None],
        resume: Progress | None = None,
        enclosing: trio.CancelScope | None = None,
    ) -> None:
        self.run = run
        self.plan = plan
        self.budget = budget
        self.subtree_cancel = cancel_reason
        #: The scope the engine is driven in (the runs' nursery's): a cancel around it
        #: before the drive began came first too.
        self.enclosing = enclosing
        self.attempts = NodeAttempts(
            self, runners=runners, pools=pools, tools=tools, breaker_of=breaker_of
        )
        self.ready: deque[str] = deque()
        #: Node executions under way (in the loop's task or in tasks of their own).
        self.in_flight = 0
        self.executions: dict[str, int] = {}
        self.steps = 0
        self.fired: dict[str, set[str]] = {}
        self.finished: dict[str, set[str]] = {}
        self.failure: tuple[ActorError, str | None] | None = None
        self.cancelled: str | None = None
        self.resumable = False
        #: The nodes a cancel caught in flight, in the order they saw it.
        self.interrupted: dict[str, None] = {}
        self.wake = trio.Event()
        self.nursery: trio.Nursery | None = None
        self.scope = trio.CancelScope()
        self.timer = trio.CancelScope(deadline=budget.deadline)
        #: The wall-clock cap as it was when the run started (the deadline never moves).
        self.seconds = budget.limits.seconds
        self.started = budget.started_at
        #: A resumed run: the executions in flight when it stopped, run again first.
        self.resumed: list[list[Any]] | None = None
        if resume is not None:
            self.ready.extend(resume.ready)
            self.executions = dict(resume.executions)
            self.steps = resume.steps
            self.fired = {k: set(v) for k, v in resume.fired.items()}
            self.finished = {k: set(v) for k, v in resume.finished.items()}
            self.resumed = [list(entry) for entry in resume.in_flight]

    # -- ending ---------------------------------------------------------------------

    def cancel(self, reason: str, *, resumable: bool = False) -> None:
        """Cancel the run with ``reason`` (the first reason wins; idempotent). The one
        place the reason is decided:

        * a cancel of the subtree already in effect (an abort, a cancel of the runs)
          came first: its reason, for good;
        * else a cancel of a scope on its way — around the runs, or around a caller
          waiting through ``Runs.run`` — that no task of the run has seen yet came first:
          its reason. A shutdown's interrupt made meanwhile (a daemon's, in reaction to
          that very cancel) still leaves a journalled run resumable.

        ``resumable``: a shutdown interrupts the run, and a journalled run stays
        resumable (its ``run:cancelled`` says so)."""
        if self.cancelled is None and self.failure is None:
            aborted = self.subtree_cancel()
            if aborted is not None:
                reason, resumable = aborted, False
            else:
                around = cancelled_around(self.scope)
                if around is None and self.enclosing is not None:  # not driven yet
                    around = cancelled_around(self.enclosing)
                reason = around or self.run.caller_cancel() or reason
            self.cancelled = reason
            self.resumable = resumable and self.run.journaled is not None
            self.scope.cancel(reason=reason)

    def fail(self, error: ActorError, node_id: str | None) -> None:
        """End the run with ``error`` (the first ending wins)."""
        if self.cancelled is None and self.failure is None:
            self.failure = (error, node_id)
            if self.nursery is not None:
                self.nursery.cancel_scope.cancel(reason=f"run failed: {error.code}")

    async def drive(self) -> None:
        """Run the run to its end and publish exactly one terminal record."""
        run = self.run
        try:
            with self.scope, self.timer:
                if self.resumed is None:
                    run.publish(
                        RunStarted,
                        workflow=self.plan.name,
                        inputs=run.inputs,
                        wall_time=run.wall_time,
                    )
                else:
                    self._publish_resumed()
                await self._walk()
            if self.failure is None and self.cancelled is None and self.timer.cancelled_caught:
                self._timed_out()
        except trio.Cancelled as exc:
            # A cancel from around the runs (their block left or cancelled, a shutdown).
            await self._cancelled_from_outside(exc)
            self._finish()
            raise
        except (KeyboardInterrupt, SystemExit) as exc:
            self.cancel(type(exc).__name__)
            self._finish()
            raise
        except BaseException as exc:
            if cancellation_reason(exc) is not None:  # a group of nothing but cancels
                await self._cancelled_from_outside(exc)
                self._finish()
                raise
            self._internal(exc)
        self._finish()

    async def _cancelled_from_outside(self, exc: BaseException) -> None:
        reason = await cancel_in_effect()  # cancel() prefers the subtree's, when there is one
        self.cancel(reason or cancellation_reason(exc) or "cancelled")

    def _timed_out(self) -> None:
        self.fail(
            ActorError.from_code(
                Code.RUN_TIMEOUT,
                f"run over its {self.seconds:g} s wall clock",
                run_id=self.run.run_id,
            ),
            None,
        )

    def _internal(self, exc: BaseException) -> None:
        if self.cancelled is not None:
            return  # cancellation wins over whatever the cancel raised on its way out
        leaf = exc
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        error = ActorError.from_code(
            Code.INTERNAL,
            f"run engine fault: {type(leaf).__name__}",
            run_id=self.run.run_id,
            cause=exc if isinstance(exc, Exception) else None,
        )
        self.failure = None  # an engine fault replaces whatever ending was under way
        self.fail(error, None)

    def _finish(self) -> None:
        run = self.run
        used = self.budget
        common = {
            "duration": trio.current_time() - self.started,
            "tokens": int(used.used(Dimension.TOKENS)),
            "cost": used.used(Dimension.COST),
        }
        if self.cancelled is not None:
            run.end(
                RunCancelled,
                "interrupted" if self.resumable else "cancelled",
                None,
                reason=self.cancelled,
                in_flight=tuple(self.interrupted),
                resumable=self.resumable,
                **common,
            )
        elif self.failure is not None:
            error, node_id = self.failure
            run.end_failed(error, node_id, **common)
        else:
            run.end(RunCompleted, "completed", None, state=run.state, **common)

    # -- scheduling -----------------------------------------------------------------

    def _publish_resumed(self) -> None:
        in_flight = self.resumed or []
        nodes = self.plan.nodes
        self.run.publish(
            RunResumed,
            in_flight=tuple(entry[0] for entry in in_flight),
            ready=tuple(self.ready),
            pending=tuple(
                entry[0]
                for entry in in_flight
                if isinstance(nodes[entry[0]], Approval) and not self.run.decided_before(entry[0])
            ),
            wall_time=time.time(),
        )

    async def _walk(self) -> None:
        ready = self.ready
        if self.resumed is None:
            ready.extend(self.plan.start)
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            for node_id, execution, attempt, not_before in self.resumed or ():
                self.in_flight += 1
                nursery.start_soon(self._resume_task, node_id, execution, attempt, not_before)
            while not self._over():
                while ready and not self._over():
                    node_id = ready.popleft()
                    if not self.in_flight and not ready:
                        await self._execute(node_id)
                    else:
                        self.in_flight += 1
                        nursery.start_soon(self._execute_task, node_id)
                if self._over():
                    break
                if not self.in_flight:
                    if not self._release_joins():
                        break
                    continue
                self.wake = trio.Event()
                await self.wake.wait()
            nursery.cancel_scope.cancel(reason="run ended")

    def _over(self) -> bool:
        return self.failure is not None

    def ending(self) -> bool:
        """The run is ending: cancelled, failed, or past its deadline."""
        return self.cancelled is not None or self.failure is not None or self.timer.cancel_called

    async def _execute_task(self, node_id: str) -> None:
        try:
            await self._execute(node_id)
        finally:
            self.in_flight -= 1
            self.wake.set()

    async def _resume_task(self, node: str, execution: int, attempt: int, after: float) -> None:
        try:  # a retry's backoff (its Retry-After) goes on across the restart, in run time
            await trio.sleep_until(after - self.run.at_offset)
            self.executions[node] = max(execution, self.executions.get(node, 0))
            ended = await self.attempts.execute(self.plan.nodes[node], execution, attempt)
            self._ended(node, ended)
        finally:
            self.in_flight -= 1
            self.wake.set()

    def _follow(self, node_id: str, targets: tuple[str, ...]) -> None:
        """``node_id`` is done and its edges led to ``targets``."""
        follow(self.plan.joins, self.ready, self.fired, self.finished, node_id, targets)

    def _release_joins(self) -> bool:
        """Nothing runs and nothing is ready: a join whose missing sources can no
        longer run goes ahead with the edges that were followed into it."""
        for join in list(self.fired):
            release(self.ready, self.fired, self.finished, join)
            return True
        return False

    # -- one node -------------------------------------------------------------------

    async def _execute(self, node_id: str) -> None:
        """Run ``node_id`` once (its attempts). ``in_flight`` is the caller's: a node run
        in its own task is counted by :meth:`_walk` and :meth:`_execute_task`; the one
        run inline by the loop needs no count (nothing else runs, nothing reads it)."""
        plan = self.plan
        node = plan.nodes[node_id]
        self.steps += 1
        if self.steps > plan.max_steps:
            self.fail(
                ActorError.from_code(
                    Code.TURN_LIMIT,
                    f"run over its {plan.max_steps} node executions",
                    run_id=self.run.run_id,
                    node_id=node_id,
                ),
                node_id,
            )
            return
        execution = self.executions[node_id] = self.executions.get(node_id, 0) + 1
        self._ended(node_id, await self.attempts.execute(node, execution))

    def _ended(self, node_id: str, ended: tuple[str, ...] | ActorError) -> None:
        """An execution of ``node_id`` ended: follow its targets, or end the run."""
        if isinstance(ended, tuple):
            self._follow(node_id, ended)
        elif ended.code is Code.CANCELLED:
            # The subtree's cancel (an abort, a shutdown: cancel() takes its reason when
            # there is one) — never the error's own text.
            self.interrupted[node_id] = None
            self.cancel(f"node {node_id!r} was cancelled")
        else:
            self.fail(ended, node_id)

    # -- what attempts report, and their commit (the RunSide protocol) --------------------

    async def progress(self, event: AttemptProgress) -> bool:
        """What an attempt reports (see :class:`~supervisors.runs.context.Reporter`):
        ``node:started`` once it begins (``False`` when the run is ending), durability
        before its work starts, ``tool:called`` for each tool call."""
        ctx = event.ctx
        if isinstance(event, AttemptBegan):
            if self.ending():
                return False
            ctx.started_at = trio.current_time()
            self.run.publish(
                NodeStarted,
                node_id=ctx.node_id,
                kind=ctx.node.kind,
                execution=ctx.execution,
                attempt=ctx.attempt,
            )
            return True
        if isinstance(event, WorkStarting):
            journaled = self.run.journaled
            if journaled is None:
                return True
            await journaled.settled()
            return not self.ending()
        self.run.publish(
            ToolCalled,
            node_id=ctx.node_id,
            tool=event.tool,
            index=event.index,
            key=event.key,
            code=event.code,
        )
        return True

    def commit(self, node: Node, outcome: Any) -> tuple[Mapping[str, Any], tuple[str, ...]]:
        """The updates and the next nodes of a successful attempt, once they may be
        written (the node's ``writes``, and a journal's check that they can be journalled
        exactly); raises the :class:`~actors.ActorError` that refuses them."""
        updates, targets = self._outcome(node, outcome)
        journaled = self.run.journaled
        if updates and journaled is not None:
            journaled.check(node.id, updates)
        return updates, targets

    def _outcome(self, node: Node, outcome: Any) -> tuple[Mapping[str, Any], tuple[str, ...]]:
        """The updates and the next nodes of a successful attempt (see
        :func:`~supervisors.runs.commit.outcome_of`)."""
        return outcome_of(self.plan, self.run.state, node, outcome)
