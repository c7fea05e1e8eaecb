"""Runs with a journal: what is recorded, delivery after durability, checkpoints equal to
replay, resume, persistence degradation — on the in-memory store under MockClock."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
import trio

from actors import ActorError, fail
from actors.journal import MemoryStore, record_of
from actors.testing import capture_events
from supervisors import BudgetLimits
from supervisors.runs import Approval, Edge, NodeContext, Run, Step, Workflow
from supervisors.runs.progress import Progress
from tests.journal_helpers import FlakyStore, crashed, cut, journalled
from tests.runs_helpers import assert_well_formed, names, of


def stored(store: MemoryStore, run_id: str) -> list[Any]:
    return [record_of(entry) for entry in store.entries(run_id)]


class Effects:
    """Side effects recorded outside the journal, by idempotency key."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def step(self, node_id: str, key: str | None = None, gate: trio.Event | None = None) -> Step:
        async def fn(ctx: NodeContext) -> dict[str, Any]:
            self.calls.append((ctx.key, ctx.attempt))
            if gate is not None:
                await gate.wait()
            return {key or node_id: ctx.key}

        return Step(id=node_id, fn=fn, writes=[key or node_id])


def chain(effects: Effects, *ids: str, gate: dict[str, trio.Event] | None = None) -> Workflow:
    gates = gate or {}
    return Workflow(
        name="chain",
        nodes=[effects.step(i, gate=gates.get(i)) for i in ids],
        edges=[Edge(source=a, target=b) for a, b in itertools.pairwise(ids)],
    )


async def test_every_record_is_journalled_with_header_checkpoints_and_ending(
    autojump_clock: Any,
) -> None:
    store = MemoryStore()
    effects = Effects()
    wf = chain(effects, "a", "b")
    async with journalled(store) as (_, runs, _journal):
        run = await runs.start(wf, {"q": 1}, run_id="r1", limits=BudgetLimits(tokens=100))
        outcome = await run.wait()
    assert outcome.status == "completed"
    assert stored(store, "r1") == list(run.history)
    assert names(run) == [
        "run:started",
        "node:started",
        "node:completed",
        "node:started",
        "node:completed",
        "run:completed",
    ]
    row = store.run("r1")
    assert row is not None
    assert (row.workflow, row.status, row.code, row.events, row.tokens) == (
        "chain",
        "completed",
        None,
        6,
        0,
    )
    definition = json.loads(row.definition)
    assert [n["id"] for n in definition["nodes"]] == ["a", "b"]
    assert len(definition["digest"]) == 32
    assert json.loads(row.limits)["tokens"] == 100
    point = store.checkpoint("r1")
    assert point is not None and point.seq == 4  # after the last node:completed
    assert json.loads(point.progress)["state"] == {"q": 1, "a": "r1:a:1", "b": "r1:b:1"}


async def test_records_reach_the_stream_only_once_durable(autojump_clock: Any) -> None:
    store = FlakyStore()
    store.fail = 1
    started: list[Run] = []
    async with journalled(store) as (_, runs, _journal):

        async def start() -> None:
            flow = Workflow(name="w", nodes=[Step(id="a", fn=_noop)])
            started.append(await runs.start(flow, run_id="r"))

        with capture_events("run:started") as seen:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(start)
                await trio.sleep(1)
                # run:started is not durable yet (the first write failed): nothing is
                # shown, and start has not returned — it returns once the run is journalled.
                assert (seen, started, store.entries("r")) == ([], [], [])
            returned_at = trio.current_time()
        (run,) = started
        assert len(seen) == 1 and names(run)[0] == "run:started"
        assert record_of(store.entries("r")[0]).name == "run:started"
        assert 1 < returned_at < 2.5
        await run.wait()
    assert names(run) == ["run:started", "node:started", "node:completed", "run:completed"]


async def _noop(ctx: NodeContext) -> None:
    return None


