"""The first cancel reason wins (issue 27), in every same-instant order of the ways a
run is cancelled — enumerated exhaustively, not sampled:

* ``api`` — ``run.cancel("api")``;
* ``interrupt`` — ``run.interrupt("shutdown")``, a graceful shutdown's cancel (without
  a journal the run ends ``cancelled``: nothing keeps it);
* ``abort`` — ``tree.abort("abort")``;
* ``scope`` — the cancel of a scope around the tree and the runs;
* ``caller`` — the cancel of the caller waiting on the run through ``Runs.run``.

``api``, ``interrupt`` and ``abort`` are recorded as they are made; ``scope`` and
``caller`` are on their way (a ``trio.Cancelled`` no task has seen yet) and read through
trio's cancel status (:func:`actors.lowlevel.cancelled_around`). Every order of every
subset of the first four, and of ``api``, ``interrupt`` and ``caller``, ends the run
``run:cancelled`` with the first one's reason. Between ``caller`` and ``scope`` or
``abort`` trio keeps no order (two scope cancels in one instant): not promised.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio
import trio.testing

from actors import CancelledError
from supervisors import SupervisorSpec, open_tree
from supervisors.runs import NodeContext, Workflow, open_runs
from tests.runs_helpers import assert_well_formed, step

REASONS = {
    "api": "api",
    "interrupt": "shutdown",
    "abort": "abort",
    "scope": "scope",
    "caller": "caller",
}


def _orders(kinds: tuple[str, ...]) -> list[tuple[str, ...]]:
    return [
        order for size in range(1, len(kinds) + 1) for order in itertools.permutations(kinds, size)
    ]


ORDERS = _orders(("api", "interrupt", "abort", "scope")) + [
    order for order in _orders(("api", "interrupt", "caller")) if "caller" in order
]


async def _sleep(ctx: NodeContext) -> None:
    await trio.sleep(1000)


WF = Workflow(name="w", nodes=[step("a", _sleep)])


async def _cancel_in_order(order: tuple[str, ...]) -> Any:
    """One run cancelled by ``order``'s sources in one instant; the run."""
    found: list[Any] = []
    with trio.CancelScope() as around:
        try:
            async with open_tree(SupervisorSpec()) as tree, open_runs(tree) as runs:
                caller = trio.CancelScope()

                async def wait_on_it() -> None:
                    with caller:
                        await runs.run(WF, run_id="r")

                async with trio.open_nursery() as callers:
                    if "caller" in order:
                        callers.start_soon(wait_on_it)
                        await trio.sleep(1)
                        run = runs.live["r"]
                    else:
                        run = await runs.start(WF, run_id="r")
                    found.append(run)
                    await trio.sleep(2)
                    for source in order:  # one instant: no checkpoint between them
                        if source == "api":
                            run.cancel(REASONS["api"])
                        elif source == "interrupt":
                            run.interrupt(REASONS["interrupt"])
                        elif source == "abort":
                            tree.abort(REASONS["abort"])
                        elif source == "scope":
                            around.cancel(reason=REASONS["scope"])
                        else:
                            caller.cancel(reason=REASONS["caller"])
                    with trio.move_on_after(100):
                        await run.wait()
        except CancelledError:  # the tree's own ending, after an abort
            assert "abort" in order
    return found[0]


@pytest.mark.parametrize("order", ORDERS, ids="-".join)
def test_the_first_cancel_reason_wins_in_every_same_instant_order(
    order: tuple[str, ...],
) -> None:
    run = trio.run(_cancel_in_order, order, clock=trio.testing.MockClock(autojump_threshold=0))
    assert run.done
    assert_well_formed(run)
    terminal = run.history[-1]
    assert (terminal.name, terminal.reason) == ("run:cancelled", REASONS[order[0]])
    assert terminal.resumable is False  # no journal keeps it
    assert run.status == "cancelled"


def test_the_orders_are_all_there() -> None:
    assert len(ORDERS) == 64 + 11
    assert len(set(ORDERS)) == len(ORDERS)


@pytest.mark.parametrize(
    ("order", "reason", "resumable"),
    [
        (("scope", "interrupt"), "scope", True),
        (("interrupt", "scope"), "shutdown", True),
        (("abort", "interrupt"), "abort", False),
        (("interrupt", "abort"), "shutdown", True),
        (("scope", "api"), "scope", False),
        (("api", "interrupt"), "api", False),
    ],
)
async def test_with_a_journal_an_interrupt_after_a_scope_cancel_stays_resumable(
    autojump_clock: Any, order: tuple[str, ...], reason: str, resumable: bool
) -> None:
    """The first reason wins, and whether the run stays resumable is the interrupt's: a
    daemon interrupting its runs because the scope around it was cancelled keeps them
    for the next daemon (an abort, or an api cancel first, ends them for good)."""
    from actors.journal import MemoryStore, record_of
    from tests.journal_helpers import journalled

    store = MemoryStore()
    found: list[Any] = []
    with trio.CancelScope() as around:
        try:
            async with journalled(store, workflows=[WF]) as (tree, runs, _journal):
                run = await runs.start(WF, run_id="r")
                found.append(run)
                await trio.sleep(2)
                for source in order:
                    if source == "scope":
                        around.cancel(reason=REASONS["scope"])
                    elif source == "interrupt":
                        run.interrupt(REASONS["interrupt"])
                    elif source == "abort":
                        tree.abort(REASONS["abort"])
                    else:
                        run.cancel(REASONS["api"])
                await run.wait()
        except CancelledError:
            assert "abort" in order
    (run,) = found
    last = record_of(store.entries("r")[-1])
    assert (last.name, last.reason, last.resumable) == ("run:cancelled", reason, resumable)
    assert (await run.wait()).status == ("interrupted" if resumable else "cancelled")
    assert store.unfinished() == (["r"] if resumable else [])
