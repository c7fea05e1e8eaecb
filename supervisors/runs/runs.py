"""Starting runs under a tree: :func:`open_runs` and :class:`Runs`.

``async with open_runs(tree, pools={"default": pool}, tools={"default": tools}) as
runs:`` adds a ``runs`` supervisor to the tree (a dynamic child of ``under``, default
the root). Each run is a supervisor under it — a temporary child named by the run id —
over its node runners, and its engine runs in a task of the block. So:

* many runs run at once; a run that fails, or whose runners crash past their restart
  intensity, ends alone, and its supervisor is removed when it ends (no zombie run);
* leaving the block cancels the runs still running (reason ``"runs closed"``, or the
  reason of a cancel of the scope around it) and waits for each to publish its
  terminal record; an abort of the tree cancels them with the abort's reason;
* a workflow that fails validation never starts: its run publishes one ``run:failed``
  (``node_config`` or ``unsupported_node_type``) and ends.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from actors import ActorError, Code
from actors.journal import RunHeader, dumps
from actors.lowlevel import cancel_in_effect, open_nursery_unwrapped
from supervisors.pool import ProviderPool
from supervisors.resilience.budget import Budget, BudgetLimits, Price
from supervisors.runs.graph import Workflow
from supervisors.runs.journal.journal import Journal
from supervisors.runs.journaled import RunJournal, definition_of, limits_json
from supervisors.runs.launch import Launcher, terminate
from supervisors.runs.plan import inputs_of
from supervisors.runs.progress import Progress
from supervisors.runs.resume import adopt_forever, resume_run, resume_unfinished
from supervisors.runs.run import Run, RunOutcome
from supervisors.runs.shutdown import Shutdown, ShutdownSummary, checked, shut_down
from supervisors.tools import Tools
from supervisors.tree import Tree
from supervisors.tree.policy import STOP_ON_ANY_CRASH
from supervisors.tree.spec import ChildSpec, SupervisorSpec
from supervisors.tree.supervisor import Supervisor

_IDS = itertools.count(1)


@asynccontextmanager
async def open_runs(
    tree: Tree | Supervisor,
    *,
    pools: Mapping[str, ProviderPool] | ProviderPool | None = None,
    tools: Mapping[str, Tools] | Tools | None = None,
    prices: Mapping[tuple[str, str], Price] | None = None,
    name: str = "runs",
    runners: int = 1,
    journal: Journal | None = None,
    workflows: Iterable[Workflow] = (),
    resume: bool = True,
) -> AsyncIterator[Runs]:
    """Runs under ``tree`` for the duration of the block (see the module docstring).

    ``pools`` and ``tools``: by name (a single value is named ``"default"``), as nodes
    name them. ``prices``: for the cost of attempts whose provider reports none.
    ``runners``: node runners per run (a fan-out wider than that queues).
    ``journal``: every run's records are journalled (docs/journal.md); with ``resume``
    every unfinished run of the journal is resumed on entry (``runs.resumed``), its
    workflow found by name among ``workflows`` — a run that cannot be resumed (a
    corrupt log, an unknown or changed workflow) is reported as ``run.not_resumed``
    and left alone.
    """
    if isinstance(tree, Tree):
        parent = tree.root
    elif isinstance(tree, Supervisor):
        parent = tree
    else:
        raise _config("tree", "a Tree or a Supervisor", tree)
    if type(runners) is not int or not 1 <= runners <= MAX_RUNNERS:
        raise _config("runners", f"an int from 1 to {MAX_RUNNERS}", runners)
    named_pools, named_tools = _named(pools, ProviderPool), _named(tools, Tools)
    price_table = _prices(prices)
    if journal is not None and not isinstance(journal, Journal):
        raise _config("journal", "a Journal or None", journal)
    known = _workflows(workflows)
    await parent.start_child(
        ChildSpec(
            id=name,
            supervisor=SupervisorSpec(max_restarts=0, policy=STOP_ON_ANY_CRASH),
            restart="temporary",
        )
    )
    runs = Runs(parent.child(name), named_pools, named_tools, price_table, runners)
    runs.journal = journal
    runs.workflows = known
    try:
        async with open_nursery_unwrapped() as nursery:
            runs.launcher.nursery = nursery
            try:
                if journal is not None and resume:
                    await runs._resume_unfinished()
                    if journal.leases is not None:
                        nursery.start_soon(adopt_forever, runs, journal.leases, runs._adopting)
                yield runs
            finally:
                # The tree's own cancel (an abort) first, then a cancel of a scope around.
                reason = runs.supervisor.cancel_reason() or await cancel_in_effect()
                runs.close(reason or "runs closed")
    finally:
        with trio.CancelScope(shield=True):
            await terminate(parent, name, "runs closed")


#: The most node runners a run may have (each is an actor; a wider fan-out queues).
MAX_RUNNERS = 64


def _config(field: str, expected: str, value: Any) -> ActorError:
    return ActorError.from_code(
        Code.CONFIG_INVALID, f"open_runs: {field} must be {expected}, got {type(value).__name__}"
    )


def _prices(value: Any) -> dict[tuple[str, str], Price]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(key, tuple) and len(key) == 2 and isinstance(price, Price)
        for key, price in value.items()
    ):
        raise _config("prices", "a mapping of (provider, model) to Price", value)
    return dict(value)


def _workflows(value: Any) -> dict[str, Workflow]:
    try:
        listed = list(value)
    except TypeError:
        listed = None
    if listed is None or not all(isinstance(w, Workflow) for w in listed):
        raise _config("workflows", "an iterable of Workflow", value)
    known: dict[str, Workflow] = {}
    for workflow in listed:
        if workflow.name in known and known[workflow.name] is not workflow:
            raise ActorError.from_code(
                Code.CONFIG_INVALID, f"open_runs: two workflows are named {workflow.name!r}"
            )
        known[workflow.name] = workflow
    return known


def _named(value: Any, kind: type) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, kind):
        return {"default": value}
    if not isinstance(value, Mapping) or not all(
        type(k) is str and isinstance(v, kind) for k, v in value.items()
    ):
        raise _config(
            f"{kind.__name__} values", f"a {kind.__name__} or a mapping of names to them", value
        )
    return dict(value)


class Runs:
    """Starts runs and keeps the live ones (see the module docstring)."""

    def __init__(
        self,
        supervisor: Supervisor,
        pools: dict[str, ProviderPool],
        tools: dict[str, Tools],
        prices: Mapping[tuple[str, str], Price] | None,
        runners: int,
    ) -> None:
        self.supervisor = supervisor
        self.pools = pools
        self.tools = tools
        self.prices = dict(prices or {})
        self.runners = runners
        #: Starts and drives the runs (the one place a run is launched).
        self.launcher = Launcher(supervisor, pools, tools, runners)
        #: The live runs, by id.
        self.live: dict[str, Run] = self.launcher.live
        #: The journal every run is written to (``None``: none).
        self.journal: Journal | None = None
        #: The workflows a resumed run is looked up in, by name.
        self.workflows: dict[str, Workflow] = {}
        #: The runs resumed from the journal: on entry, then (on a store with leases)
        #: those taken over from daemons that died.
        self.resumed: tuple[Run, ...] = ()
        self.not_resumed: set[str] = set()
        self._adopting = trio.CancelScope()  # the take-over loop (a store with leases)
        self._shutdown: Shutdown | None = None

    async def start(
        self,
        workflow: Workflow,
        inputs: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        limits: BudgetLimits | None = None,
    ) -> Run:
        """Start a run of ``workflow`` with ``inputs`` as its initial state; returns the
        :class:`Run` as soon as it is going — with a journal, once its ``run:started`` is
        durable (one group commit): a crash after ``start`` returned leaves the run in
        the journal, to be resumed, never lost. Bad arguments (not a workflow, inputs that are not a
        mapping with string keys, a run id in use or with a ``/``) raise
        ``input_validation`` and start nothing; a workflow that fails validation gives a
        run that has already ended with ``run:failed``. A caller cancelled while
        ``start`` runs gets ``trio.Cancelled`` and the run it never got is cancelled with
        the cancel's reason: no run is left behind."""
        if not isinstance(workflow, Workflow):
            raise _bad("workflow", "a Workflow", workflow)
        state = inputs_of(inputs)
        if state is None:
            raise _bad("inputs", "a mapping with string keys and no cycle, or None", inputs)
        if limits is None:
            limits = BudgetLimits()
        elif not isinstance(limits, BudgetLimits):
            raise _bad("limits", "a BudgetLimits or None", limits)
        journal = self.journal
        if run_id is None:
            # With a journal, ids must not repeat across restarts of the daemon.
            run_id = f"run-{next(_IDS)}" if journal is None else f"run-{uuid.uuid4().hex[:16]}"
        elif type(run_id) is not str or not run_id or "/" in run_id or not run_id.isprintable():
            raise _bad("run_id", "a non-empty printable string without '/'", run_id)
        if run_id in self.live:
            raise ActorError.from_code(Code.NAME_TAKEN, f"run {run_id!r} is running")
        if self.launcher.closing is not None or self.launcher.nursery is None:
            raise ActorError.from_code(Code.ACTOR_STOPPED, "the runs are closed")
        if journal is not None:
            if journal.closed:
                raise ActorError.from_code(Code.ACTOR_STOPPED, "the runs' journal is closed")
            try:
                dumps(state)
            except (TypeError, ValueError, RecursionError) as exc:
                raise ActorError.from_code(
                    Code.INPUT_VALIDATION,
                    f"Runs.start: inputs must be JSON data with a journal ({exc})",
                    cause=exc,
                ) from exc
        run = Run(run_id, workflow.name, state)
        plan = self.launcher.plan(workflow)
        if isinstance(plan, ActorError):
            run.end_failed(plan, plan.node_id, duration=0.0, tokens=0, cost=0.0)
            run.settle()
            return run
        if journal is not None:
            row, entries, _ = await journal.read(journal.store.stored, run_id)
            if row is not None or entries:  # records without a row: a damaged run's
                raise ActorError.from_code(
                    Code.NAME_TAKEN, f"run {run_id!r} is in the journal already"
                )
            if run_id in self.live:  # started while the journal was read
                raise ActorError.from_code(Code.NAME_TAKEN, f"run {run_id!r} is running")
            header = RunHeader(
                run_id,
                workflow.name,
                dumps(definition_of(workflow)),
                limits_json(limits),
                run.wall_time,
            )
            journaled = RunJournal(run, journal, Progress(run_id, plan.start, plan.joins), header)
            run.journaled = journaled
        budget = Budget(
            run_id,
            limits,
            prices=self.prices,
            approve=run.approve_budget,
            on_event=run.budget_record,
        )
        if journal is not None:
            # One engine per run per journal, even across several open_runs blocks — and
            # per database, across daemons, on a store with leases.
            await journal.acquire(run_id)
        run = await self.launcher.launch(run, plan, budget, None)
        if run.journaled is not None:
            # Returned only once the run is in the journal: a daemon that acknowledges a
            # run and dies the next instant has it resumed, never lost.
            try:
                await run.journaled.begun()
            except trio.Cancelled:
                run.cancel(await cancel_in_effect() or "caller cancelled")
                raise
        return run

    async def run(
        self,
        workflow: Workflow,
        inputs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> RunOutcome:
        """Start a run and wait for its outcome. Cancelling the caller cancels the run
        (with the cancel's reason) and waits for it to end before ``trio.Cancelled``
        goes on."""
        run = await self.start(workflow, inputs, **options)
        try:
            with run.awaited():
                return await run.wait()
        except trio.Cancelled:
            run.cancel(await cancel_in_effect() or "caller cancelled")
            with trio.CancelScope(shield=True):
                await run.wait()
            raise

    async def resume(self, run_id: str, workflow: Workflow | None = None) -> Run:
        """Resume an unfinished run of the journal (docs/journal.md): completed nodes are
        not run again, executions in flight are run again with their idempotency keys,
        pending approvals wait again. ``workflow``: the run's workflow (default: the one
        of that name in ``open_runs(workflows=...)``). ``event_log_corrupt`` (the first
        bad ``seq`` named) when the journal cannot be trusted; ``config_invalid`` without
        a journal, or when the workflow is unknown or not the one the run started with;
        ``input_validation`` for an unknown or ended run; ``persistence_unavailable``
        when the journal cannot be written."""
        return await resume_run(self, run_id, workflow)

    async def _resume_unfinished(self) -> None:
        self.resumed = await resume_unfinished(self)

    @property
    def closed(self) -> bool:
        """No run starts any more (the block is being left)."""
        return self.launcher.closing is not None

    def get(self, run_id: str) -> Run | None:
        """The live run ``run_id``, or ``None`` (not started here, or ended)."""
        return self.live.get(run_id)

    def stop_intake(self, reason: str) -> None:
        """Start, resume and take over no more runs (``actor_stopped``)."""
        if self.launcher.closing is None:
            self.launcher.closing = reason
        self._adopting.cancel(reason=reason)

    def close(self, reason: str) -> None:
        """Start no more runs; cancel the live ones with ``reason``."""
        self.stop_intake(reason)
        for run in list(self.live.values()):
            run.cancel(reason)

    async def shutdown(self, reason: str = "shutdown", grace: float = 30.0) -> ShutdownSummary:
        """Shut the runs down gracefully (``supervisors/runs/shutdown.py``): intake stops,
        the live runs get ``grace`` seconds (``math.inf``: no limit) to end, then those
        still running are cancelled with ``reason`` as *resumable* — with a journal they
        stay unfinished there and the next daemon resumes them. A second call shortens the
        grace of the one under way (``grace=0``: now) and returns the same summary.
        ``input_validation`` for an empty reason or a negative or NaN grace."""
        reason, grace = checked(reason, grace)
        if self._shutdown is not None:
            return await self._shutdown.joined(grace)
        self._shutdown = Shutdown(grace)
        return await shut_down(self, self._shutdown, reason)


def _bad(field: str, expected: str, value: Any) -> ActorError:
    return ActorError.from_code(
        Code.INPUT_VALIDATION, f"Runs.start: {field} must be {expected}, got {type(value).__name__}"
    )