async def test_a_checkpoint_and_replay_equal_the_live_progress(autojump_clock: Any) -> None:
    """Fan-out, a join, a loop, an approval and a handled failure: at every prefix of the
    stream, the checkpoint before it plus the records after it give the same progress as
    replaying from zero; the end equals the live state."""

    async def count(ctx: NodeContext) -> dict[str, Any]:
        return {"n": ctx.state.get("n", 0) + 1}

    async def broken(ctx: NodeContext) -> Any:
        return fail("tool_failed", "no")

    wf = Workflow(
        name="mix",
        nodes=[
            Step(id="loop", fn=count, writes=["n"]),
            Step(id="left", fn=_noop),
            Step(id="right", fn=broken),
            Step(id="join", fn=_noop, join=True),
            Approval(id="ok"),
        ],
        edges=[
            Edge(source="loop", target="loop", when="n < 3"),
            Edge(source="loop", target="left", when="n >= 3"),
            Edge(source="loop", target="right", when="n >= 3"),
            Edge(source="left", target="join"),
            Edge(source="right", target="join", on=["tool_failed"]),
            Edge(source="join", target="ok"),
        ],
    )
    store = MemoryStore()
    checkpoints: dict[int, str] = {}
    original_write = store.write

    def keeping(batch: Any) -> None:
        original_write(batch)
        for point in batch.checkpoints:
            checkpoints[point.seq] = point.progress

    store.write = keeping  # type: ignore[method-assign]
    async with journalled(store, runners=2) as (_, runs, _journal):
        run = await runs.start(wf, run_id="m")
        while run.pending != ("ok",):
            await trio.sleep(0.5)
        run.decide("ok", "approve", by="ops")
        outcome = await run.wait()
    assert outcome.status == "completed"
    records = stored(store, "m")
    assert records == list(run.history)
    plan_start, joins = ("loop",), {"join": frozenset({"left", "right"})}
    for upto in range(1, len(records) + 1):
        replayed = Progress("m", plan_start, joins)
        for record in records[:upto]:
            replayed.apply(record)
        usable = [seq for seq in checkpoints if seq < upto]
        if usable:
            resumed = Progress("m", plan_start, joins)
            resumed.restore(json.loads(checkpoints[max(usable)]))
            for record in records[resumed.seq : upto]:
                resumed.apply(record)
            fields = ("seq", "state", "ready", "fired", "finished", "executions", "steps")
            more = ("in_flight", "decisions", "terminal")
            a, b = replayed.snapshot(), resumed.snapshot()
            assert {k: a[k] for k in fields + more} == {k: b[k] for k in fields + more}, upto
    assert replayed.state == dict(outcome.state)
    assert replayed.terminal == "run:completed" and replayed.steps == 7
    assert len(checkpoints) == 6  # one per node:completed (the failure is not one)


async def test_a_resumed_run_reruns_only_what_was_in_flight(autojump_clock: Any) -> None:
    effects = Effects()
    gate = trio.Event()
    wf = chain(effects, "a", "b", "c", gate={"b": gate})
    store = MemoryStore()
    async with journalled(store) as (_, runs, _journal):
        run = await runs.start(wf, {"q": 1}, run_id="r")
        await trio.sleep(1)
        assert names(run)[-1] == "node:started"  # b is in flight
        kept = crashed(store)  # the process dies here
        run.cancel("test over")
    assert effects.calls == [("r:a:1", 1), ("r:b:1", 1)]
    gate.set()
    with capture_events("run:resumed") as resumed_records:
        async with journalled(kept, workflows=[wf]) as (_, runs, _journal):
            (again,) = runs.resumed
            outcome = await again.wait()
    assert outcome.status == "completed"
    assert outcome.state == {"q": 1, "a": "r:a:1", "b": "r:b:1", "c": "r:c:1"}
    assert effects.calls == [("r:a:1", 1), ("r:b:1", 1), ("r:b:1", 1), ("r:c:1", 1)]
    assert_well_formed(again)
    assert names(again) == [
        "run:started",
        "node:started",
        "node:completed",
        "node:started",
        "run:resumed",
        "node:started",
        "node:completed",
        "node:started",
        "node:completed",
        "run:completed",
    ]
    (record,) = resumed_records
    assert (record.seq, record.in_flight, record.ready, record.pending) == (4, ("b",), (), ())
    assert stored(kept, "r") == list(again.history)
    assert kept.run("r").status == "completed"  # type: ignore[union-attr]


