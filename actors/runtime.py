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

from actors.actor import (
    DEFAULT_CLEANUP_BUDGET,
    DEFAULT_SHUTDOWN_TIMEOUT,
    Actor,
    ActorCell,
    ActorRef,
)
from actors.deadletters import DeadLetters
from actors.errors import ActorError, Code
from actors.mailbox import DEFAULT_CAPACITY, Envelope, Mailbox, Overflow
from actors.registry import Registry
from actors.timer import DeadlineTimer


class Runtime:
    """Owns actor slots. Create it with :func:`open_runtime`."""

    def __init__(self, nursery: trio.Nursery, *, name: str = "root") -> None:
        self.name = name
        self.registry = Registry()
        self.dead_letters = DeadLetters()
        self.timer = DeadlineTimer(_expire)
        self._nursery = nursery
        self._cells: dict[ActorCell, None] = {}
        self._counter = itertools.count(1)
        self._all_stopped: trio.Event | None = None
        self.closing = False

    def __len__(self) -> int:
        """Actor slots that have not finished."""
        return len(self._cells)

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
        """Start an actor built by ``factory`` (a class or any zero-argument callable).

        Returns once its ``on_start`` has returned. If ``on_start`` raises, this raises the
        typed error and the slot is gone (its name is free again).
        """
        if self.closing:
            raise ActorError.from_code(Code.ACTOR_STOPPED, f"runtime {self.name} is closing")
        if name is None:
            base = getattr(factory, "__name__", "actor")
            name = f"{base}-{next(self._counter)}"
        cell = ActorCell(
            self,
            factory,
            name=name,
            path=f"/{self.name}/{name}",
            mailbox=Mailbox(capacity, overflow),
            max_restarts=max_restarts,
            cleanup_budget=cleanup_budget,
        )
        self.registry.register(name, cell.ref)
        self._cells[cell] = None
        probe = factory if isinstance(factory, type) else None
        if probe is not None and issubclass(probe, Actor) and not _overrides_class(probe):
            # No on_start to wait for: the actor is started as soon as its task runs, and
            # messages sent meanwhile wait in its mailbox.
            self._nursery.start_soon(cell.run, name=cell.path)
            return cell.ref
        ref: ActorRef = await self._nursery.start(cell.run, name=cell.path)
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
        """Called by a slot when its task ends."""
        self._cells.pop(cell, None)
        self.registry.unregister(cell.name, cell.ref)
        if not self._cells and self._all_stopped is not None:
            self._all_stopped.set()

    async def shutdown(self, *, timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> None:
        """Stop every actor gracefully; cancel those still running after ``timeout``."""
        self.closing = True
        cells = list(self._cells)
        for cell in cells:
            cell.request_stop("shutdown")
        if not self._cells:
            return
        self._all_stopped = trio.Event()
        with trio.move_on_after(timeout):
            await self._all_stopped.wait()
        for cell in list(self._cells):
            cell.kill(f"shutdown:{cell.name}")
        if self._cells:
            await self._all_stopped.wait()


def _overrides_class(cls: type[Actor]) -> bool:
    return cls.on_start is not Actor.on_start


def _expire(envelope: Envelope) -> None:
    cell = envelope.owner
    assert isinstance(cell, ActorCell)
    cell.expire(envelope)


@asynccontextmanager
async def open_runtime(
    *, name: str = "root", shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
) -> AsyncIterator[Runtime]:
    """Open a runtime; on exit, shut every actor down (shielded, bounded by the timeout)."""
    async with trio.open_nursery() as nursery:
        runtime = Runtime(nursery, name=name)
        nursery.start_soon(runtime.timer.run, name=f"/{name}:timer")
        try:
            yield runtime
        finally:
            with trio.CancelScope(shield=True):
                await runtime.shutdown(timeout=shutdown_timeout)
            nursery.cancel_scope.cancel(reason=f"runtime {name} closed")
