"""open_daemon: SIGTERM / SIGINT start a graceful shutdown of the runs; a second signal
ends the grace; Daemon.stop does the same from code. Real signals to this process,
virtual time."""

from __future__ import annotations

import math
import os
import signal
from typing import Any

import pytest
import trio

from actors import ActorError
from actors.events import DaemonStopping
from actors.journal import MemoryStore, record_of
from actors.testing import capture_events
from supervisors import Daemon, open_daemon
from tests.journal_helpers import journalled
from tests.test_runs_shutdown import Slow


async def _signal_at(seconds: float, signum: int) -> None:
    await trio.sleep(seconds)
    os.kill(os.getpid(), signum)


@pytest.mark.parametrize(
    ("signum", "reason"), [(signal.SIGTERM, "sigterm"), (signal.SIGINT, "sigint")]
)
async def test_a_signal_shuts_the_runs_down_after_the_grace(
    autojump_clock: Any, signum: int, reason: str
) -> None:
    store, slow = MemoryStore(), Slow()
    workflow = slow.workflow()
    async with (
        open_daemon(grace=5) as daemon,
        journalled(store, workflows=[workflow]) as (_, runs, _journal),
    ):
        await runs.start(workflow, {"seconds": 3}, run_id="quick")
        await runs.start(workflow, {"seconds": 100}, run_id="long")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_signal_at, 1.0, signum)
            summary = await daemon.serve(runs)
        assert trio.current_time() == 6.0  # the signal at 1, then the 5 s grace
    assert (daemon.reason, daemon.stopping.is_set(), daemon.hurried) == (reason, True, False)
    assert (summary.reason, summary.finished, summary.interrupted) == (
        reason,
        {"completed": 1},
        ("long",),
    )
    last = record_of(store.entries("long")[-1])
    assert (last.name, last.reason, last.resumable) == ("run:cancelled", reason, True)
    assert store.unfinished() == ["long"]


async def test_a_second_signal_ends_the_grace_at_once(autojump_clock: Any) -> None:
    slow = Slow()
    async with open_daemon(grace=30) as daemon, journalled() as (_, runs, _journal):
        await runs.start(slow.workflow(), {"seconds": 100}, run_id="r")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_signal_at, 1.0, signal.SIGTERM)
            nursery.start_soon(_signal_at, 3.0, signal.SIGINT)
            summary = await daemon.serve(runs)
        assert trio.current_time() == 3.0
    assert (daemon.reason, daemon.hurried, summary.reason) == ("sigterm", True, "sigterm")
    assert (summary.interrupted, summary.took) == (("r",), 2.0)


async def test_two_signals_before_serve_give_no_grace(autojump_clock: Any) -> None:
    slow = Slow()
    async with open_daemon(grace=30) as daemon, journalled() as (_, runs, _journal):
        await runs.start(slow.workflow(), {"seconds": 100}, run_id="r")
        daemon.stop("first")
        daemon.stop("second")
        summary = await daemon.serve(runs)
        assert trio.current_time() == 0.0
    assert (summary.reason, summary.grace, summary.interrupted) == ("first", 0.0, ("r",))


async def test_stop_from_code_is_a_signal(autojump_clock: Any) -> None:
    async with open_daemon(grace=2) as daemon, journalled() as (_, runs, _journal):
        daemon.stop("admin")
        summary = await daemon.serve(runs)
    assert summary.line() == (
        "shutdown (admin): 0 runs ended in the grace, 0 interrupted and resumable, 0.00 s"
    )


async def test_a_cancelled_serve_interrupts_the_runs_resumably(autojump_clock: Any) -> None:
    store, slow = MemoryStore(), Slow()
    async with open_daemon() as daemon, journalled(store) as (_, runs, _journal):
        run = await runs.start(slow.workflow(), {"seconds": 100}, run_id="r")
        with trio.move_on_after(4):
            await daemon.serve(runs)
        assert trio.current_time() == 4.0  # no grace for a cancel
        assert run.done  # interrupted and ended before the cancel went on
        outcome = await run.wait()
    assert (outcome.status, outcome.reason) == ("interrupted", "cancelled")
    assert record_of(store.entries("r")[-1]).resumable is True
    assert not daemon.stopping.is_set()


