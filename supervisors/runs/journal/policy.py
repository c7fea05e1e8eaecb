"""The journal's decisions (issue 26): what the writer does after a failed write, and
the leases of a journal on a store several daemons write to.

:class:`JournalPolicy` is the :class:`~actors.journal.JournalSupervision` the writer
(:class:`~actors.journal.JournalWriter`, the mechanism: one attempt per batch) asks:

* **After a failed write**: write it again — with everything queued meanwhile — after
  ``delays[k]`` seconds, ``k`` the consecutive failures so far (2, 4, 6, then 6 …);
  each failure is a ``journal.append_failed`` warning. At ``threshold`` (3) consecutive
  failures the owners of every entry still waiting are halted
  (``persistence_unavailable``; ``journal.unavailable``), and so is every owner whose
  entry arrives while the failures last; the writer keeps trying — except while the
  journal's block is being left: it then gives up (what is queued was never
  acknowledged).
* **Leases** (:class:`Leases`): renewed every third of their ``ttl`` (a failure is
  reported, ``journal.lease_renew_failed``, and tried at the next tick); the runs the
  store fenced off — another daemon took their lease — are halted with ``lease_lost``
  (``journal.lease_lost``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TypeVar, cast

import trio

from actors import ActorError, Code
from actors.events import (
    JournalAppendFailed,
    JournalLeaseLost,
    JournalLeaseRenewFailed,
    JournalUnavailable,
)
from actors.journal import (
    AfterWriteFailed,
    JournalStore,
    LeaseHolder,
    LeaseStore,
    Queued,
    Read,
    WriteFailed,
    lease_lost,
)
from actors.lowlevel import emit

#: Seconds before the k-th retry of a failed write (the last one repeats).
DELAYS: Final = (2.0, 4.0, 6.0)
#: Consecutive failed writes that halt the runs waiting on them.
THRESHOLD: Final = 3
#: Seconds a run's lease lasts on a store with leases (renewed every third of it).
LEASE_TTL: Final = 30.0

Q = TypeVar("Q", bound=Queued)


def _seconds(value: object, *, zero: bool) -> bool:
    """``value`` is a finite number of seconds (not a bool), >= 0 or > 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return (value >= 0 if zero else value > 0) and value < float("inf")


class Leases(LeaseHolder):
    """The leases of one journal (:class:`~actors.journal.LeaseHolder`: its holder name,
    the token of each run it holds), kept alive and enforced: renewed every third of
    ``ttl``; the runs fenced off halted."""

    def halt_fenced(self, batch: list[Q], fenced: frozenset[str]) -> list[Q]:
        """Report and halt the runs the store fenced off (another daemon leased them):
        each owner of an item of theirs gets ``lease_lost`` once. Returns the rest of
        the batch (what was written). Items have ``entry`` and ``owner``."""
        error = lease_lost()
        for run_id in sorted(fenced):
            emit(JournalLeaseLost(run_id=run_id, token=self.tokens.get(run_id, 0)))
        halted: set[int] = set()
        kept = []
        for item in batch:
            entry, owner = item.entry, item.owner
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
            try:
                await self.renew(read)
            except Exception as exc:  # noqa: BLE001 - reported; the next tick retries
                emit(
                    JournalLeaseRenewFailed(
                        runs=len(self.tokens),
                        retry_in=interval,
                        error=f"{type(exc).__name__}: {exc}"[:500],
                    )
                )


class JournalPolicy:
    """What a :class:`~supervisors.runs.Journal` decides (see the module docstring):
    the retry ``delays``, the ``threshold`` of consecutive failures that halts the runs,
    and, on a ``store`` with leases, its :class:`Leases` of ``lease_ttl`` seconds.
    ``input_validation`` for a bad setting."""

    def __init__(
        self,
        store: JournalStore,
        *,
        delays: Sequence[float] = DELAYS,
        threshold: int = THRESHOLD,
        lease_ttl: float = LEASE_TTL,
    ) -> None:
        delays = tuple(delays)
        if not delays or not all(_seconds(d, zero=True) for d in delays):
            raise ActorError.from_code(
                Code.INPUT_VALIDATION, "Journal: delays must be finite seconds >= 0, at least one"
            )
        if type(threshold) is not int or threshold < 1:
            raise ActorError.from_code(
                Code.INPUT_VALIDATION, "Journal: threshold must be an int >= 1"
            )
        if not _seconds(lease_ttl, zero=False):
            raise ActorError.from_code(
                Code.INPUT_VALIDATION, "Journal: lease_ttl must be finite seconds > 0"
            )
        self.delays = delays
        self.threshold = threshold
        #: The runs the journal leases, for a store several daemons write to.
        self.leases = (
            Leases(cast(LeaseStore, store), float(lease_ttl))
            if getattr(store, "leases", False)
            else None
        )

    def after_write_failed(self, failed: WriteFailed) -> AfterWriteFailed:
        """Report ``failed``; retry after the delay for its count of failures; halt
        from the threshold on (``journal.unavailable`` when it is reached), and then
        give up if the journal is closing."""
        delay = self.delays[min(failed.failures, len(self.delays)) - 1]
        emit(
            JournalAppendFailed(
                failures=failed.failures,
                retry_in=delay,
                entries=failed.entries,
                runs=failed.runs,
                error=failed.error,
            )
        )
        halt = failed.failures >= self.threshold
        if failed.failures == self.threshold:
            emit(JournalUnavailable(failures=failed.failures, runs=failed.runs))
        return AfterWriteFailed(retry_in=delay, halt=halt, give_up=halt and failed.closing)

    def halt_fenced(self, batch: list[Q], fenced: frozenset[str]) -> list[Q]:
        """:meth:`Leases.halt_fenced` (only a store with leases fences runs off)."""
        assert self.leases is not None
        return self.leases.halt_fenced(batch, fenced)

    async def keep_leases(self, read: Read) -> None:
        """:meth:`Leases.renew_forever`; nothing to do without leases."""
        if self.leases is not None:
            await self.leases.renew_forever(read)
