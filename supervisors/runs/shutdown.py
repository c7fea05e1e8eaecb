"""A graceful shutdown of the runs (:meth:`Runs.shutdown <supervisors.runs.Runs.shutdown>`).

Intake stops first: ``Runs.start`` and ``Runs.resume`` raise ``actor_stopped``, and no
run is taken over from another daemon any more. The live runs then get ``grace``
seconds to end by themselves; those still running are cancelled with the shutdown's
reason, as *resumable*: their ``run:cancelled`` carries ``resumable=True``, the journal
keeps them unfinished (on a store with leases their leases are given back at once), and
the next daemon on the journal resumes them — the nodes that were in flight run again.
A run without a journal is simply cancelled.

A second call while one is under way shortens the grace (to the sooner of the two
deadlines: ``grace=0`` ends it now) and waits for the same end. A shutdown whose caller
is cancelled still interrupts every live run, as resumable, before the cancel goes on:
no run is left running, and none is cancelled for good.
"""

from __future__ import annotations

from typing import Protocol

import attrs
import trio

from actors import ActorError, Code
from actors.checks import grace_seconds
from actors.events import RunCancelled, RunEvent
from supervisors.runs.run import Run


@attrs.frozen(kw_only=True)
class ShutdownSummary:
    """What a shutdown did: its ``reason``, the ``grace`` it gave (shortened by a second
    call, if one came), how many runs ended by themselves during it (``finished``, by
    status), the runs it ``interrupted``, which of those a journal keeps ``resumable``
    (all of them with a journal; none without, or a run another cancel had already
    ended), and how long it ``took`` (seconds)."""

    reason: str
    grace: float
    finished: dict[str, int]
    interrupted: tuple[str, ...]
    took: float
    resumable: tuple[str, ...] = ()

    def line(self) -> str:
        """One line for a daemon's last output, e.g. ``shutdown (sigterm): 3 runs ended
        in the grace (2 completed, 1 failed), 1 interrupted and resumable, 0.41 s``."""
        ended = sum(self.finished.values())
        detail = ", ".join(f"{count} {status}" for status, count in sorted(self.finished.items()))
        interrupted = len(self.interrupted)
        kept = (
            "and resumable"
            if len(self.resumable) == interrupted
            else f"({len(self.resumable)} resumable)"
        )
        return (
            f"shutdown ({self.reason}): {ended} run{'s' * (ended != 1)} ended in the grace"
            + (f" ({detail})" if detail else "")
            + f", {interrupted} interrupted {kept}, {self.took:.2f} s"
        )


class Shutdown:
    """One shutdown under way (its grace scope) and its summary once done."""

    def __init__(self, grace: float) -> None:
        #: The grace the runs get, from the start of the shutdown (a hurry shortens it).
        self.grace = grace
        self.began = trio.current_time()
        self.scope = trio.CancelScope(deadline=self.began + grace)
        self.done = trio.Event()
        self.summary: ShutdownSummary | None = None

    def hurry(self, grace: float) -> None:
        """End the grace ``grace`` seconds from now, if that is sooner."""
        now = trio.current_time()
        if now + grace < self.scope.deadline:
            self.scope.deadline = now + grace
            self.grace = now - self.began + grace

    async def joined(self, grace: float) -> ShutdownSummary:
        """A second shutdown call: the grace shortened to ``grace`` from now (if sooner),
        then the summary of this one once it is done."""
        self.hurry(grace)
        await self.done.wait()
        assert self.summary is not None
        return self.summary


class RunsToStop(Protocol):
    """What a shutdown needs of :class:`~supervisors.runs.Runs`."""

    live: dict[str, Run]

    def stop_intake(self, reason: str) -> None: ...


def checked(reason: object, grace: object) -> tuple[str, float]:
    """``input_validation`` unless ``reason`` is a non-empty string and ``grace`` seconds
    >= 0 (``math.inf``: no limit)."""
    if type(reason) is not str or not reason:
        raise ActorError.from_code(
            Code.INPUT_VALIDATION, "Runs.shutdown: reason must be a non-empty string"
        )
    seconds = grace_seconds(grace, "Runs.shutdown")
    return reason, seconds


async def shut_down(runs: RunsToStop, shutdown: Shutdown, reason: str) -> ShutdownSummary:
    """The first shutdown of ``runs`` (see the module docstring); a later call joins it
    (:meth:`Shutdown.joined`)."""
    runs.stop_intake(reason)
    before = dict(runs.live)
    try:
        with shutdown.scope:
            for run in before.values():
                await run.wait()
    finally:
        stopped = list(runs.live.values())
        for run in stopped:
            run.interrupt(reason)
        with trio.CancelScope(shield=True):  # they end at once: their nodes are cancelled
            for run in stopped:
                await run.wait()
        interrupted = tuple(run.run_id for run in stopped)
        resumable = tuple(run.run_id for run in stopped if _resumable(run.history[-1]))
        finished: dict[str, int] = {}
        for run_id, run in before.items():
            if run_id not in interrupted:
                finished[run.status] = finished.get(run.status, 0) + 1
        shutdown.summary = ShutdownSummary(
            reason=reason,
            grace=shutdown.grace,
            finished=finished,
            interrupted=interrupted,
            took=trio.current_time() - shutdown.began,
            resumable=resumable,
        )
        shutdown.done.set()
    return shutdown.summary


def _resumable(last: RunEvent) -> bool:
    """The run ended with a resumable cancel (not a cancel for good, nor a failure)."""
    return isinstance(last, RunCancelled) and last.resumable
