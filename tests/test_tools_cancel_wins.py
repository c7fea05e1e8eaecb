"""Issue 26: a tool that fails *while* its call is cancelled never makes the call a
``tool_failed`` — through the front door, under a tree abort or a cancelled scope around
the tree, and through a run's agent node.

The seeded schedules: ``random.Random(seed)`` picks how many calls run at once, what each
tool does under the cancel (raise a ``ValueError`` from ``except trio.Cancelled``, raise a
group holding ``trio.Cancelled`` next to a ``ValueError`` from its own nursery, shield a
cleanup then raise), the tool's retry policy and when the cancel lands — a virtual time,
then a number of checkpoints in that instant (before, at, or just after the replies move).
Every run is on ``MockClock(autojump_threshold=0)``: virtual times are exact.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actors import ActorError, Code
from actors.testing import capture_events
from actors.tools import Grants, ToolContext, ToolGroup, tool
from supervisors import Backoff, RetryPolicy
from supervisors.runs import Agent, Workflow
from tests.cancel_helpers import holds_value_error
from tests.runs_helpers import names, of, world
from tests.tools_helpers import hosted

SEEDS = range(12)
REASON = "operator stop"
MODES = ("raise", "group", "stubborn")


@attrs.define
class Seen:
    """How each run of the tool ended, by idempotency key."""

    ended: dict[str, str] = attrs.Factory(dict)


async def behave(seen: Seen, key: str, mode: str, seconds: float) -> str:
    """Sleep ``seconds``, then ``"done"``; cancelled meanwhile, fail as ``mode`` says
    instead of letting the cancel out."""
    if mode == "group":
        # Its own nursery: under the cancel one child breaks, the other is cancelled, so
        # the group holds trio.Cancelled and a ValueError.
        async def breaks() -> None:
            try:
                await trio.sleep(seconds)
            except trio.Cancelled:
                seen.ended[key] = "raised"
                raise ValueError("cleanup broke") from None

        async with trio.open_nursery() as nursery:
            nursery.start_soon(breaks)
            await trio.sleep(seconds + 1)
        return "done"  # pragma: no cover - breaks() returned: not in these schedules
    try:
        await trio.sleep(seconds)
    except trio.Cancelled:
        seen.ended[key] = "raised"
        if mode == "stubborn":
            with trio.CancelScope(shield=True):
                await trio.sleep(0.5)
        raise ValueError("cleanup broke") from None
    seen.ended[key] = "returned"
    return "done"


def misbehaving(seen: Seen, *, retry: RetryPolicy | None = None) -> Any:
    """``flaky(mode, seconds)``, as :func:`behave`."""

    async def flaky(mode: str, seconds: float, context: ToolContext) -> str:
        return await behave(seen, context.key, mode, seconds)

    return tool(flaky, retry=retry)


def for_agent(seen: Seen) -> Any:
    """``flaky(query)`` for the chaos model's tool call: ``query`` is the mode, 50 s."""

    async def flaky(query: str, context: ToolContext) -> str:
        return await behave(seen, context.key, query, 50.0)

    return tool(flaky)


