"""Launching runs: each run's supervisor, its engine, and the live runs.

:class:`Launcher` is the one place a run starts driving — a new run
(:meth:`Runs.start <supervisors.runs.Runs.start>`) and a resumed one
(:mod:`supervisors.runs.resume`) alike: it compiles the workflow (cached), starts the
run's supervisor over its node runners as a temporary child of the runs supervisor,
makes the engine, hands the run its cancel, and drives the engine in a task of the
runs' nursery until the run ends — then removes the supervisor, waits for the terminal
record to be durable and gives the run back on its journal.
"""

from __future__ import annotations

import trio

from actors import ActorError, Code
from actors.lowlevel import cancel_in_effect
from actors.nodes import NodeRunner
from supervisors.pool import ProviderPool
from supervisors.resilience.breaker import Breaker, BreakerConfig
from supervisors.resilience.budget import Budget
from supervisors.runs.engine import Engine
from supervisors.runs.graph import Node, Workflow
from supervisors.runs.plan import Plan
from supervisors.runs.progress import Progress
from supervisors.runs.run import Run
from supervisors.tools import Tools
from supervisors.tools.entry import Workers
from supervisors.tree.policy import RESTART_ON_ANY_CRASH
from supervisors.tree.spec import ChildSpec, SupervisorSpec
from supervisors.tree.supervisor import Supervisor

#: Compiled workflows kept (workflows made on the fly: the cache stays bounded).
PLANS_KEPT = 256