async def test_a_pending_approval_is_pending_again_and_a_made_decision_is_kept(
    autojump_clock: Any,
) -> None:
    wf = Workflow(
        name="approve",
        nodes=[Approval(id="one"), Approval(id="two"), Step(id="done", fn=_noop)],
        edges=[Edge(source="one", target="two"), Edge(source="two", target="done")],
    )
    store = MemoryStore()
    async with journalled(store) as (_, runs, _journal):
        run = await runs.start(wf, run_id="ap")
        await trio.sleep(1)
        assert run.pending == ("one",)
        pending_copy = crashed(store)
        run.cancel("test over")
    async with journalled(pending_copy, workflows=[wf]) as (_, runs, _journal):
        (again,) = runs.resumed
        await trio.sleep(1)
        assert again.pending == ("one",)
        assert of(again, "run:resumed")[0].pending == ("one",)
        again.decide("one", "approve", by="ops")
        await trio.sleep(1)
        assert again.pending == ("two",)
        decided_copy = crashed(pending_copy)  # "two" requested, not decided
        again.decide("two", "approve", by="ops", reason="late")
        await again.wait()
    async with journalled(decided_copy, workflows=[wf]) as (_, runs, _journal):
        (third,) = runs.resumed
        await trio.sleep(1)
        assert third.pending == ("two",)
        third.cancel("enough")
    # A crash after the decision on "two" was durable and before its node completed.
    records = stored(pending_copy, "ap")
    decided = [r.seq for r in records if r.name == "approval:decided" and r.node_id == "two"]
    after_decision = cut(pending_copy, "ap", decided[0])
    async with journalled(after_decision, workflows=[wf]) as (_, runs, _journal):
        (fourth,) = runs.resumed
        assert (await fourth.wait()).status == "completed"
    tail = names(fourth)[decided[0] + 1 :]
    assert tail == [
        "run:resumed",
        "node:started",
        "node:completed",
        "node:started",
        "node:completed",
        "run:completed",
    ]
    assert of(fourth, "run:resumed")[-1].pending == ()  # decided: it does not wait again


@pytest.mark.parametrize(
    ("run_id", "workflow", "pattern"),
    [
        ("nope", None, r"^\[input_validation\] Runs\.resume: no run 'nope' in the journal$"),
        ("", None, r"^\[input_validation\] Runs\.resume: run_id must be a string$"),
        (3, None, r"^\[input_validation\] Runs\.resume: run_id must be a string$"),
        ("done", None, r"^\[input_validation\] run 'done' has ended \(run:completed\): "),
        ("open", "other", r"^\[config_invalid\] run 'open' started with another definition"),
        ("open", "nothing", r"^\[config_invalid\] run 'open': no workflow named 'w' to resume"),
        ("open", "bad", r"^\[input_validation\] Runs\.resume: workflow must be a Workflow"),
    ],
)
async def test_resume_refuses_what_it_cannot_resume(
    autojump_clock: Any, run_id: Any, workflow: str | None, pattern: str
) -> None:
    wf = Workflow(name="w", nodes=[Approval(id="ok")])
    store = MemoryStore()
    async with journalled(store) as (_, runs, _journal):
        done = await runs.start(wf, run_id="done")
        await trio.sleep(1)
        done.decide("ok", "approve", by="x")
        await done.wait()
        await runs.start(wf, run_id="open")
        await trio.sleep(1)
        kept = crashed(store)
    others = {
        None: None,
        "other": Workflow(name="w", nodes=[Approval(id="ok"), Step(id="extra", fn=_noop)]),
        "nothing": None,
        "bad": "not a workflow",
    }
    known = [] if workflow == "nothing" else [wf]
    async with journalled(kept, workflows=known, resume=False) as (_, runs, _journal):
        with pytest.raises(ActorError, match=pattern):
            await runs.resume(run_id, others[workflow])  # type: ignore[arg-type]


async def test_resume_without_a_journal_or_of_a_live_run_is_refused(autojump_clock: Any) -> None:
    from tests.runs_helpers import running

    wf = Workflow(name="w", nodes=[Approval(id="ok")])
    async with running() as (_, runs):
        with pytest.raises(
            ActorError, match=r"^\[config_invalid\] Runs\.resume: the runs have no journal$"
        ):
            await runs.resume("r")
    async with journalled(workflows=[wf]) as (_, runs, _journal):
        await runs.start(wf, run_id="live")
        with pytest.raises(ActorError, match=r"^\[name_taken\] run 'live' is running$"):
            await runs.resume("live")
        with pytest.raises(
            ActorError, match=r"^\[name_taken\] run 'live' is in the journal already$"
        ):
            runs.live["live"].cancel("x")
            await trio.sleep(1)
            await runs.start(wf, run_id="live")


