"""Resuming runs from the journal: :meth:`Runs.resume <supervisors.runs.Runs.resume>`
and the resume of every unfinished run when :func:`~supervisors.runs.open_runs` opens.

A resumed run is the same run: same id, its stream going on from the journal's last
record (``run:resumed`` first), its state, its ready nodes and joins as the records
left them. Completed nodes are never run again; an execution that was in flight is run
again with the same execution number — so the same idempotency key (``ctx.key``, and
the keys of its tool calls) — from the attempt it was at; an approval that was pending
waits again (one decided before the stop uses its decision). The budget goes on from
what the last checkpoint had used; the wall clock from the run time the journal
reached (the time the daemon was down does not count).
"""

from __future__ import annotations

from functools import partial
from typing import Protocol

import trio

from actors import ActorError, Code
from actors.events import JournalAdoptFailed, RunNotResumed
from actors.journal import corrupt, corrupt_seq, damage_of, readable_id, sound
from actors.lowlevel import emit
from supervisors.resilience.budget import Budget, Price
from supervisors.runs.graph import Workflow
from supervisors.runs.journal.journal import Journal
from supervisors.runs.journal.policy import Leases
from supervisors.runs.journaled import RunJournal, recovered
from supervisors.runs.launch import Launcher
from supervisors.runs.plan import Plan
from supervisors.runs.progress import Progress
from supervisors.runs.run import Run


class RunsToResume(Protocol):
    """What resuming needs of :class:`~supervisors.runs.Runs`."""

    journal: Journal | None
    live: dict[str, Run]
    workflows: dict[str, Workflow]
    prices: dict[tuple[str, str], Price]
    #: Runs reported as not resumable (not tried again by a later adoption).
    not_resumed: set[str]
    resumed: tuple[Run, ...]

    @property
    def closed(self) -> bool: ...

    #: Where a resumed run is compiled and launched, as a new one is.
    launcher: Launcher


async def resume_run(
    runs: RunsToResume, run_id: str, workflow: Workflow | None = None, *, listed: bool = False
) -> Run:
    """Resume ``run_id`` (see the module docstring). ``listed``: the journal itself listed
    it as unfinished (a run it then cannot find is damage, not a caller's mistake)."""
    journal = runs.journal
    if journal is None:
        raise ActorError.from_code(Code.CONFIG_INVALID, "Runs.resume: the runs have no journal")
    if type(run_id) is not str or not run_id:
        raise ActorError.from_code(Code.INPUT_VALIDATION, "Runs.resume: run_id must be a string")
    if workflow is not None and not isinstance(workflow, Workflow):
        raise ActorError.from_code(
            Code.INPUT_VALIDATION, "Runs.resume: workflow must be a Workflow or None"
        )
    if run_id in runs.live:
        raise ActorError.from_code(Code.NAME_TAKEN, f"run {run_id!r} is running")
    if runs.closed:
        raise ActorError.from_code(Code.ACTOR_STOPPED, "the runs are closed")
    # Taken first (on a store with leases, leased: another daemon that had it can no
    # longer write), then read: what is read is all there will be.
    await journal.acquire(run_id)
    try:
        run, plan, budget, progress = await _recover(runs, journal, run_id, workflow, listed)
    except BaseException:
        journal.release(run_id)
        raise
    return await runs.launcher.launch(run, plan, budget, progress)  # gives the run back if it fails


