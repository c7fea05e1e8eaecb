"""One node execution: its attempts on the run's node runners, and what its outcome means.

:class:`NodeAttempts` runs the attempts of one execution of a node until one ends it, and
answers the engine how it ended; the engine (:mod:`supervisors.runs.engine`) owns the run
and decides what that means for it (which nodes follow, or how the run ends). The rules:

* **One attempt.** The node's breaker admits it, then it runs on a node runner (an
  approval waits for its decision in the engine's task instead), then its outcome is
  committed (:meth:`RunSide.commit`) — all inside one
  :func:`~supervisors.resilience.attempt.attempt`, so the breaker's verdict is the
  commit's too. The attempt tells its run how it goes through one typed callback
  (:meth:`~supervisors.runs.context.Reporter.progress`). Nothing starts before what led to
  it is durable, and nothing starts, and no outcome counts, once the run is ending.
* **A node's outcome.** Success: the updates are checked against the node's ``writes``
  (``permission_denied``, fatal, nothing written), the conditions of its edges are
  evaluated on the new state, then the state changes and ``node:completed`` lists what
  follows. Failure: a ``retryable`` error that is not a limit is retried by the node's
  :class:`~supervisors.runs.graph.NodeRetry` (``node:retrying``); then ``node:failed``,
  and the run goes on along the edges that handle the code, or ends ``run:failed``. An
  open breaker skips the node (``node:skipped``), handled like ``circuit_open``.
* **The answer.** The targets to follow (a tuple of node ids), or the error that ends the
  run — ``cancelled`` when the subtree's cancel caught the node (the run is cancelled).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import trio

from actors import ActorError, Code, normalize
from actors.events import NodeCompleted, NodeFailed, NodeRetrying, NodeSkipped
from actors.nodes import NodeCall
from supervisors.resilience.attempt import Replied, TurnedAway
from supervisors.resilience.attempt import attempt as attempt_once
from supervisors.runs.context import AttemptBegan, NodeContext, Reporter
from supervisors.runs.graph import UNHANDLED, Approval, Node
from supervisors.runs.kinds import run_attempt
from supervisors.runs.run import shown
from supervisors.runs.values import ReadOnlyMapping

if TYPE_CHECKING:
    from supervisors.pool import ProviderPool
    from supervisors.resilience.breaker import Breaker
    from supervisors.resilience.budget import Budget
    from supervisors.runs.plan import Plan
    from supervisors.runs.run import Run
    from supervisors.tools import Tools
    from supervisors.tools.entry import Workers


class RunSide(Reporter, Protocol):
    """What a node's attempts need of their run (the engine implements it)."""

    run: Run
    plan: Plan
    budget: Budget
    #: The nodes a cancel caught in flight, in the order they saw it.
    interrupted: dict[str, None]
    #: The reason the run's subtree is being cancelled (an abort, a shutdown), if it is.
    subtree_cancel: Callable[[], str | None]

    def commit(self, node: Node, outcome: Any) -> tuple[Mapping[str, Any], tuple[str, ...]]:
        """The updates and the next nodes of a successful attempt, once they may be
        written; raises the :class:`~actors.ActorError` that refuses them."""


