"""`supervisors.runs.Leases` on its own, against a store double and on virtual time: taking,
dropping, the fences a batch carries, halting the fenced runs, renewing."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest
import trio

from actors import ActorError
from actors.events import (
    JournalAdoptFailed,
    JournalLeaseGiveBackFailed,
    JournalLeaseLost,
    JournalLeaseRenewFailed,
)
from actors.journal import Entry, MemoryStore
from actors.testing import capture_events
from supervisors import SupervisorSpec, open_tree
from supervisors.runs import Leases, open_journal, open_runs


class Store:
    """A lease store double: answers ``take_lease`` from ``tokens`` and records renewals
    (or raises ``fail`` for them)."""

    leases = True

    def __init__(self, **tokens: int | None) -> None:
        self.tokens = tokens
        self.renewals: list[tuple[float, str, dict[str, int], float]] = []
        self.given: list[tuple[str, str, int]] = []
        self.fail: Exception | None = None

    def take_lease(self, run_id: str, holder: str, ttl: float) -> int | None:
        return self.tokens.get(run_id)

    def renew_leases(self, holder: str, tokens: dict[str, int], ttl: float) -> set[str]:
        if self.fail is not None:
            raise self.fail
        self.renewals.append((trio.current_time(), holder, tokens, ttl))
        return set(tokens)

    def orphans(self, *, thorough: bool = False) -> list[str]:
        return []

    def give_back_lease(self, run_id: str, holder: str, token: int) -> bool:
        if self.fail is not None:
            raise self.fail
        self.given.append((run_id, holder, token))
        return True


async def read(fn: Any, *args: Any) -> Any:
    return fn(*args)


class Owner:
    def __init__(self) -> None:
        self.errors: list[ActorError] = []

    def durable(self, seq: int) -> None:
        raise AssertionError("a fenced run's records are never durable")

    def halted(self, error: ActorError) -> None:
        self.errors.append(error)


class Item:
    def __init__(self, run_id: str | None, owner: Owner | None) -> None:
        self.entry = None if run_id is None else Entry(run_id, 0, "node:started", 0.0, "{}", "x")
        self.owner = owner


def test_a_holder_names_the_host_and_process_and_is_unique() -> None:
    first, second = Leases(Store(), 30.0), Leases(Store(), 30.0)  # type: ignore[arg-type]
    host, pid, tail = first.holder.rsplit(":", 2)
    assert (host, int(pid)) == (socket.gethostname(), os.getpid())
    assert len(tail) == 8 and int(tail, 16) >= 0
    assert first.holder != second.holder
    assert first.ttl == 30.0
    assert first.tokens == {}


async def test_take_keeps_the_token_or_says_no() -> None:
    leases = Leases(Store(r=4, s=None), 30.0)  # type: ignore[arg-type]
    assert await leases.take(read, "r") is True
    assert await leases.take(read, "s") is False
    assert leases.tokens == {"r": 4}
    assert leases.fences(["r", "s", "t"]) == {"r": (leases.holder, 4)}
    leases.drop("r")
    leases.drop("never")  # nothing to drop: nothing happens
    assert leases.tokens == {} and leases.fences(["r"]) == {}


def test_the_fenced_runs_are_reported_and_each_owner_halted_once() -> None:
    leases = Leases(Store(), 30.0)  # type: ignore[arg-type]
    leases.tokens.update(a=7, b=3)
    a, b, c = Owner(), Owner(), Owner()
    marker, plain = Item(None, None), Item("b", None)
    kept_c = Item("c", c)
    batch = [Item("b", b), Item("a", a), kept_c, Item("a", a), marker, plain]
    with capture_events(JournalLeaseLost) as lost:
        kept = leases.halt_fenced(batch, frozenset({"b", "a"}))
    assert kept == [kept_c, marker]
    assert [(e.run_id, e.token) for e in lost] == [("a", 7), ("b", 3)]  # sorted by run
    for owner in (a, b):
        (error,) = owner.errors
        assert error.code == "lease_lost"
        assert str(error) == (
            "[lease_lost] another daemon took this run over (its lease had expired)"
        )
    assert c.errors == []
    with capture_events(JournalLeaseLost) as lost:
        assert leases.halt_fenced(batch, frozenset({"z"})) == batch  # not ours: token 0
    assert [(e.run_id, e.token) for e in lost] == [("z", 0)]


async def test_leases_are_renewed_every_third_of_their_ttl(autojump_clock: Any) -> None:
    store = Store()
    leases = Leases(store, 3.0)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(leases.renew_forever, read)
        await trio.sleep(1.5)
        assert store.renewals == []  # nothing held: nothing renewed
        leases.tokens["r"] = 2
        await trio.sleep(1.0)
        assert store.renewals == [(2.0, leases.holder, {"r": 2}, 3.0)]
        store.fail = TimeoutError("x" * 600)
        with capture_events(JournalLeaseRenewFailed) as failed:
            await trio.sleep(1.0)
        (event,) = failed
        assert (event.runs, event.retry_in) == (1, 1.0)
        assert event.error == ("TimeoutError: " + "x" * 600)[:500]
        store.fail = None
        await trio.sleep(1.0)  # tried again at the next tick
        assert [r[0] for r in store.renewals] == [2.0, 4.0]
        renewed = store.renewals[-1][2]
        leases.tokens["s"] = 5
        assert renewed == {"r": 2}  # a copy: later changes are not sent with it
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("ttl", [6.0, 0.3])
async def test_the_renewal_interval_follows_the_ttl(autojump_clock: Any, ttl: float) -> None:
    store = Store()
    leases = Leases(store, ttl)  # type: ignore[arg-type]
    leases.tokens["r"] = 1
    async with trio.open_nursery() as nursery:
        nursery.start_soon(leases.renew_forever, read)
        await trio.sleep(ttl + ttl / 6)
        nursery.cancel_scope.cancel()
    assert [round(r[0], 9) for r in store.renewals] == [
        round(ttl / 3, 9),
        round(2 * ttl / 3, 9),
        round(ttl, 9),
    ]


class LeasedMemory(MemoryStore):
    """A memory store that says it has leases (the journal then leases runs, renews and
    looks for runs to take over); ``orphans`` fails while ``down``."""

    leases = True

    def __init__(self) -> None:
        super().__init__()
        self.looked: list[float] = []
        self.down = False

    def take_lease(self, run_id: str, holder: str, ttl: float) -> int | None:
        return 1

    def renew_leases(self, holder: str, tokens: dict[str, int], ttl: float) -> set[str]:
        return set(tokens)

    def orphans(self, *, thorough: bool = False) -> list[str]:
        self.looked.append(trio.current_time())
        if self.down:
            raise OSError("database gone")
        return []


async def test_a_failed_look_for_runs_to_take_over_is_reported_and_tried_again(
    autojump_clock: Any,
) -> None:
    store = LeasedMemory()
    with capture_events(JournalAdoptFailed) as failed:
        async with (
            open_journal(store, lease_ttl=2.0) as journal,
            open_tree(SupervisorSpec()) as tree,
            open_runs(tree, journal=journal) as runs,
        ):
            await trio.sleep(0.5)
            store.down = True
            await trio.sleep(1.0)  # the look at t=1.0 fails
            store.down = False
            await trio.sleep(1.0)  # the one at t=2.0 works
            assert runs.resumed == ()
        left_at = trio.current_time()
    assert store.looked == [0.0, 1.0, 2.0]  # on entry, then every lease_ttl / 2
    assert [(e.retry_in, e.error) for e in failed] == [(1.0, "OSError: database gone")]
    await trio.sleep(5.0)
    assert store.looked[-1] <= left_at  # the loop ended with the runs


async def test_give_back_ends_the_lease_held_and_stops_renewing_it(autojump_clock: Any) -> None:
    store = Store(r=4)
    leases = Leases(store, 30.0)  # type: ignore[arg-type]
    assert await leases.take(read, "r")
    await leases.give_back(read, "r")
    assert store.given == [("r", leases.holder, 4)]
    assert leases.tokens == {}
    await leases.give_back(read, "r")  # not held any more: nothing asked of the store
    await leases.give_back(read, "never")
    assert store.given == [("r", leases.holder, 4)]


async def test_a_give_back_that_fails_is_reported_and_the_run_let_go(autojump_clock: Any) -> None:
    store = Store(r=2)
    leases = Leases(store, 30.0)  # type: ignore[arg-type]
    await leases.take(read, "r")
    store.fail = OSError("database gone")
    with capture_events(JournalLeaseGiveBackFailed) as failed:
        await leases.give_back(read, "r")
    assert [(e.run_id, e.error) for e in failed] == [("r", "OSError: database gone")]
    assert leases.tokens == {}  # not renewed: it expires by itself