async def _recover(
    runs: RunsToResume, journal: Journal, run_id: str, workflow: Workflow | None, listed: bool
) -> tuple[Run, Plan, Budget, Progress]:
    """The run as its records left it, ready to launch (see :func:`resume_run`)."""
    await journal.flush()  # nothing of this run is still on its way to the store
    row, entries, checkpoint = await journal.read(journal.store.stored, run_id)
    if row is None and not entries:
        if listed:  # the listing and the run disagree: a damaged page or index
            raise corrupt(run_id, None, "listed as unfinished but not found")
        raise ActorError.from_code(
            Code.INPUT_VALIDATION, f"Runs.resume: no run {run_id!r} in the journal", run_id=run_id
        )
    records = sound(run_id, row, entries, checkpoint)  # the storage first: then the graph
    assert row is not None  # sound() refuses a run without one
    name = workflow.name if workflow is not None else row.workflow
    workflow = workflow or runs.workflows.get(name)
    if workflow is None:
        raise ActorError.from_code(
            Code.CONFIG_INVALID,
            f"run {run_id!r}: no workflow named {name!r} to resume it with "
            "(pass it to open_runs(workflows=...))",
            run_id=run_id,
        )
    plan = runs.launcher.plan(workflow)
    if isinstance(plan, ActorError):
        raise plan
    found = recovered(run_id, row, records, checkpoint, workflow, plan.start, plan.joins)
    progress = found.progress
    started = found.records[0]
    run = Run(run_id, workflow.name, dict(getattr(started, "inputs", {})))
    run.restore(
        found.records,
        seq=progress.seq,
        last_at=progress.last_at,
        decisions=progress.decisions,
        wall_time=found.row.started,
        state=progress.state,
    )
    run.journaled = RunJournal(run, journal, progress, None)
    budget = Budget(
        run_id,
        found.limits,
        prices=runs.prices,
        approve=run.approve_budget,
        on_event=run.budget_record,
    )
    budget.started_at = progress.started_at - run.at_offset
    tokens, cost, turns = progress.budget
    budget.tokens, budget.cost, budget.turns = int(tokens), float(cost), int(turns)
    return run, plan, budget, progress


async def resume_unfinished(runs: RunsToResume, *, thorough: bool = True) -> tuple[Run, ...]:
    """Resume every unfinished run of the journal; report those that cannot be.
    ``thorough`` (when the runs open): the runs are listed from their rows and their
    records both, so a run whose row was damaged or lost is reported, not dropped; the
    periodic look for runs to take over (:func:`adopt_forever`) lists by the rows only."""
    journal = runs.journal
    assert journal is not None
    resumed = []
    leases = journal.leases
    # On a store with leases: only the runs nobody holds (a live daemon renews its own).
    if leases is None:
        listing = await journal.read(journal.store.unfinished)
    else:
        listing = await journal.read(partial(leases.store.orphans, thorough=thorough))
    for run_id in listing:
        if run_id in runs.live or run_id in runs.not_resumed:
            continue
        try:
            resumed.append(await resume_run(runs, readable_id(run_id), listed=True))
        except Exception as exc:
            error = exc if isinstance(exc, ActorError) else damage_of(str(run_id), exc)
            if error.code is Code.PERSISTENCE_UNAVAILABLE or error.code is Code.ACTOR_STOPPED:
                raise
            if error.code is Code.EVENT_LOG_CORRUPT:  # a read of the file failed, say
                error = damage_of(str(run_id), error)
            if error.code is not Code.NAME_TAKEN:  # taken meanwhile: not for good
                runs.not_resumed.add(run_id)
            emit(
                RunNotResumed(
                    run_id=str(run_id),
                    code=str(error.code),
                    message=error.message,
                    seq=corrupt_seq(error),
                )
            )
    return tuple(resumed)


async def adopt_forever(runs: RunsToResume, leases: Leases, scope: trio.CancelScope) -> None:
    """On a store with leases: every half lease, take over (resume) the unfinished runs
    whose lease expired — their daemon died — until ``scope`` is cancelled (the runs
    close). A failure to look is reported (``journal.adopt_failed``) and tried again."""
    interval = leases.ttl / 2
    with scope:
        while True:
            await trio.sleep(interval)
            try:
                runs.resumed += await resume_unfinished(runs, thorough=False)
            except Exception as exc:  # noqa: BLE001 - reported; the next tick retries
                if isinstance(exc, ActorError) and exc.code is Code.ACTOR_STOPPED:
                    return  # the journal or the runs closed
                emit(
                    JournalAdoptFailed(
                        retry_in=interval, error=f"{type(exc).__name__}: {exc}"[:500]
                    )
                )