async def test_a_cancel_around_the_daemon_and_its_runs_interrupts_them_resumably(
    autojump_clock: Any,
) -> None:
    """The scope around the whole daemon (a host shutting down) cancelled: the serve
    interrupts the runs, resumable, with that scope's reason — every time, not as the
    scheduler happened to order the tasks."""
    store, slow = MemoryStore(), Slow()
    with trio.move_on_after(4):
        async with open_daemon() as daemon, journalled(store) as (_, runs, _journal):
            run = await runs.start(slow.workflow(), {"seconds": 100}, run_id="r")
            await daemon.serve(runs)
    outcome = await run.wait()
    assert (outcome.status, outcome.reason) == ("interrupted", "cancelled (deadline)")
    assert record_of(store.entries("r")[-1]).resumable is True
    assert store.unfinished() == ["r"]


async def test_the_signal_handlers_come_back_after_the_block(autojump_clock: Any) -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    async with open_daemon(signals=[signal.SIGTERM]) as daemon:
        assert signal.getsignal(signal.SIGTERM) != before[0]
        assert signal.getsignal(signal.SIGINT) == before[1]  # only the signals asked for
        assert daemon.grace == 30.0
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


async def test_an_error_in_the_block_comes_out_as_raised(autojump_clock: Any) -> None:
    with pytest.raises(ZeroDivisionError):
        async with open_daemon():
            1 / 0  # noqa: B018


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"grace": -1}, "grace must be seconds >= 0"),
        ({"grace": math.nan}, "grace must be seconds >= 0"),
        ({"grace": True}, "grace must be seconds >= 0"),
        ({"signals": []}, "signals must be signal.Signals that can be caught, at least one"),
        ({"signals": [15]}, "signals must be signal.Signals that can be caught, at least one"),
        ({"signals": 5}, "signals must be signal.Signals that can be caught, at least one"),
        (
            {"signals": [signal.SIGTERM, signal.SIGKILL]},
            "signals must be signal.Signals that can be caught, at least one",
        ),
        ({"grace": "5"}, "grace must be seconds >= 0"),
    ],
)
async def test_bad_daemon_settings_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(Exception, match=rf"^\[input_validation\] open_daemon: {message}"):
        async with open_daemon(**options):
            pass


async def test_bad_calls_are_refused(autojump_clock: Any) -> None:
    async with open_daemon() as daemon:
        assert isinstance(daemon, Daemon)
        assert (daemon.reason, daemon.hurried) == (None, False)
        with pytest.raises(Exception, match=r"^\[input_validation\] Daemon.stop: reason must"):
            daemon.stop("")
        with pytest.raises(
            Exception, match=r"^\[input_validation\] Daemon.serve: runs must be a Runs, got str"
        ):
            await daemon.serve("runs")  # type: ignore[arg-type]
        assert not daemon.stopping.is_set()


def test_outside_the_main_thread_it_is_config_invalid() -> None:
    import threading

    caught: list[BaseException] = []

    def worker() -> None:
        async def inner() -> None:
            async with open_daemon():
                pytest.fail("opened")

        try:
            trio.run(inner)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            caught.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    (error,) = caught
    assert isinstance(error, ActorError)
    assert str(error) == (
        "[config_invalid] open_daemon: must run in the main thread (Python delivers signals there)"
    )


async def test_stop_without_a_reason_says_stop(autojump_clock: Any) -> None:
    async with open_daemon(grace=1) as daemon, journalled() as (_, runs, _journal):
        daemon.stop()
        summary = await daemon.serve(runs)
    assert (daemon.reason, summary.reason) == ("stop", "stop")


async def test_two_signals_sent_back_to_back_are_two(autojump_clock: Any) -> None:
    """Trio's own signal receiver merges a signal repeated before it is read: the daemon
    counts every delivery, so the second ends the grace."""
    slow = Slow()
    async with open_daemon(grace=30) as daemon, journalled() as (_, runs, _journal):
        await runs.start(slow.workflow(), {"seconds": 100}, run_id="r")
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        summary = await daemon.serve(runs)
        assert trio.current_time() == 0.0
    assert (daemon.reason, daemon.hurried, summary.interrupted) == ("sigterm", True, ("r",))


