"""The runs one journal holds in a store with leases (several daemons on one database).

A run is taken (:meth:`Leases.take`) before it runs or is resumed; the lease is renewed
every ``ttl / 3`` seconds while it is held, and given up when the run ends here (it then
expires on the store's clock; an ended run is never resumed anyway). Every write carries
the fencing token of each run it writes for (:meth:`Leases.fences`): the store refuses
the runs whose lease another daemon took, and the journal halts them here with
``lease_lost``.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import trio

from actors.errors import ActorError, Code
from actors.events import JournalLeaseGiveBackFailed, JournalLeaseLost, JournalLeaseRenewFailed
from actors.journal.store import LeaseStore
from actors.observe import emit

Read = Callable[..., Awaitable[Any]]
Item = TypeVar("Item")


def lease_lost() -> ActorError:
    """The error of a run whose lease another daemon took over."""
    return ActorError.from_code(
        Code.LEASE_LOST, "another daemon took this run over (its lease had expired)"
    )


class Leases:
    """The leases of one journal: its holder name and the token of each run it holds."""

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

    def halt_fenced(self, batch: list[Item], fenced: frozenset[str]) -> list[Item]:
        """Report and halt the runs the store fenced off (another daemon leased them):
        each owner of an item of theirs gets ``lease_lost`` once. Returns the rest of
        the batch (what was written). Items have ``entry`` and ``owner``."""
        error = lease_lost()
        for run_id in sorted(fenced):
            emit(JournalLeaseLost(run_id=run_id, token=self.tokens.get(run_id, 0)))
        halted: set[int] = set()
        kept = []
        for item in batch:
            entry, owner = getattr(item, "entry", None), getattr(item, "owner", None)
            if entry is None or entry.run_id not in fenced:
                kept.append(item)
            elif owner is not None and id(owner) not in halted:
                halted.add(id(owner))
                owner.halted(error)
        return kept

    async def renew_forever(self, read: Read) -> None:
        """Renew the held leases every ``ttl / 3`` seconds; a failure is reported and
        tried again at the next tick."""
        interval = self.ttl / 3
        while True:
            await trio.sleep(interval)
            if not self.tokens:
                continue
            try:
                await read(self.store.renew_leases, self.holder, dict(self.tokens), self.ttl)
            except Exception as exc:  # noqa: BLE001 - reported; the next tick retries
                emit(
                    JournalLeaseRenewFailed(
                        runs=len(self.tokens),
                        retry_in=interval,
                        error=f"{type(exc).__name__}: {exc}"[:500],
                    )
                )
