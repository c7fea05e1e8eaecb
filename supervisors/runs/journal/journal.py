"""The run journal with the house's policy: :class:`Journal`, opened by
:func:`open_journal` (docs/journal.md).

The writer — queue, group commit, one attempt per batch, the store thread — is
:class:`actors.journal.JournalWriter`; what it does after a failed write and about its
leases is :class:`~supervisors.runs.journal.policy.JournalPolicy`'s to decide.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from actors import ActorError, Code
from actors.journal import DEFAULT_PATH, JournalStore, JournalWriter, SqliteStore, writing
from supervisors.runs.journal.policy import DELAYS, LEASE_TTL, THRESHOLD, JournalPolicy, Leases


class Journal(JournalWriter):
    """The run journal over one store: a :class:`~actors.journal.JournalWriter` whose
    failed writes are retried after ``delays`` and halt the runs from ``threshold``
    consecutive failures on, and whose leases (a store several daemons write to) last
    ``lease_ttl`` seconds (:class:`~supervisors.runs.journal.policy.JournalPolicy`);
    made by :func:`open_journal`. ``input_validation`` for a bad setting."""

    #: The runs this journal leases, for a store several daemons write to.
    leases: Leases | None

    def __init__(
        self,
        store: JournalStore,
        *,
        delays: Sequence[float] = DELAYS,
        threshold: int = THRESHOLD,
        lease_ttl: float = LEASE_TTL,
    ) -> None:
        policy = JournalPolicy(store, delays=delays, threshold=threshold, lease_ttl=lease_ttl)
        super().__init__(store, policy, policy.leases)
        #: What this journal decides after a failed write, and about its leases.
        self.policy = policy

    @property
    def delays(self) -> tuple[float, ...]:
        """Seconds before the k-th retry of a failed write (the last one repeats)."""
        return self.policy.delays

    @property
    def threshold(self) -> int:
        """Consecutive failed writes that halt the runs waiting on them."""
        return self.policy.threshold


@asynccontextmanager
async def open_journal(
    store: JournalStore | str | Path = DEFAULT_PATH,
    *,
    delays: Sequence[float] = DELAYS,
    threshold: int = THRESHOLD,
    close_timeout: float = 10.0,
    lease_ttl: float = LEASE_TTL,
) -> AsyncIterator[Journal]:
    """A :class:`Journal` over ``store`` (a store, or the path of a SQLite file: default
    ``runs.journal`` in the working directory) with its writer running.

    Leaving the block — normally, with an error or cancelled — writes what is queued
    first (the runs' last records get in), for at most ``close_timeout`` seconds and
    only while the store works (``threshold`` consecutive failures end it), then closes
    the store. The writer is shielded from a cancel around the block for that reason.
    ``lease_ttl``: on a store several daemons write to (PostgreSQL), how long a run's
    lease lasts without renewal — how soon another daemon may take over the runs of one
    that died.
    """
    if isinstance(close_timeout, bool) or not (
        isinstance(close_timeout, int | float) and close_timeout >= 0
    ):
        raise ActorError.from_code(
            Code.INPUT_VALIDATION, "open_journal: close_timeout must be seconds >= 0"
        )
    if isinstance(store, str | Path):
        store = await trio.to_thread.run_sync(SqliteStore, store)
    try:
        journal = Journal(store, delays=delays, threshold=threshold, lease_ttl=lease_ttl)
    except BaseException:
        store.close()
        raise
    async with writing(journal, close_timeout):
        yield journal