def schedule(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    return {
        "calls": rng.randint(1, 3),
        "modes": [rng.choice(MODES) for _ in range(3)],
        "seconds": rng.choice([1.0, 2.0, 3.0]),
        "cancel_at": rng.choice([0.0, 0.5, 1.0, 1.5, 2.0]),
        "checkpoints": rng.randint(0, 6),
        "retry": rng.choice(
            [None, RetryPolicy(max_attempts=2, backoff=Backoff(initial=0.5, jitter=0))]
        ),
    }


async def land(at: float, checkpoints: int) -> None:
    """Wait until virtual time ``at``, then ``checkpoints`` more schedule points."""
    await trio.sleep_until(at)
    for _ in range(checkpoints):
        await trio.lowlevel.checkpoint()


def check_answer(seen: Seen, key: str, answer: Any, cancelled_at: float) -> None:
    """A call's answer is its value (the tool returned before the cancel), or
    ``cancelled`` with the cancel's reason — never ``tool_failed``."""
    if not isinstance(answer, ActorError):
        assert answer == "done" and seen.ended[key] == "returned"
        return
    assert (answer.code, answer.message, answer.tool) == (Code.CANCELLED, REASON, "flaky")
    assert trio.current_time() >= cancelled_at
    if seen.ended.get(key) == "raised":
        assert answer.delivered is True
        assert holds_value_error(answer), "the tool's failure is kept as the cause"


@asynccontextmanager
async def tree_outside(group: ToolGroup, ends: list[ActorError]) -> AsyncIterator[Any]:
    """The tree runs in a task of its own: its callers are outside its block, so only the
    abort reaches them (the block's own cancel, when the aborted root ends, does not).
    How the tree ended goes to ``ends``."""

    async def run_tree(*, task_status: trio.TaskStatus[Any]) -> None:
        try:
            async with hosted(group, grants=Grants.allow("flaky")) as pair:
                task_status.started(pair)
                await trio.sleep_forever()
        except ActorError as end:
            ends.append(end)

    async with trio.open_nursery() as nursery:
        yield await nursery.start(run_tree)


async def _aborted(seed: int) -> None:
    plan = schedule(seed)
    seen = Seen()
    answers: dict[str, Any] = {}
    ends: list[ActorError] = []
    group = ToolGroup("g", [misbehaving(seen, retry=plan["retry"])], concurrency=2)

    async def call(tools: Any, index: int) -> None:
        key = f"k{index}"
        arguments = {"mode": plan["modes"][index], "seconds": plan["seconds"]}
        try:
            answers[key] = (await tools.call("flaky", arguments, key=key)).value
        except ActorError as error:
            answers[key] = error

    with capture_events("tool.call_failed", "tool.retry") as events:
        async with tree_outside(group, ends) as (tree, tools), trio.open_nursery() as callers:
            for index in range(plan["calls"]):
                callers.start_soon(call, tools, index)
            await land(plan["cancel_at"], plan["checkpoints"])
            tree.abort(REASON)
    assert [(end.code, end.message) for end in ends] == [(Code.CANCELLED, REASON)]
    assert len(answers) == plan["calls"]
    for key, answer in answers.items():
        check_answer(seen, key, answer, plan["cancel_at"])
    failed = [e.code for e in events if e.name == "tool.call_failed"]
    assert failed == ["cancelled"] * len(failed)
    assert not [e for e in events if e.name == "tool.retry"]  # a cancel is never retried


@pytest.mark.parametrize("seed", SEEDS)
def test_a_tool_failing_while_its_tree_is_aborted_is_cancelled_with_the_reason(
    seed: int,
) -> None:
    trio.run(_aborted, seed, clock=trio.testing.MockClock(autojump_threshold=0))


async def _enclosing(seed: int) -> None:
    plan = schedule(seed)
    seen = Seen()
    outside: dict[str, Any] = {}
    inside: dict[str, BaseException] = {}
    group = ToolGroup("g", [misbehaving(seen, retry=plan["retry"])], concurrency=3)
    scope = trio.CancelScope()

    async def run_tree(*, task_status: trio.TaskStatus[Any]) -> None:
        with scope:
            async with hosted(group, grants=Grants.allow("flaky")) as (_, tools):
                task_status.started(tools)
                arguments = {"mode": plan["modes"][0], "seconds": plan["seconds"]}
                try:
                    await tools.call("flaky", arguments, key="inner")
                except BaseException as exc:
                    inside["inner"] = exc
                    raise
                await trio.sleep_forever()

    async def call(tools: Any, index: int) -> None:
        key = f"k{index}"
        arguments = {"mode": plan["modes"][index], "seconds": plan["seconds"]}
        try:
            outside[key] = (await tools.call("flaky", arguments, key=key)).value
        except ActorError as error:
            outside[key] = error

    with capture_events("tool.call_failed") as events:
        async with trio.open_nursery() as nursery:
            tools = await nursery.start(run_tree)
            for index in range(1, plan["calls"]):
                nursery.start_soon(call, tools, index)
            await land(plan["cancel_at"], plan["checkpoints"])
            scope.cancel(reason=REASON)
    assert scope.cancelled_caught
    # The caller inside the cancelled scope: its own scope was cancelled → trio.Cancelled
    # (docs/actors.md, "the caller's own scope cancelled"), whatever the tool raised.
    if "inner" in inside:
        assert isinstance(inside["inner"], trio.Cancelled), repr(inside["inner"])
    else:
        assert seen.ended.get("inner") == "returned"
    # Callers outside it: "a trio scope around the tree cancelled" → cancelled, its reason.
    assert len(outside) == plan["calls"] - 1
    for key, answer in outside.items():
        check_answer(seen, key, answer, plan["cancel_at"])
    assert all(e.code == "cancelled" for e in events), [e.code for e in events]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_tool_failing_under_a_cancelled_scope_around_the_tree_is_a_cancel(
    seed: int,
) -> None:
    trio.run(_enclosing, seed, clock=trio.testing.MockClock(autojump_threshold=0))


@pytest.mark.parametrize("mode", MODES)
async def test_the_answer_keeps_the_tools_failure_as_cause_and_logs_it_suppressed(
    autojump_clock: Any, mode: str
) -> None:
    seen = Seen()
    ends: list[ActorError] = []
    with capture_events("error.suppressed", "tool.call_failed") as events:
        async with tree_outside(ToolGroup("g", [misbehaving(seen)]), ends) as (tree, tools):

            async def abort_later() -> None:
                await trio.sleep(1.0)
                tree.abort(REASON)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(abort_later)
                with pytest.raises(ActorError) as caught:
                    await tools.call("flaky", {"mode": mode, "seconds": 5}, key="k")
            answered_at = trio.current_time()
    error = caught.value
    assert (error.code, error.message, error.tool, error.attempt, error.delivered) == (
        Code.CANCELLED,
        REASON,
        "flaky",
        1,
        True,
    )
    # Answered when the run ended: at the abort, or after the shielded cleanup (0.5 s).
    assert answered_at == (1.5 if mode == "stubborn" else 1.0)
    assert seen.ended == {"k": "raised"}
    assert holds_value_error(error)
    suppressed = [e for e in events if e.name == "error.suppressed"]
    assert [e.actor for e in suppressed] == ["/tools-test/tools.g.0"]
    assert [(e.name, e.code) for e in events if e.name == "tool.call_failed"] == [
        ("tool.call_failed", "cancelled")
    ]
    assert [(end.code, end.message) for end in ends] == [(Code.CANCELLED, REASON)]


# --- through a run's agent node ---------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["abort", "enclosing", "run_cancel"])
async def test_a_run_whose_agent_tool_fails_while_cancelled_ends_cancelled(
    autojump_clock: Any, how: str, mode: str
) -> None:
    seen = Seen()
    flaky = for_agent(seen)
    agent = Agent(
        id="a",
        model="m1",
        messages=[("user", f"call: {mode}")],
        grants=Grants.allow("flaky"),
    )
    wf = Workflow(name="w", nodes=[agent])
    scope = trio.CancelScope()
    run: Any = None
    with capture_events("tool.call_failed") as failed, scope:
        try:
            async with world(None, ToolGroup("g", [flaky])) as w:
                run = await w.runs.start(wf)
                await trio.sleep(5)
                if how == "abort":
                    w.tree.abort(REASON)
                elif how == "enclosing":
                    scope.cancel(reason=REASON)
                else:
                    run.cancel(REASON)
                await run.wait()
        except ActorError as error:
            assert (how, error.code) == ("abort", Code.CANCELLED)
    assert run is not None and run.done
    assert list(seen.ended.values()) == ["raised"]
    assert names(run)[-1] == "run:cancelled"
    assert run.history[-1].reason == REASON
    assert of(run, "tool:called") == []  # no tool_failed handed to the model
    assert [f.code for f in failed] == ["cancelled"]
