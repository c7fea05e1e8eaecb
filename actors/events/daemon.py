"""Daemon records: a graceful shutdown starts, or is hurried (:mod:`supervisors.daemon`)."""

from __future__ import annotations

import logging
from typing import ClassVar

import attrs

from actors.events._base import Event


@attrs.frozen(kw_only=True, slots=True)
class DaemonStopping(Event):
    """A daemon's shutdown started (the first signal or ``Daemon.stop``: intake should
    stop, the runs in flight get ``grace`` seconds), or was hurried (a second one:
    ``hurried`` true, ``grace`` 0 — the runs still in flight are interrupted now,
    resumable). Emitted once per signal or stop, in the trio thread, before anything of
    the shutdown happens."""

    name: ClassVar[str] = "daemon.stopping"
    level: ClassVar[int] = logging.INFO

    #: ``"sigterm"``, ``"sigint"``, or the reason given to ``Daemon.stop``.
    reason: str
    #: Seconds the runs in flight get from now.
    grace: float
    #: A second signal or stop: the grace is over.
    hurried: bool
