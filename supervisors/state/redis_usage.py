"""A Redis replica's view of budget usage (:class:`~supervisors.state.RedisState`): the
totals it last saw per run (:class:`SeenTotals`, what degraded mode goes on from), and
the increments it counted locally while degraded and has not added to Redis yet
(:class:`PendingUsage`: per run, oldest first, merged on recovery and once more when
the state closes).

Each increment keeps the id it was first sent with: Redis applies an id once, so an
increment whose reply was lost and that is sent again is not counted twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import trio

from actors.events import StateUsageUnmerged

#: One ``add_usage`` call: its id, tokens, cost, turns.
Increment = tuple[str, int, float, int]
Totals = tuple[int, float, int]

#: Runs whose budget totals a replica remembers for degraded mode (least recently used
#: forgotten first): a long-lived daemon's memory stays bounded.
_USAGE_KEPT: Final = 10_000


class SeenTotals:
    """Each run's latest totals as this replica saw them — of the most recently used
    ``_USAGE_KEPT`` runs; an unknown or forgotten run's are zero."""

    def __init__(self) -> None:
        self.runs: dict[str, Totals] = {}

    def get(self, run_id: str) -> Totals:
        return self.runs.get(run_id, (0, 0.0, 0))

    def seen(self, run_id: str, totals: Totals) -> Totals:
        """Remember ``totals`` as ``run_id``'s latest (now the most recently used)."""
        runs = self.runs
        runs.pop(run_id, None)
        runs[run_id] = totals
        if len(runs) > _USAGE_KEPT:
            del runs[next(iter(runs))]
        return totals


class PendingUsage:
    """The increments not added to Redis yet, by run (see the module docstring)."""

    def __init__(self) -> None:
        self.runs: dict[str, list[Increment]] = {}
        # Held by the merge around each increment it sends, and by a shared add_usage
        # while something is pending: no increment is in flight when an answer adds the
        # pending ones to Redis's totals. Fair (FIFO): the merge and the adds alternate.
        self.lock = trio.Lock()

    def __bool__(self) -> bool:
        return bool(self.runs)

    def add(self, run_id: str, increment: Increment) -> None:
        self.runs.setdefault(run_id, []).append(increment)

    def plus(self, run_id: str, shared: Totals) -> Totals:
        """A run's totals: what Redis answered plus its increments not merged yet."""
        tokens, cost, turns = shared
        for _, more_tokens, more_cost, more_turns in self.runs.get(run_id, ()):
            tokens, cost, turns = tokens + more_tokens, cost + more_cost, turns + more_turns
        return tokens, cost, turns

    async def merge(
        self,
        send: Callable[[str, Increment], Awaitable[tuple[bool, Any]]],
        answered: Callable[[str, Any], None],
    ) -> tuple[int, str | None]:
        """Send every increment (``send``: whether Redis answered, and its reply or what
        went wrong), each under :attr:`lock`, until none is left — also those added
        meanwhile. Returns how many runs were merged and ``None``, or, at the first
        failure, what went wrong (what was not sent stays pending). ``answered`` gets
        each reply."""
        runs = self.runs
        merged: set[str] = set()
        while runs:
            run_id = next(iter(runs))
            increments = runs[run_id]
            while increments:
                async with self.lock:
                    ok, reply = await send(run_id, increments[0])
                    if not ok:
                        return len(merged), str(reply)
                    increments.pop(0)
                    answered(run_id, reply)
            del runs[run_id]  # no await since it was seen empty
            merged.add(run_id)
        return len(merged), None

    def unmerged(self, backend: str) -> StateUsageUnmerged | None:
        """What is left, as the event a closing state reports (``None``: nothing)."""
        left = [increment for increments in self.runs.values() for increment in increments]
        if not left:
            return None
        return StateUsageUnmerged(
            backend=backend,
            runs=sum(1 for increments in self.runs.values() if increments),
            increments=len(left),
            tokens=sum(increment[1] for increment in left),
            cost=sum(increment[2] for increment in left),
        )
