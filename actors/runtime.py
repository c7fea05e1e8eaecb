"""The runtime: one nursery of actor slots, their registry, dead letters and call timer.

::

    async with open_runtime() as runtime:
        ref = await runtime.spawn(Echo, name="echo")
        assert await ref.call("hi") == "hi"

Leaving the block stops every actor gracefully (each finishes its in-flight message;
queued calls fail with ``actor_stopped``, queued casts become dead letters), waiting at
most ``shutdown_timeout`` seconds before cancelling what is left.

The restart rule here is minimal — a slot restarts a crashed instance up to
``max_restarts`` times over its life, at once. Supervisor trees (:mod:`supervisors`)
replace it with OTP strategies, intensity windows, backoff and directives by error class.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from actors.actor import DEFAULT_SHUTDOWN_TIMEOUT, Actor, ActorRef, CellState, seconds
from actors.cell import ActorCell, Supervision
from actors.cleanup import DEFAULT_CLEANUP_BUDGET
from actors.deadletters import DeadLetters
from actors.errors import ActorError, Code, cancel_in_effect
from actors.events import ActorCrashed, ActorRestarting
from actors.exits import AfterCrash
from actors.mailbox import DEFAULT_CAPACITY, Envelope, Mailbox, Overflow
from actors.nursery import open_nursery_unwrapped, run_to_completion
from actors.observe import emit
from actors.registry import Registry
from actors.timer import DeadlineTimer


class MinimalRestarts:
    """The runtime's own rule: restart a crashed instance at once, ``max_restarts`` times.

    No intensity window, no backoff, no strategies: supervisor trees do that.
    """

    def __init__(self, runtime: Runtime, max_restarts: int) -> None:
        self.runtime = runtime
        self.max_restarts = max_restarts

    def after_crash(self, cell: ActorCell, error: ActorError) -> AfterCrash:
        if self.runtime.cancel_reason is not None:
            return AfterCrash.STOP  # a cancel is under way: nothing restarts
        if error.code is Code.CANCELLED:
            return AfterCrash.RESUME  # a cancellation from elsewhere (a nested call)
        emit(ActorCrashed(actor=cell.path, error=error, restarts=cell.restarts))
        if cell.restarts < self.max_restarts and cell.accepting:
            cell.restarts += 1
            return AfterCrash.RESTART
        return AfterCrash.STOP

    def cancel_reason(self) -> str | None:
        return self.runtime.cancel_reason

    def note_cancel(self, reason: str) -> str:
        return self.runtime.note_cancel(reason)

    def terminating(self, cell: ActorCell) -> None:
        """Nothing to do: the cell no longer accepts, so it is not restarted."""

    async def stop_child(self, cell: ActorCell, reason: str, timeout: float | None) -> None:
        await stop_cell(cell, reason, timeout, nursery=self.runtime.nursery)


async def stop_cell(
    cell: ActorCell, reason: str, timeout: float | None, *, nursery: trio.Nursery
) -> None:
    """Stop ``cell`` for good: refuse new messages, end the incarnation, wait until closed.

    After ``timeout`` seconds the incarnation is cancelled with reason ``shutdown:<name>``.
    The stop runs in ``nursery`` (the runtime's): once begun it completes even if the
    task that asked for it is cancelled (that task leaves at once; the stop goes on).
    """
    if cell.state is CellState.STOPPED:
        await trio.lowlevel.checkpoint()
        return
    cell.stop_accepting()
    cell.request_exit(reason)
    await run_to_completion(nursery, _stop_cell, cell, timeout)


async def _stop_cell(cell: ActorCell, timeout: float | None) -> None:
    if timeout is None:
        await cell.wait_stopped()
        return
    with trio.move_on_after(timeout):
        await cell.wait_stopped()
    if cell.state is not CellState.STOPPED:
        cell.kill(f"shutdown:{cell.name}")
        await cell.wait_stopped()


class Runtime:
    """Owns actor slots, their registry, dead letters and the call timer.

    Create it with :func:`open_runtime`. It is the :class:`~actors.cell.CellHost` of
    every slot it creates.
    """

    def __init__(self, nursery: trio.Nursery, *, name: str = "root") -> None:
        self.name = name
        self.registry = Registry()
        self.dead_letters = DeadLetters()
        self.timer = DeadlineTimer(_expire)
        self.nursery = nursery
        self._cells: dict[ActorCell, None] = {}
        self._counter = itertools.count(1)
        self._all_stopped: trio.Event | None = None
        self.closing = False
        #: Set when a trio scope around the runtime was cancelled (see :meth:`note_cancel`).
        self.cancel_reason: str | None = None

    def note_cancel(self, reason: str) -> str:
        """A scope around the runtime was cancelled: from now on every caller caught in
        flight or in a queue gets ``cancelled`` with ``reason`` (the first one noted,
        which is returned)."""
        if self.cancel_reason is None:
            self.cancel_reason = reason
        return self.cancel_reason

    def __len__(self) -> int:
        """Actor slots that have not been closed."""
        return len(self._cells)

    def new_cell(
        self,
        factory: Callable[[], Actor],
        *,
        supervision: Supervision,
        name: str | None = None,
        path: str | None = None,
        capacity: int = DEFAULT_CAPACITY,
        overflow: Overflow = "backpressure",
        cleanup_budget: float = DEFAULT_CLEANUP_BUDGET,
    ) -> ActorCell:
        """Create and register a slot; whoever runs its incarnations must ``close`` it."""
        if self.closing:
            raise ActorError.from_code(
                Code.ACTOR_STOPPED, f"runtime {self.name} is closing", delivered=False
            )
        if name is None:
            base = getattr(factory, "__name__", "actor")
            name = f"{base}-{next(self._counter)}"
        cell = ActorCell(
            self,
            factory,
            name=name,
            path=path or f"/{self.name}/{name}",
            mailbox=Mailbox(capacity, overflow),
            supervision=supervision,
            cleanup_budget=cleanup_budget,
        )
        self.registry.register(name, cell.ref)
        self._cells[cell] = None
        return cell

    def revive_cell(self, cell: ActorCell) -> None:
        """Register a closed slot again (:meth:`ActorCell.revive`)."""
        if self.closing:
            raise ActorError.from_code(
                Code.ACTOR_STOPPED, f"runtime {self.name} is closing", delivered=False
            )
        self.registry.register(cell.name, cell.ref)
        self._cells[cell] = None

    async def spawn(
        self,
        factory: Callable[[], Actor],
        *,
        name: str | None = None,
        capacity: int = DEFAULT_CAPACITY,
        overflow: Overflow = "backpressure",
        max_restarts: int = 0,
        cleanup_budget: float = DEFAULT_CLEANUP_BUDGET,
    ) -> ActorRef:
        """Start an unsupervised actor built by ``factory`` (a class or zero-arg callable).

        Returns once its ``on_start`` has returned. If ``on_start`` raises, this raises the
        typed error and the slot is gone (its name is free again). A crashed instance is
        restarted at once, up to ``max_restarts`` times over the slot's life.

        Bad arguments fail with ``config_invalid`` naming the argument before anything
        starts: ``name`` a non-empty string (or ``None``), ``max_restarts`` an int >= 0,
        ``cleanup_budget`` a number of seconds >= 0 (``capacity`` / ``overflow``: see
        :class:`~actors.mailbox.Mailbox`).
        """
        _check_spawn(name, max_restarts, cleanup_budget)
        cell = self.new_cell(
            factory,
            supervision=MinimalRestarts(self, max_restarts),
            name=name,
            capacity=capacity,
            overflow=overflow,
            cleanup_budget=cleanup_budget,
        )
        if (
            isinstance(factory, type)
            and issubclass(factory, Actor)
            and factory.on_start is Actor.on_start
        ):
            # No on_start to wait for: the actor counts as started as soon as its task
            # runs, and messages sent meanwhile wait in its mailbox. The instance is
            # built here, so a raising constructor fails this spawn and nothing else.
            try:
                cell.prebuilt = cell.build()
            except BaseException:
                cell.close("start_failed")
                raise
            self.nursery.start_soon(_run_minimal, cell, True, name=cell.path)
            return cell.ref
        ref: ActorRef = await self.nursery.start(_run_minimal, cell, False, name=cell.path)
        return ref

    def whereis(self, name: str) -> ActorRef | None:
        """The ref registered under ``name``, or ``None``."""
        return self.registry.whereis(name)

    async def call(self, name: str, message: Any, **options: Any) -> Any:
        """Call the actor registered as ``name``; an unknown name fails with
        ``actor_stopped`` (``delivered=False``) at once."""
        ref = self.registry.whereis(name)
        if ref is None:
            raise ActorError.from_code(
                Code.ACTOR_STOPPED, f"no actor named {name!r}", delivered=False
            )
        return await ref.call(message, **options)

    def cell_finished(self, cell: ActorCell) -> None:
        """Called by a slot when it is closed."""
        self._cells.pop(cell, None)
        self.registry.unregister(cell.name, cell.ref)
        if not self._cells and self._all_stopped is not None:
            self._all_stopped.set()

    async def shutdown(self, *, timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> None:
        """Stop every actor gracefully; cancel those still running after ``timeout``."""
        self.closing = True
        for cell in list(self._cells):
            cell.stop_accepting()
            cell.request_exit("shutdown")
        if not self._cells:
            return
        self._all_stopped = trio.Event()
        with trio.move_on_after(timeout):
            await self._all_stopped.wait()
        for cell in list(self._cells):
            cell.kill(f"shutdown:{cell.name}")
        if self._cells:
            await self._all_stopped.wait()


async def _run_minimal(
    cell: ActorCell,
    spawned: bool,
    *,
    task_status: trio.TaskStatus[ActorRef] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Incarnations of an unsupervised cell until one is not restarted; then close it.

    ``spawned``: the spawner did not wait for the start (no ``on_start``), so a start
    that fails (a kill before it) ends only this cell, never the runtime's nursery.
    """
    supervision = cell.supervision
    reason = "normal"
    try:
        try:
            exit_ = await cell.run_incarnation(task_status=task_status)
        except ActorError as err:
            if not spawned:
                raise  # to the spawner, through nursery.start
            reason = f"start_failed:{err.code}"
            return
        reason = exit_.reason
        # A stop requested meanwhile (refusing new messages) cancels a decided restart.
        while exit_.after is AfterCrash.RESTART and cell.accepting:
            if cell.restarts:
                _log_restarting(cell)
            try:
                exit_ = await cell.run_incarnation()
                reason = exit_.reason
            except ActorError as err:
                # A start that raises during a restart counts as a failure (no endless loop).
                reason = f"start_failed:{err.code}"
                if supervision.after_crash(cell, err) is not AfterCrash.RESTART:
                    break
    finally:
        cell.close(reason)


def _check_spawn(name: object, max_restarts: object, cleanup_budget: object) -> None:
    problems = []
    if name is not None and (not isinstance(name, str) or not name):
        problems.append(f"name must be a non-empty string or None, got {type(name).__name__}")
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
        problems.append(f"max_restarts must be an int >= 0, got {max_restarts!r:.40}")
    try:
        seconds(cleanup_budget)
    except ActorError:
        problems.append(
            f"cleanup_budget must be a number of seconds >= 0, got {cleanup_budget!r:.40}"
        )
    if problems:
        raise ActorError.from_code(
            Code.CONFIG_INVALID, "invalid spawn: " + "; ".join(problems), delivered=False
        )


def _log_restarting(cell: ActorCell) -> None:
    emit(ActorRestarting(actor=cell.path, restarts=cell.restarts))


def _expire(envelope: Envelope) -> None:
    cell = envelope.owner
    assert isinstance(cell, ActorCell)
    cell.expire(envelope)


@asynccontextmanager
async def open_runtime(
    *, name: str = "root", shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
) -> AsyncIterator[Runtime]:
    """Open a runtime; on exit, shut every actor down (shielded, bounded by the timeout).

    An exception raised in the block comes out as raised (not in an exception group).
    """
    async with open_nursery_unwrapped() as nursery:
        runtime = Runtime(nursery, name=name)
        nursery.start_soon(runtime.timer.run, name=f"/{name}:timer")
        try:
            yield runtime
        finally:
            # Leaving because a scope around the runtime was cancelled: noted before the
            # shutdown answers anyone, so every caller gets ``cancelled`` with its reason.
            reason = await cancel_in_effect()
            if reason is not None:
                runtime.note_cancel(reason)
            with trio.CancelScope(shield=True):
                await runtime.shutdown(timeout=shutdown_timeout)
            nursery.cancel_scope.cancel(reason=f"runtime {name} closed")
