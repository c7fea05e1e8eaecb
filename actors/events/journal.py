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