class NodeAttempts:
    """The attempts of a run's node executions (see the module docstring)."""

    def __init__(
        self,
        owner: RunSide,
        *,
        runners: Workers,
        pools: Mapping[str, ProviderPool],
        tools: Mapping[str, Tools],
        breaker_of: Callable[[str, Node], Breaker | None],
    ) -> None:
        self.owner = owner
        self.runners = runners
        self.pools = pools
        self.tools = tools
        self.breaker_of = breaker_of

    async def execute(
        self, node: Node, execution: int, first_attempt: int = 1
    ) -> tuple[str, ...] | ActorError:
        """Run ``execution`` of ``node`` from ``first_attempt`` until an attempt ends it:
        the targets to follow, or the error that ends the run (``cancelled``: the run is
        cancelled). A cancel of the run propagates as ``trio.Cancelled``."""
        owner = self.owner
        run, plan = owner.run, owner.plan
        node_id = node.id
        first: float | None = None  # when the execution's first attempt began
        breaker = self.breaker_of(plan.name, node) if node.breaker is not None else None
        attempt = first_attempt - 1
        journaled = run.journaled
        while True:
            attempt += 1
            if journaled is not None:  # nothing starts before what led to it is durable
                await journaled.settled()
            # Nothing starts, and no outcome counts, once the run is ending: a cancel (or
            # the run's failure, or its deadline) that came in the same instant wins.
            await trio.lowlevel.checkpoint_if_cancelled()
            ctx = self._context(node, execution, attempt)
            try:  # the node breaker's admission, the call, its verdict (no limiter, no budget:
                # the node's own provider calls charge the run's budget)
                ended = await attempt_once(
                    self._attempt_committed(node, ctx), provider=node_id, breaker=breaker
                )
            except BaseException:
                if ctx.started_at is not None:  # a node still queued for a runner never ran
                    owner.interrupted[node_id] = None
                raise
            if type(ended) is TurnedAway:
                return self._skipped(node_id, ended.error)
            if first is None:
                first = ctx.started_at
            if type(ended) is Replied:
                updates, targets = ended.value
                if updates:
                    run.state = {**run.state, **updates}
                run.publish(
                    NodeCompleted,
                    node_id=node_id,
                    execution=execution,
                    attempt=attempt,
                    updates=updates,
                    next=targets,
                    duration=0.0 if first is None else trio.current_time() - first,
                )
                return targets  # type: ignore[no-any-return]
            error: ActorError = ended.error  # type: ignore[union-attr]
            if error.code is Code.CANCELLED:
                return error  # the subtree's cancel (an abort, a shutdown): the engine's
            retry = node.retry
            if error.retryable and error.code not in UNHANDLED and attempt <= retry.max_retries:
                delay = retry.backoff.delay(attempt - 1, retry_after=error.retry_after)
                run.publish(
                    NodeRetrying,
                    **shown(error),
                    node_id=node_id,
                    execution=execution,
                    attempt=attempt,
                    delay=delay,
                )
                run.detail(node_id, error)
                await trio.sleep(delay)
                continue
            targets = plan.handlers(node_id, error.code)
            run.publish(
                NodeFailed,
                **shown(error),
                node_id=node_id,
                execution=execution,
                attempt=attempt,
                handled=bool(targets),
                next=targets,
            )
            run.detail(node_id, error)
            return targets if targets else error

    def _skipped(self, node_id: str, error: ActorError) -> tuple[str, ...] | ActorError:
        targets = self.owner.plan.handlers(node_id, Code.CIRCUIT_OPEN)
        self.owner.run.publish(
            NodeSkipped,
            node_id=node_id,
            code=str(error.code),
            message=error.user_message,
            next=targets,
        )
        if targets:
            return targets
        error.node_id = node_id
        return error

    def _context(self, node: Node, execution: int, attempt: int) -> NodeContext:
        owner = self.owner
        return NodeContext(
            run_id=owner.run.run_id,
            node=node,
            execution=execution,
            attempt=attempt,
            state=ReadOnlyMapping(owner.run.state),
            budget=owner.budget,
            pool=self.pools.get(getattr(node, "pool", "")),
            tools=self.tools.get(getattr(node, "tools", "")),
            reporter=owner,
            checker=owner.plan.checkers.get(node.id),
        )

    async def _attempt(self, node: Node, ctx: NodeContext) -> Any:
        """One attempt: its updates (or pick), or its error as a value. A cancel of this
        run propagates as ``trio.Cancelled``; a failure while the subtree is being
        cancelled (an abort, a shutdown) is that cancel."""
        if isinstance(node, Approval):
            await self.owner.progress(AttemptBegan(ctx))
            return await self.owner.run.wait_approval(node)
        value, failure = await self.runners.send(NodeCall(run_attempt, ctx, node.id, node.timeout))
        if failure is not None:
            value = normalize(failure)
        if isinstance(value, ActorError) and value.code is not Code.CANCELLED:
            reason = self.owner.subtree_cancel()
            if reason is not None:
                return ActorError.from_code(Code.CANCELLED, reason, cause=value)
        return value

    async def _attempt_committed(self, node: Node, ctx: NodeContext) -> Any:
        """One attempt and its commit: ``(updates, targets)`` of a success whose updates
        may be written, else the error as a value (the attempt's, or the commit's
        refusal) — so that the node breaker's verdict is the commit's too. Nothing starts,
        and no outcome counts, once the run is ending: a cancel that came in the same
        instant wins (``trio.Cancelled``)."""
        outcome = await self._attempt(node, ctx)
        await trio.lowlevel.checkpoint_if_cancelled()
        if isinstance(outcome, ActorError):
            return outcome
        try:
            return self.owner.commit(node, outcome)
        except ActorError as refused:
            return refused
