"""Journal records: the run journal's health and recovery (:mod:`actors.journal`)."""

from __future__ import annotations

import logging
from typing import ClassVar

import attrs

from actors.events._base import Event


@attrs.frozen(kw_only=True, slots=True)
class JournalAppendFailed(Event):
    """A batch could not be made durable; it is tried again after ``retry_in`` seconds
    (the runs that wait on it wait; at ``failures`` = the threshold they are halted)."""

    name: ClassVar[str] = "journal.append_failed"
    level: ClassVar[int] = logging.WARNING

    #: Consecutive failed writes, this one included.
    failures: int
    retry_in: float
    #: Entries in the batch, and the runs they belong to.
    entries: int
    runs: tuple[str, ...]
    #: The exception's type and text.
    error: str


@attrs.frozen(kw_only=True, slots=True)
class JournalRecovered(Event):
    """A write succeeded after ``failures`` consecutive failed ones."""

    name: ClassVar[str] = "journal.recovered"
    level: ClassVar[int] = logging.INFO

    failures: int


@attrs.frozen(kw_only=True, slots=True)
class JournalUnavailable(Event):
    """``failures`` consecutive writes failed: the runs waiting on the journal are halted
    with ``persistence_unavailable`` (the journal keeps trying)."""

    name: ClassVar[str] = "journal.unavailable"
    level: ClassVar[int] = logging.ERROR

    failures: int
    runs: tuple[str, ...]


@attrs.frozen(kw_only=True, slots=True)
class RunNotResumed(Event):
    """An unfinished run of the journal was not resumed: its log cannot be trusted
    (``event_log_corrupt``, ``seq`` the first bad record), or its workflow is unknown or
    changed (``config_invalid``). Other runs are unaffected."""

    name: ClassVar[str] = "run.not_resumed"
    level: ClassVar[int] = logging.ERROR

    run_id: str
    code: str
    message: str
    seq: int | None


@attrs.frozen(kw_only=True, slots=True)
class JournalLeaseLost(Event):
    """Another daemon took the run over (its lease had expired): this daemon's write for
    it was refused by the fencing token, and the run is halted here with ``lease_lost``
    — it goes on where the other daemon resumed it."""

    name: ClassVar[str] = "journal.lease_lost"
    level: ClassVar[int] = logging.ERROR

    run_id: str
    #: The fencing token this daemon held (the taker's is higher).
    token: int


@attrs.frozen(kw_only=True, slots=True)
class JournalLeaseRenewFailed(Event):
    """The leases of this daemon's runs could not be renewed; tried again in
    ``retry_in`` seconds. A lease that expires meanwhile may be taken over (then this
    daemon's next write for that run is refused: ``journal.lease_lost``)."""

    name: ClassVar[str] = "journal.lease_renew_failed"
    level: ClassVar[int] = logging.WARNING

    runs: int
    retry_in: float
    error: str


@attrs.frozen(kw_only=True, slots=True)
class JournalLeaseGiveBackFailed(Event):
    """A run interrupted by a shutdown could not have its lease given back: another
    daemon takes it over only once the lease expires (in at most ``lease_ttl``)."""

    name: ClassVar[str] = "journal.lease_give_back_failed"
    level: ClassVar[int] = logging.WARNING

    run_id: str
    error: str


@attrs.frozen(kw_only=True, slots=True)
class JournalAdoptFailed(Event):
    """Looking for runs to take over (unfinished, their lease expired: their daemon
    died) failed; tried again in ``retry_in`` seconds."""

    name: ClassVar[str] = "journal.adopt_failed"
    level: ClassVar[int] = logging.WARNING

    retry_in: float
    error: str