class Launcher:
    """Starts and drives the runs of one :class:`~supervisors.runs.Runs` (see the module
    docstring). ``live``: the runs being driven, by id. ``nursery``: where their engines
    run (set while the runs' block is open). ``closing``: the reason intake stopped
    (``None`` while runs may start)."""

    def __init__(
        self,
        supervisor: Supervisor,
        pools: dict[str, ProviderPool],
        tools: dict[str, Tools],
        runners: int,
    ) -> None:
        self.supervisor = supervisor
        self.pools = pools
        self.tools = tools
        self.runners = runners
        self.live: dict[str, Run] = {}
        self.nursery: trio.Nursery | None = None
        self.closing: str | None = None
        self._plans: dict[int, tuple[Workflow, Plan | ActorError]] = {}
        self._breakers: dict[tuple[str, str], Breaker] = {}
        self._pool_names = frozenset(pools)
        self._tool_names = frozenset(tools)

    def plan(self, workflow: Workflow) -> Plan | ActorError:
        """``workflow`` compiled for the engine, or the error that keeps it from running
        (``node_config``, ``unsupported_node_type``, …); cached per workflow object."""
        cached = self._plans.get(id(workflow))
        if cached is not None and cached[0] is workflow:
            return cached[1]
        problems = workflow.problems(pools=self._pool_names, tools=self._tool_names)
        plan: Plan | ActorError
        if problems:
            plan = problems[0]
        else:
            try:
                plan = Plan(workflow)
            except ActorError as error:
                plan = error
            except Exception as error:  # noqa: BLE001 - a value problems() let through
                plan = ActorError.from_code(
                    Code.NODE_CONFIG,
                    f"workflow {workflow.name!r}: {type(error).__name__}",
                    cause=error,
                )
        if len(self._plans) >= PLANS_KEPT:
            self._plans.clear()
        self._plans[id(workflow)] = (workflow, plan)
        return plan

    async def launch(self, run: Run, plan: Plan, budget: Budget, resume: Progress | None) -> Run:
        """Start the run's supervisor and its engine. A journalled run has been taken on
        its journal by the caller (:meth:`Journal.acquire
        <actors.journal.JournalWriter.acquire>`); if the launch fails, it is given back.
        ``actor_stopped`` when intake stopped meanwhile; a caller cancelled here gets
        ``trio.Cancelled`` and the run is cancelled with the cancel's reason."""
        run_id = run.run_id
        journaled = run.journaled
        if journaled is not None:
            journaled.budget = lambda: [budget.tokens, budget.cost, budget.turns]
        try:
            return await self._launch_claimed(run, plan, budget, resume)
        except BaseException:
            if journaled is not None and run_id not in self.live:
                journaled.journal.release(run_id)
            raise

    async def _launch_claimed(
        self, run: Run, plan: Plan, budget: Budget, resume: Progress | None
    ) -> Run:
        run_id = run.run_id
        nursery = self.nursery
        assert nursery is not None
        journaled = run.journaled
        spec = SupervisorSpec(
            children=[
                ChildSpec(
                    id=f"runner.{i}",
                    actor=NodeRunner,
                    shutdown="brutal",
                    policy=RESTART_ON_ANY_CRASH,
                )
                for i in range(self.runners)
            ],
        )
        # Starting the run supervisor and registering its engine happen whole: a caller
        # cancelled halfway would leave a run supervisor with no engine to end it. A
        # cancel that arrived meanwhile then cancels the run the caller never got.
        with trio.CancelScope(shield=True):
            await self.supervisor.start_child(
                ChildSpec(id=run_id, supervisor=spec, restart="temporary")
            )
            if self.closing is not None:  # closed while the supervisor started
                await terminate(self.supervisor, run_id, "runs closed")
                raise ActorError.from_code(Code.ACTOR_STOPPED, "the runs are closed")
            run_supervisor = self.supervisor.child(run_id)
            workers = Workers([run_supervisor.ref(f"runner.{i}") for i in range(self.runners)])
            engine = Engine(
                run,
                plan,
                budget=budget,
                runners=workers,
                pools=self.pools,
                tools=self.tools,
                breaker_of=self._breaker,
                # A cancel of the runs or above (an abort, a shutdown) — not the run
                # supervisor's own ending, which a crash past its intensity also is.
                cancel_reason=self.supervisor.cancel_reason,
                resume=resume,
                enclosing=nursery.cancel_scope,
            )
            if journaled is not None:
                journaled.on_halt = lambda error: engine.fail(error, None)
            self.live[run_id] = run
            run.drive(engine.cancel)
            nursery.start_soon(self._drive, engine)
        reason = await cancel_in_effect()
        if reason is not None:
            if resume is not None and journaled is not None:
                journaled.detach()  # a cancelled resume leaves the run resumable
            run.cancel(reason)
            await trio.lowlevel.checkpoint()  # raises the caller's Cancelled
        return run

    async def _drive(self, engine: Engine) -> None:
        run_id = engine.run.run_id
        try:
            await engine.drive()
        finally:
            del self.live[run_id]
            with trio.CancelScope(shield=True):
                await terminate(self.supervisor, run_id, f"run {engine.run.status}")
                journaled = engine.run.journaled
                if journaled is not None:  # the terminal record is durable
                    await journaled.settled()
                    if engine.resumable:  # a shutdown: the next daemon may take it now
                        await journaled.journal.give_back(run_id)
                    else:
                        journaled.journal.release(run_id)
            engine.run.settle()

    def _breaker(self, workflow: str, node: Node) -> Breaker:
        key = (workflow, node.id)
        breaker = self._breakers.get(key)
        if breaker is None:
            config = node.breaker
            assert config is not None
            breaker = Breaker(
                BreakerConfig(
                    failure_threshold=int(config.failures),
                    cooldowns={},
                    default_cooldown=float(config.cooldown),
                    early_probe=0.0,
                    permanent=frozenset(),
                    per_model=frozenset(),
                    ignored=frozenset(),
                )
            )
            self._breakers[key] = breaker
        return breaker


async def terminate(parent: Supervisor, child_id: str, reason: str) -> None:
    """Stop and forget a child; one already gone (its tree ended, someone terminated it,
    it gave up past its restart intensity) is fine."""
    try:
        await parent.terminate_child(child_id, reason=reason)
    except ActorError as error:
        if error.code is not Code.CHILD_NOT_FOUND:
            raise