async def test_a_grace_too_large_for_a_float_is_no_limit_and_zero_is_allowed(
    autojump_clock: Any,
) -> None:
    async with open_daemon(grace=10**400) as daemon:
        assert daemon.grace == math.inf
    async with open_daemon(grace=0) as daemon:
        assert daemon.grace == 0.0


async def test_a_second_stop_hurries_every_runs_being_served(autojump_clock: Any) -> None:
    from supervisors import SupervisorSpec, open_tree
    from supervisors.runs import open_runs

    slow = Slow()
    got: list[float] = []
    async with (
        open_daemon(grace=50) as daemon,
        open_tree(SupervisorSpec()) as tree,
        open_runs(tree, name="one") as one,
        open_runs(tree, name="two") as two,
    ):
        await one.start(slow.workflow(), {"seconds": 100})
        await two.start(slow.workflow(), {"seconds": 100})

        async def serve(runs: Any) -> None:
            await daemon.serve(runs)
            got.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve, one)
            nursery.start_soon(serve, two)
            await trio.sleep(1)
            daemon.stop("first")
            await trio.sleep(2)
            daemon.stop("second")
    assert got == [3.0, 3.0]


async def test_a_cancel_around_the_daemon_block_puts_the_handlers_back(
    autojump_clock: Any,
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with trio.move_on_after(1) as scope:
        async with open_daemon() as daemon:
            assert signal.getsignal(signal.SIGTERM) != before
            await trio.sleep(10)
    assert scope.cancelled_caught and trio.current_time() == 1.0
    assert signal.getsignal(signal.SIGTERM) == before
    daemon.stop("after")  # a stop after the block is left starts nothing
    daemon.stop("again")
    assert (daemon.reason, daemon.hurried) == ("after", True)


async def test_an_abort_of_the_tree_while_serving_cancels_the_runs_for_good(
    autojump_clock: Any,
) -> None:
    from actors import ActorError as Error

    store, slow = MemoryStore(), Slow()
    with pytest.raises(Error, match=r"^\[cancelled\] operator abort"):
        async with open_daemon(grace=30) as daemon, journalled(store) as (tree, runs, _journal):
            run = await runs.start(slow.workflow(), {"seconds": 100}, run_id="r")
            await trio.sleep(1)
            tree.abort("operator abort")
            await daemon.serve(runs)
    outcome = await run.wait()
    assert (outcome.status, outcome.reason) == ("cancelled", "operator abort")
    assert record_of(store.entries("r")[-1]).resumable is False  # an abort is for good
    assert store.unfinished() == []


async def test_each_signal_and_stop_reports_daemon_stopping_in_order(autojump_clock: Any) -> None:
    slow = Slow()
    with capture_events(DaemonStopping) as stopping:
        async with open_daemon(grace=30) as daemon, journalled() as (_, runs, _journal):
            await runs.start(slow.workflow(), {"seconds": 100}, run_id="r")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_signal_at, 1.0, signal.SIGTERM)
                nursery.start_soon(_signal_at, 3.0, signal.SIGINT)
                await daemon.serve(runs)
        daemon.stop("after the block")  # a third stop, once closed: nothing to report
    assert [(e.reason, e.grace, e.hurried) for e in stopping] == [
        ("sigterm", 30.0, False),
        ("sigint", 0.0, True),
    ]


async def test_a_stop_from_code_reports_its_reason_and_grace(autojump_clock: Any) -> None:
    with capture_events("daemon.stopping") as stopping:
        async with open_daemon(grace=2.5) as daemon, journalled() as (_, runs, _journal):
            daemon.stop("admin")
            assert len(stopping) == 1  # reported at once, before serve
            await daemon.serve(runs)
    assert [e.fields() for e in stopping] == [{"reason": "admin", "grace": 2.5, "hurried": False}]