async def test_values_a_journal_cannot_carry_are_refused(autojump_clock: Any) -> None:
    async def odd(ctx: NodeContext) -> dict[str, Any]:
        return {"tags": {"a", "b"}}

    async with journalled() as (_, runs, _journal):
        with pytest.raises(
            ActorError,
            match=r"^\[input_validation\] Runs\.start: inputs must be JSON data with a journal \(set is not JSON data\)$",
        ):
            await runs.start(Workflow(name="w", nodes=[Step(id="a", fn=_noop)]), {"s": {1}})
        run = await runs.start(Workflow(name="w", nodes=[Step(id="a", fn=odd, writes=["tags"])]))
        outcome = await run.wait()
    assert outcome.code == "output_validation"
    assert outcome.error is not None
    assert outcome.error.message == (
        "node 'a': its updates are not JSON data, which a run with a journal needs "
        "(set is not JSON data)"
    )
    assert run.run_id.startswith("run-") and len(run.run_id) == 20  # unique across restarts


async def test_a_store_failing_twice_delays_the_run_and_loses_nothing(autojump_clock: Any) -> None:
    store = FlakyStore()
    effects = Effects()
    wf = chain(effects, "a", "b")
    async with journalled(store) as (_, runs, _journal):
        store.fail = 2
        with capture_events("journal.append_failed", "journal.recovered") as seen:
            run = await runs.start(wf, run_id="r")
            outcome = await run.wait()
    assert outcome.status == "completed"
    assert [(e.name, getattr(e, "retry_in", None)) for e in seen] == [
        ("journal.append_failed", 2.0),
        ("journal.append_failed", 4.0),
        ("journal.recovered", None),
    ]
    assert [r.at for r in of(run, "node:started")] == [6.0, 6.0]  # nothing ran before t=6
    assert stored(store, "r") == list(run.history)
    assert [r.seq for r in run.history] == list(range(6))


async def test_three_failures_halt_the_run_and_a_resume_completes_it(autojump_clock: Any) -> None:
    store = FlakyStore()
    effects = Effects()
    calls = effects.calls

    async def breaks_the_disk(ctx: NodeContext) -> dict[str, Any]:
        calls.append((ctx.key, ctx.attempt))
        if len(calls) == 1:
            store.fail = -1  # from now on every write fails: a's completion is not durable
        return {"a": 1}

    wf = Workflow(
        name="fan",
        nodes=[
            Step(id="a", fn=breaks_the_disk, writes=["a"]),
            effects.step("b"),
            effects.step("c"),
        ],
        edges=[Edge(source="a", target="b"), Edge(source="a", target="c")],
    )
    async with journalled(store, runners=2) as (_, runs, _journal):
        run = await runs.start(wf, run_id="h")
        with capture_events("journal.append_failed", "journal.unavailable") as seen:
            outcome = await run.wait()
        kept = crashed(store)
        store.fail = 0
    assert outcome.code == "persistence_unavailable"
    assert outcome.error is not None
    assert outcome.error.message == "the journal failed 3 consecutive writes"
    assert [(e.name, e.failures) for e in seen] == [
        ("journal.append_failed", 1),
        ("journal.append_failed", 2),
        ("journal.append_failed", 3),
        ("journal.unavailable", 3),
    ]
    assert of(run, "run:failed")[0].at == 6.0
    assert calls == [("h:a:1", 1)]  # neither b nor c started
    # Readers saw only what the journal has, then the halt (not journalled).
    assert names(run) == ["run:started", "node:started", "run:failed"]
    assert [r.seq for r in run.history] == [0, 1, 2]
    row = kept.run("h")
    assert row is not None and row.status == "running"  # the halt is not journalled
    assert [r.name for r in stored(kept, "h")] == ["run:started", "node:started"]  # a began
    async with journalled(kept, workflows=[wf], runners=2) as (_, runs, _journal):
        (again,) = runs.resumed
        final = await again.wait()
    assert final.status == "completed"
    assert sorted(calls) == [("h:a:1", 1), ("h:a:1", 1), ("h:b:1", 1), ("h:c:1", 1)]
    assert [r.seq for r in stored(kept, "h")] == list(range(len(again.history)))


async def test_a_halt_cancels_the_work_in_flight(autojump_clock: Any) -> None:
    store = FlakyStore()
    cancelled: list[str] = []

    async def sleeper(ctx: NodeContext) -> None:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            cancelled.append(ctx.node_id)
            raise

    async def quick(ctx: NodeContext) -> dict[str, Any]:
        store.fail = -1  # its completion cannot be journalled
        return {"quick": 1}

    wf = Workflow(
        name="w",
        nodes=[Step(id="sleepy", fn=sleeper), Step(id="quick", fn=quick, writes=["quick"])],
        start=["sleepy", "quick"],
    )
    async with journalled(store, runners=2) as (_, runs, _journal):
        run = await runs.start(wf, run_id="x")
        outcome = await run.wait()
    assert outcome.code == "persistence_unavailable"
    assert cancelled == ["sleepy"]
    assert of(run, "run:failed")[0].at == 6.0


