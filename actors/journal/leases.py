"""The leases one journal holds in a store with leases (several daemons on one database):
the mechanism (:class:`LeaseHolder`).

A run is taken (:meth:`LeaseHolder.take`) before it runs or is resumed, and given up when
the run ends here (it then expires on the store's clock; an ended run is never resumed
anyway). Every write carries the fencing token of each run it writes for
(:meth:`LeaseHolder.fences`): the store refuses the runs whose lease another daemon took.
When the leases are renewed and what becomes of the runs fenced off are the journal's
supervision's decisions (:class:`supervisors.runs.Leases`).
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterable

from actors.errors import ActorError, Code
from actors.events import JournalLeaseGiveBackFailed
from actors.journal.store import LeaseStore
from actors.journal.supervision import Read
from actors.observe import emit


def lease_lost() -> ActorError:
    """The error of a run whose lease another daemon took over."""
    return ActorError.from_code(
        Code.LEASE_LOST, "another daemon took this run over (its lease had expired)"
    )


class LeaseHolder:
    """The leases of one journal: its holder name and the token of each run it holds;
    one store call per method, never retried."""

    def __init__(self, store: LeaseStore, ttl: float) -> None:
        self.store = store
        self.ttl = ttl
        #: This daemon as a lease holder: host, process and a random part (a restarted
        #: process is a new holder and waits for its old leases to expire).
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        #: run id -> the fencing token held.
        self.tokens: dict[str, int] = {}

    async def take(self, read: Read, run_id: str) -> bool:
        """Lease ``run_id``; ``False`` while another daemon's lease on it runs."""
        token = await read(self.store.take_lease, run_id, self.holder, self.ttl)
        if token is None:
            return False
        self.tokens[run_id] = token
        return True

    def drop(self, run_id: str) -> None:
        """Stop renewing ``run_id`` (it ended here, or was never started)."""
        self.tokens.pop(run_id, None)

    async def give_back(self, read: Read, run_id: str) -> None:
        """Stop renewing ``run_id`` and end its lease on the store now, so another
        daemon may take the run over at once (a shutdown interrupted it). A store that
        cannot be reached is reported (``journal.lease_give_back_failed``): the lease
        then expires by itself."""
        token = self.tokens.pop(run_id, None)
        if token is None:
            return
        try:
            await read(self.store.give_back_lease, run_id, self.holder, token)
        except Exception as exc:  # noqa: BLE001 - reported; the lease expires anyway
            emit(
                JournalLeaseGiveBackFailed(
                    run_id=run_id, error=f"{type(exc).__name__}: {exc}"[:500]
                )
            )

    def fences(self, runs: Iterable[str]) -> dict[str, tuple[str, int]]:
        """``run id -> (holder, token)`` for the runs of a batch this journal holds."""
        tokens = self.tokens
        return {run: (self.holder, tokens[run]) for run in runs if run in tokens}

    async def renew(self, read: Read) -> None:
        """Renew every lease held, once (nothing to do when none is); the store's error
        when it fails. When to renew is the supervision's decision."""
        if self.tokens:
            await read(self.store.renew_leases, self.holder, dict(self.tokens), self.ttl)
