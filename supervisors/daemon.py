"""Running runs as a long-running service: signals start a graceful shutdown.

::

    async with open_daemon(grace=30) as daemon:
        async with open_journal(path) as journal, open_tree(spec) as tree, open_runs(
            tree, journal=journal, workflows=[flow]
        ) as runs:
            nursery.start_soon(intake, runs, daemon.stopping)  # your tasks' source
            summary = await daemon.serve(runs)
    print(summary.line())

:func:`open_daemon` listens for ``SIGTERM`` and ``SIGINT`` (``trio.open_signal_receiver``:
Ctrl-C is a signal like the other, never a ``KeyboardInterrupt`` inside the block). The
first one sets :attr:`Daemon.stopping` with the reason ``"sigterm"`` / ``"sigint"``;
:meth:`Daemon.serve` then shuts the runs down (:meth:`Runs.shutdown
<supervisors.runs.Runs.shutdown>`): intake stops, the runs in flight get ``grace``
seconds, and those still running are cancelled *resumable* — journalled as cancelled
and resumed by the next daemon on the journal. A second signal ends the grace at once.
Leaving the blocks then stops the tree's actors in reverse start order (each
``on_stop`` runs) and writes what the journal has queued before closing it. The
process exits normally (status 0) — print the summary's one line on the way out.

:meth:`Daemon.stop` does what a signal does, for a daemon stopped from code (an admin
endpoint, a test). Signals are only received while the block runs; the previous
handlers come back when it is left. ``open_daemon`` must run in the main thread (it
is where Python delivers signals).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from types import FrameType
from typing import Final

import trio

from actors import ActorError, Code
from actors.checks import grace_seconds
from actors.events import DaemonStopping
from actors.lowlevel import emit, open_nursery_unwrapped
from supervisors.runs import Runs, ShutdownSummary

#: The signals a daemon shuts down on by default.
SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)
#: Seconds the runs in flight get by default before they are interrupted.
GRACE: Final = 30.0


class Daemon:
    """The shutdown state of one :func:`open_daemon` block (see the module docstring)."""

    def __init__(self, grace: float, nursery: trio.Nursery) -> None:
        #: Seconds the runs in flight get once a shutdown starts.
        self.grace = grace
        #: Set by the first signal or :meth:`stop`: intake should stop.
        self.stopping = trio.Event()
        #: Why the daemon is stopping (``"sigterm"``, ``"sigint"``, or what :meth:`stop`
        #: was given); ``None`` until then.
        self.reason: str | None = None
        #: A second signal or stop came: the grace is over.
        self.hurried = False
        self._nursery = nursery
        self._served: list[Runs] = []
        self._closed = False

    def stop(self, reason: str = "stop") -> None:
        """Start the shutdown with ``reason``, as a signal would; a second call ends the
        grace at once (of every ``Runs`` being served). Each call reports
        ``daemon.stopping`` (:class:`~actors.events.DaemonStopping`) first.
        ``input_validation`` for an empty reason."""
        if type(reason) is not str or not reason:
            raise ActorError.from_code(
                Code.INPUT_VALIDATION, "Daemon.stop: reason must be a non-empty string"
            )
        if not self.stopping.is_set():
            emit(DaemonStopping(reason=reason, grace=self.grace, hurried=False))
            self.reason = reason
            self.stopping.set()
            return
        self.hurried = True
        if self._closed:  # the block was left: its nursery takes nothing more
            return
        emit(DaemonStopping(reason=reason, grace=0.0, hurried=True))
        assert self.reason is not None
        for runs in self._served:
            self._nursery.start_soon(runs.shutdown, self.reason, 0.0)

    async def serve(self, runs: Runs) -> ShutdownSummary:
        """Wait for a signal (or :meth:`stop`), then shut ``runs`` down gracefully and
        return what the shutdown did. A cancel of the caller interrupts the runs as a
        shutdown would (resumable) before it goes on."""
        if not isinstance(runs, Runs):
            raise ActorError.from_code(
                Code.INPUT_VALIDATION,
                f"Daemon.serve: runs must be a Runs, got {type(runs).__name__}",
            )
        self._served.append(runs)  # a second stop hurries it, until it is done
        try:
            return await self._serve(runs)
        finally:
            self._served.remove(runs)

    async def _serve(self, runs: Runs) -> ShutdownSummary:
        try:
            await self.stopping.wait()
        except trio.Cancelled:
            # A shutdown interrupts every live run even when it is cancelled itself (it
            # raises the cancel once they have ended).
            await runs.shutdown("cancelled", 0.0)
            raise
        assert self.reason is not None
        return await runs.shutdown(self.reason, 0.0 if self.hurried else self.grace)

    def _signalled(self, signum: int) -> None:
        """In the trio thread, once per signal delivered (two quick ones are two)."""
        if not self._closed:
            self.stop(signal.Signals(signum).name.lower())


@asynccontextmanager
async def open_daemon(
    *, grace: float = GRACE, signals: Iterable[signal.Signals] = SIGNALS
) -> AsyncIterator[Daemon]:
    """A :class:`Daemon` listening for ``signals`` (default ``SIGTERM`` and ``SIGINT``)
    for the duration of the block (see the module docstring). ``grace``: seconds the runs
    in flight get once the shutdown starts (``math.inf``: no limit; a number too large
    for a float is no limit too). ``input_validation`` for a negative or NaN grace, no
    signal, or a signal that cannot be caught (``SIGKILL``, ``SIGSTOP``);
    ``config_invalid`` outside the main thread.

    Each delivery counts: two signals sent back to back are a first and a second one
    (trio's own signal receiver would merge them), so the second ends the grace."""
    seconds = grace_seconds(grace, "open_daemon")
    if threading.current_thread() is not threading.main_thread():
        raise ActorError.from_code(
            Code.CONFIG_INVALID,
            "open_daemon: must run in the main thread (Python delivers signals there)",
        )
    wanted = _signals(signals)
    token = trio.lowlevel.current_trio_token()
    async with open_nursery_unwrapped() as nursery:
        daemon = Daemon(seconds, nursery)

        def handler(signum: int, frame: FrameType | None) -> None:
            # Signal-safe (as trio's own receiver does it), and not idempotent: every
            # delivery is a call.
            token.run_sync_soon(daemon._signalled, signum)

        previous = {}
        try:
            for signum in wanted:
                previous[signum] = signal.signal(signum, handler)
            yield daemon
        finally:
            daemon._closed = True
            for signum, handling in previous.items():
                signal.signal(signum, handling)
            nursery.cancel_scope.cancel(reason="daemon block left")


def _signals(signals: Iterable[object]) -> tuple[signal.Signals, ...]:
    problem = "open_daemon: signals must be signal.Signals that can be caught, at least one"
    try:
        wanted: tuple[object, ...] = tuple(signals)
    except TypeError:
        wanted = ()
    uncatchable = {signal.SIGKILL, signal.SIGSTOP}
    if not wanted or not all(
        isinstance(s, signal.Signals) and s not in uncatchable for s in wanted
    ):
        raise ActorError.from_code(Code.INPUT_VALIDATION, problem)
    return tuple(dict.fromkeys(s for s in wanted if isinstance(s, signal.Signals)))