async def test_runs_over_a_closed_journal_refuse_to_start(autojump_clock: Any) -> None:
    from supervisors import SupervisorSpec, open_tree
    from supervisors.runs import open_journal, open_runs

    wf = chain(Effects(), "a")
    async with open_tree(SupervisorSpec()) as tree:
        async with open_journal(MemoryStore()) as journal:
            pass
        assert journal.closed
        async with open_runs(tree, journal=journal) as runs:
            with pytest.raises(
                ActorError, match=r"^\[actor_stopped\] the runs' journal is closed$"
            ):
                await runs.start(wf)


async def test_a_node_whose_start_cannot_be_journalled_never_does_its_work(
    autojump_clock: Any,
) -> None:
    class BreaksAfterA(FlakyStore):
        def write(self, batch: Any) -> None:
            super().write(batch)
            if any(e.name == "node:completed" for e in batch.entries):
                self.fail = -1  # from now on: b's node:started is never durable

    store = BreaksAfterA()
    effects = Effects()
    async with journalled(store) as (_, runs, _journal):
        run = await runs.start(chain(effects, "a", "b"), run_id="w")
        outcome = await run.wait()
    assert outcome.code == "persistence_unavailable"
    assert effects.calls == [("w:a:1", 1)]  # b was started on a runner, but did no work
    assert [r.name for r in stored(store, "w")] == [
        "run:started",
        "node:started",
        "node:completed",
    ]
    assert list(run.history[:-1]) == stored(store, "w")  # b's start was never shown
    assert run.history[-1].name == "run:failed" and run.history[-1].seq == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"journal": "runs.journal"}, r"open_runs: journal must be a Journal or None, got str"),
        ({"workflows": 3}, r"open_runs: workflows must be an iterable of Workflow, got int"),
        ({"workflows": ["w"]}, r"open_runs: workflows must be an iterable of Workflow, got list"),
        (
            {
                "workflows": [
                    Workflow(name="w", nodes=[Approval(id="a")]),
                    Workflow(name="w", nodes=[Approval(id="b")]),
                ]
            },
            r"open_runs: two workflows are named 'w'",
        ),
    ],
)
async def test_bad_journal_options_are_config_invalid(
    autojump_clock: Any, options: dict[str, Any], message: str
) -> None:
    from supervisors import SupervisorSpec, open_tree
    from supervisors.runs import open_runs

    async with open_tree(SupervisorSpec()) as tree:
        with pytest.raises(ActorError, match=rf"^\[config_invalid\] {message}$"):
            async with open_runs(tree, **options):
                pass  # pragma: no cover
        assert tree.root.which_children() == []  # nothing was left under the tree


async def test_resume_after_the_runs_closed_is_refused(autojump_clock: Any) -> None:
    wf = chain(Effects(), "a")
    async with journalled(workflows=[wf]) as (_, runs, _journal):
        runs.close("shutting down")
        with pytest.raises(ActorError, match=r"^\[actor_stopped\] the runs are closed$"):
            await runs.resume("r")


async def test_a_caller_cancelled_while_start_waits_for_the_journal_leaves_no_run_behind(
    autojump_clock: Any,
) -> None:
    # start returns once run:started is durable; the store fails for now, the caller's
    # scope is cancelled meanwhile: trio.Cancelled, and the run it never got is cancelled
    # with the scope's reason — journalled once the store works again, nothing left live.
    store = FlakyStore()
    store.fail = -1
    flow = Workflow(name="w", nodes=[Step(id="a", fn=_noop)])
    async with journalled(store) as (_, runs, _journal):
        with trio.CancelScope() as scope:
            scope.deadline = trio.current_time() + 1
            await runs.start(flow, run_id="r")
        assert scope.cancelled_caught
        store.fail = 0
        with trio.fail_after(120):
            while runs.live or not store.entries("r"):
                await trio.sleep(1)
    records = [record_of(entry) for entry in store.entries("r")]
    assert [r.name for r in records] == ["run:started", "run:cancelled"]
    assert (records[-1].reason, records[-1].resumable) == ("cancelled (deadline)", False)
