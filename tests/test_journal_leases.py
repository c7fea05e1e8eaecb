"""Runs owned through leases on a real PostgreSQL database: two daemons (two journals
on one database) never run one run at once; when a daemon stops renewing (it hangs),
another takes the run over once the lease expires on the database's clock, and the
stale owner's next write is fenced off (``lease_lost``). Real time throughout."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio

from actors import ActorError
from actors.events import JournalLeaseLost, JournalLeaseRenewFailed
from actors.journal import record_of
from actors.journal.postgres import PostgresStore
from actors.testing import capture_events
from supervisors import SupervisorSpec, open_tree
from supervisors.runs import Edge, NodeContext, Step, Workflow, open_journal, open_runs

pytestmark = pytest.mark.timeout(60)
CALLS: list[tuple[str, str]] = []  # (daemon, node) of every call
GATE: dict[str, trio.Event] = {}


def _step(daemon: str, node_id: str) -> Step:
    async def fn(ctx: NodeContext) -> dict[str, Any]:
        CALLS.append((daemon, node_id))
        if node_id == "slow" and daemon == "A":
            await GATE["A"].wait()  # A hangs here until the test lets it go
        return {node_id: daemon}

    return Step(id=node_id, fn=fn, writes=[node_id])


def workflow(daemon: str) -> Workflow:
    """The same workflow as each daemon has it (its code tells which daemon ran it)."""
    return Workflow(
        name="leased",
        nodes=[_step(daemon, "first"), _step(daemon, "slow"), _step(daemon, "last")],
        edges=[Edge(source="first", target="slow"), Edge(source="slow", target="last")],
    )


WF, WF_B = workflow("A"), workflow("B")


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CALLS.clear()
    GATE.clear()


async def test_a_second_daemon_cannot_run_a_leased_run(postgres_dsn: str) -> None:
    async with (
        open_journal(PostgresStore(postgres_dsn), lease_ttl=30.0) as one,
        open_journal(PostgresStore(postgres_dsn), lease_ttl=30.0) as two,
        open_tree(SupervisorSpec()) as tree,
        open_runs(tree, journal=one, workflows=[WF], name="one") as first,
        open_runs(tree, journal=two, workflows=[WF_B], name="two") as second,
    ):
        GATE["A"] = trio.Event()
        run = await first.start(WF, run_id="r")
        await trio.sleep(0.2)
        with pytest.raises(
            ActorError, match=r"^\[name_taken\] run 'r' is leased by another daemon$"
        ):
            await second.resume("r")
        with pytest.raises(ActorError, match=r"^\[name_taken\] run 'r' is in the journal already$"):
            await second.start(WF_B, run_id="r")
        assert second.get("r") is None
        GATE["A"].set()
        outcome = await run.wait()
    assert outcome.status == "completed"


async def test_a_hung_daemon_is_taken_over_and_its_late_write_fenced_off(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_a = PostgresStore(postgres_dsn)

    def hung(holder: str, tokens: dict[str, int], ttl: float) -> set[str]:
        raise TimeoutError("A is paused")  # A cannot renew: its lease will expire

    monkeypatch.setattr(store_a, "renew_leases", hung)
    with capture_events(JournalLeaseLost, JournalLeaseRenewFailed) as seen:
        async with (
            open_journal(store_a, lease_ttl=0.6) as journal_a,
            open_tree(SupervisorSpec()) as tree,
            open_runs(tree, journal=journal_a, workflows=[WF], name="a") as daemon_a,
        ):
            GATE["A"] = trio.Event()
            run_a = await daemon_a.start(WF, run_id="r")
            await trio.sleep(0.3)
            assert CALLS == [("A", "first"), ("A", "slow")]  # A hangs in "slow"
            async with (
                open_journal(PostgresStore(postgres_dsn), lease_ttl=0.6) as journal_b,
                open_runs(tree, journal=journal_b, workflows=[WF_B], name="b") as daemon_b,
            ):
                assert daemon_b.resumed == ()  # A's lease still runs
                with trio.fail_after(10):
                    while not daemon_b.resumed:  # taken over once it expired
                        await trio.sleep(0.05)
                (run_b,) = daemon_b.resumed
                outcome_b = await run_b.wait()
                assert outcome_b.status == "completed"
                GATE["A"].set()  # A wakes up and finishes "slow": its write is refused
                outcome_a = await run_a.wait()
    assert outcome_a.status == "failed" and outcome_a.code == "lease_lost"
    assert [e.run_id for e in seen if isinstance(e, JournalLeaseLost)] == ["r"]
    assert any(isinstance(e, JournalLeaseRenewFailed) for e in seen)
    # B ran again the node A was in when it hung (its completion was never durable).
    assert CALLS == [("A", "first"), ("A", "slow"), ("B", "slow"), ("B", "last")]
    reader = PostgresStore(postgres_dsn)
    try:
        records = [record_of(e) for e in reader.entries("r")]
        assert reader.run("r").status == "completed"  # type: ignore[union-attr]
    finally:
        reader.close()
    names = [(r.name, getattr(r, "node_id", None)) for r in records]
    # One completion per node, all B's after the takeover; nothing of A's late "slow".
    completed = [node for name, node in names if name == "node:completed"]
    assert completed == ["first", "slow", "last"]
    assert [r.seq for r in records] == list(range(len(records)))
    assert names[-1] == ("run:completed", None)


@pytest.mark.parametrize("ttl", [0, -1.0, math.nan, math.inf, True, "30"])
async def test_a_bad_lease_ttl_is_input_validation(ttl: object) -> None:
    from actors.journal import MemoryStore

    with pytest.raises(
        ActorError, match=r"^\[input_validation\] Journal: lease_ttl must be finite seconds > 0$"
    ):
        async with open_journal(MemoryStore(), lease_ttl=ttl):  # type: ignore[arg-type]
            pytest.fail("opened")


async def test_a_store_without_leases_has_no_lease_machinery() -> None:
    from actors.journal import MemoryStore

    async with open_journal(MemoryStore()) as journal:
        assert journal.leases is None
        await journal.acquire("r")
        with pytest.raises(
            ActorError, match=r"^\[name_taken\] run 'r' is running on this journal$"
        ):
            await journal.acquire("r")
        journal.release("r")
        await journal.acquire("r")  # given back: taken again


async def test_an_append_for_a_run_taken_over_is_refused_not_acknowledged(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.events import NodeCompleted, RunStarted
    from actors.journal import entry_of

    def node(seq: int) -> Any:
        return entry_of(
            NodeCompleted(
                run_id="r",
                seq=seq,
                at=float(seq),
                node_id="n",
                execution=1,
                attempt=1,
                updates={},
                next=(),
                duration=0.0,
            )
        )

    store_a = PostgresStore(postgres_dsn)
    monkeypatch.setattr(store_a, "renew_leases", lambda *args: set())  # A renews nothing
    async with open_journal(store_a, lease_ttl=0.3) as journal_a:
        await journal_a.acquire("r")
        await journal_a.append(
            entry_of(RunStarted(run_id="r", seq=0, at=0.0, workflow="w", inputs={}, wall_time=0.0))
        )
        await journal_a.append(
            entry_of(
                RunStarted(run_id="other", seq=0, at=0.0, workflow="w", inputs={}, wall_time=0.0)
            )
        )
        await trio.sleep(0.4)  # A's lease expired on the database's clock
        store_b = PostgresStore(postgres_dsn)
        try:
            assert store_b.take_lease("r", "B", 30.0) == 2
            with (
                capture_events(JournalLeaseLost) as lost,
                pytest.raises(
                    ActorError,
                    match=r"^\[lease_lost\] another daemon took this run over "
                    r"\(its lease had expired\)$",
                ),
            ):
                await journal_a.append(node(1))
            assert [(e.run_id, e.token) for e in lost] == [("r", 1)]
            await journal_a.append(
                entry_of(
                    RunStarted(run_id="free", seq=0, at=0.0, workflow="w", inputs={}, wall_time=0.0)
                )
            )  # a run this journal does not lease is never fenced
            assert [e.seq for e in store_b.entries("r")] == [0]
            assert [e.seq for e in store_b.entries("free")] == [0]
        finally:
            store_b.close()


async def test_a_shutdown_gives_the_leases_back_and_another_daemon_resumes_at_once(
    postgres_dsn: str,
) -> None:
    """A's shutdown interrupts its run: the lease is ended on the database, so B's
    open_runs resumes the run on entry, long before A's 30 s lease would have expired."""
    async with (
        open_journal(PostgresStore(postgres_dsn), lease_ttl=30.0) as journal_a,
        open_tree(SupervisorSpec()) as tree,
    ):
        async with open_runs(tree, journal=journal_a, workflows=[WF], name="a") as daemon_a:
            GATE["A"] = trio.Event()  # A's "slow" never ends by itself
            await daemon_a.start(WF, run_id="r")
            await trio.sleep(0.3)
            summary = await daemon_a.shutdown("sigterm", grace=0)
        assert summary.interrupted == ("r",)
        started = trio.current_time()
        async with (
            open_journal(PostgresStore(postgres_dsn), lease_ttl=30.0) as journal_b,
            open_runs(tree, journal=journal_b, workflows=[WF_B], name="b") as daemon_b,
        ):
            (run_b,) = daemon_b.resumed  # taken at once: the lease was given back
            assert (await run_b.wait()).status == "completed"
        assert trio.current_time() - started < 5
    assert CALLS == [("A", "first"), ("A", "slow"), ("B", "slow"), ("B", "last")]
    reader = PostgresStore(postgres_dsn)
    try:
        # Given back means expired, not deleted: B's take bumped the token past A's.
        assert reader.take_lease("r", "C", 30.0) is None  # B still holds it (not ended)
        assert reader.give_back_lease("r", "C", 99) is False  # not C's
        assert reader.run("r").status == "completed"  # type: ignore[union-attr]
    finally:
        reader.close()
