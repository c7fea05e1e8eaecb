"""Carrying out a restart (OTP's ``do_restart``/``restart/2``): the siblings the strategy
names are stopped now, the group started again in order after the backoff delay — at
once in the supervisor's own task when there is none, else in a task of its nursery
that sleeps, then takes the supervisor's lock. A start that fails counts as a failure
of its own: it is settled by the policy like a crash, and its decision is carried out
in a task of its own (repeated start failures with no backoff would otherwise recurse,
bounded only by the intensity)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from actors import ActorError
from supervisors.tree.children import Child, Children, Status
from supervisors.tree.incarnation import Incarnations
from supervisors.tree.spec import Strategy
from supervisors.tree.strategy import RESTARTABLE


class Restarts:
    """The restarts of one supervisor. ``settle`` is the policy's decision on a failed
    start (:meth:`Decider.settle <supervisors.tree.decision.Decider.settle>`),
    ``carry_out`` the supervisor's way of carrying out a pending decision, ``nursery``
    its nursery while it runs; ``lock`` is the supervisor's (held by the caller of
    :meth:`restart`)."""

    def __init__(
        self,
        *,
        children: Children,
        strategy: Strategy,
        incarnations: Incarnations,
        settle: Callable[[Child, ActorError], object],
        lock: trio.Lock,
        nursery: Callable[[], trio.Nursery | None],
        carry_out: Callable[[Child], Awaitable[None]],
    ) -> None:
        self.children = children
        self.strategy = strategy
        self.incarnations = incarnations
        self.settle = settle
        self.lock = lock
        self.nursery = nursery
        self.carry_out = carry_out

    async def restart(self, child: Child, delay: float) -> None:
        """Restart per strategy: stop affected siblings now, start them after ``delay``."""
        siblings, group = self.children.restart_group(self.strategy, child)
        for sibling in siblings:
            if sibling.live:
                await sibling.stop(f"restart:{child.id}")
                if not RESTARTABLE[sibling.spec.restart]:
                    self.children.stopped_for_good(sibling, f"restart:{child.id}")
        for member in (m for m in group if not m.live):
            member.move(Status.BACKING_OFF if delay > 0 else Status.RESTARTING)
        if delay > 0:
            nursery = self.nursery()
            assert nursery is not None
            nursery.start_soon(self._later, group, delay)
        else:
            await self._start_group(group)  # at once, in the caller's task (it holds the lock)

    async def _later(self, group: list[Child], delay: float) -> None:
        """Sleep the backoff (cancellable), then start the group under the lock."""
        await trio.sleep(delay)
        async with self.lock:
            await self._start_group(group)

    async def _start_group(self, group: list[Child]) -> None:
        """Start ``group`` in order (:meth:`Incarnations.start_group`); a start that
        raises counts as a failure of its own."""
        nursery = self.nursery()
        assert nursery is not None
        failed = await self.incarnations.start_group(nursery, group)
        if failed is not None:
            member, err = failed
            member.move(Status.RESTARTING)  # until the pending decision is carried out
            self.settle(member, err)
            nursery.start_soon(self._carry_out_locked, member)

    async def _carry_out_locked(self, child: Child) -> None:
        async with self.lock:
            if child.status is Status.STOPPED:
                child.pending = None  # terminated while this waited: it stays down
            elif child.pending is not None:
                await self.carry_out(child)
