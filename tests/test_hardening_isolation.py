"""Bad input fails one caller, never the tree (issue 9, items 12, 14-16)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from actors import Actor, ActorError, Code, open_runtime
from actors.testing import capture_events
from supervisors import Backoff, ChildSpec, Directive, Policy, open_tree
from tests.actor_helpers import Recorder
from tests.sup_helpers import tree_spec


class Echo(Actor):
    async def handle(self, message: Any) -> Any:
        return message


class BadInit(Actor):
    """Its constructor raises from the ``fail_from``-th construction on (1-based)."""

    built = 0
    fail_from = 1

    def __init__(self) -> None:
        BadInit.built += 1
        if BadInit.built >= BadInit.fail_from:
            raise ValueError("bad constructor argument")

    async def handle(self, message: Any) -> Any:
        if message == "crash":
            raise ActorError.from_code(Code.TOOL_FAILED, "crash")
        return message


@pytest.fixture(autouse=True)
def _reset_bad_init() -> None:
    BadInit.built = 0
    BadInit.fail_from = 1


async def test_raising_constructor_at_first_start_is_start_failed(
    autojump_clock: MockClock,
) -> None:
    spec = tree_spec(ChildSpec(id="ok", actor=Echo), ChildSpec(id="bad", actor=BadInit))
    with (
        capture_events("actor.start_failed") as events,
        pytest.raises(ActorError, match="child 'bad' failed to start") as caught,
    ):
        async with open_tree(spec):
            pytest.fail("the tree must not start")  # pragma: no cover
    assert caught.value.code is Code.START_FAILED
    cause = caught.value.__cause__
    assert isinstance(cause, ActorError)
    assert (cause.code, cause.actor) == (Code.INTERNAL, "/root/bad")
    assert isinstance(cause.__cause__, ValueError)
    assert [e.actor for e in events] == ["/root/bad"]


async def test_raising_constructor_on_restart_counts_against_intensity(
    autojump_clock: MockClock,
) -> None:
    """A sibling is never cancelled: the failing restarts count, then the tree gives up."""
    BadInit.fail_from = 2
    spec = tree_spec(
        ChildSpec(id="ok", actor=Echo),
        ChildSpec(id="bad", actor=BadInit),
        max_restarts=2,
        policy=Policy(by_code={Code.INTERNAL: Directive.RESTART}),
        backoff=Backoff(kind="fixed", initial=1.0, max=1.0),
    )
    sibling: list[Any] = []
    with pytest.raises(ActorError, match="3 failures") as caught:
        async with open_tree(spec) as tree:
            with pytest.raises(ActorError, match="crash"):
                await tree.ref("bad").call("crash")
            await trio.sleep(1.5)  # one failed restart at 1 s, the next comes at 2 s
            sibling.append(await tree.ref("ok").call("still here"))
            await trio.sleep_forever()
    assert caught.value.code is Code.RESTART_INTENSITY_EXCEEDED
    assert [e.code for e in caught.value.errors] == [Code.TOOL_FAILED, Code.INTERNAL, Code.INTERNAL]
    assert sibling == ["still here"]
    assert BadInit.built == 3
    assert trio.current_time() == 2.0


async def test_raising_constructor_fails_only_that_spawn(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        with pytest.raises(ActorError, match="bad constructor argument") as caught:
            await runtime.spawn(BadInit, name="bad")
        assert caught.value.code is Code.INTERNAL
        assert runtime.whereis("bad") is None
        echo = await runtime.spawn(Echo, name="echo")
        await trio.sleep(1)
        assert await echo.call("alive") == "alive"
        # The name is free again.
        BadInit.fail_from = 99
        assert await (await runtime.spawn(BadInit, name="bad")).call("x") == "x"


@pytest.mark.parametrize(
    "timeout",
    [math.nan, -1.0, -math.inf, "5", True, b"1", [5], 1j],
    ids=["nan", "negative", "minus-inf", "str", "bool", "bytes", "list", "complex"],
)
async def test_bad_call_timeout_is_rejected_before_queueing(
    autojump_clock: MockClock, timeout: Any
) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log), name="r")
        with pytest.raises(ActorError, match="timeout must be None or a number") as caught:
            await ref.call("reply-for-a", timeout=timeout)
        assert (caught.value.code, caught.value.delivered) == (Code.INPUT_VALIDATION, False)
        with pytest.raises(ActorError, match="timeout must be None or a number"):
            await ref.stop(timeout=timeout)
        assert await ref.call("reply-for-b") == "reply-for-b"
        await trio.sleep(1)
        assert log == ["reply-for-b"]  # the rejected call never ran


async def test_zero_and_infinite_call_timeouts(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder([]), name="r")
        with pytest.raises(ActorError, match="within the call timeout") as caught:
            await ref.call(("sleep", 1), timeout=0)
        assert caught.value.code is Code.CALL_TIMEOUT
        assert await ref.call(("sleep", 1000), timeout=math.inf) == ("sleep", 1000)
        assert await ref.call("x", timeout=0.5) == "x"


class Forwarder(Actor):
    """Does its work, then calls ``target`` (which may be stopped)."""

    def __init__(self, target: Any, done: list[str]) -> None:
        self.target = target
        self.done = done

    async def handle(self, message: Any) -> Any:
        self.done.append(message)
        return await self.target.call(message)


async def test_delivered_describes_the_outer_message(autojump_clock: MockClock) -> None:
    done: list[str] = []
    async with open_runtime() as runtime:
        target = await runtime.spawn(Echo, name="target")
        await target.stop()
        fwd = await runtime.spawn(lambda: Forwarder(target, done), name="fwd", max_restarts=1)
        with pytest.raises(ActorError, match="is stopped") as caught:
            await fwd.call("work")
    err = caught.value
    assert (err.code, err.delivered) == (Code.ACTOR_STOPPED, True)
    inner = err.__cause__
    assert isinstance(inner, ActorError)
    assert (inner.code, inner.delivered) == (Code.ACTOR_STOPPED, False)
    assert done == ["work"]


class Custom(BaseException):
    pass


@pytest.mark.parametrize("raised", [GeneratorExit, Custom], ids=["GeneratorExit", "custom"])
async def test_a_strange_base_exception_is_that_actors_crash(
    autojump_clock: MockClock, raised: type[BaseException]
) -> None:
    class Weird(Actor):
        async def handle(self, message: Any) -> Any:
            if message == "weird":
                raise raised("odd")
            return message

    async with open_runtime() as runtime:
        weird = await runtime.spawn(Weird, name="weird", max_restarts=1)
        echo = await runtime.spawn(Echo, name="echo")
        with pytest.raises(ActorError) as caught:
            await weird.call("weird")
        assert caught.value.code is Code.INTERNAL
        assert caught.value.delivered is True
        assert isinstance(caught.value.__cause__, raised)
        assert await weird.call("after") == "after"  # restarted
        assert await echo.call("sibling") == "sibling"


@pytest.mark.parametrize("hook", ["on_start", "on_stop"])
async def test_a_strange_base_exception_in_a_hook_stays_in_the_actor(
    autojump_clock: MockClock, hook: str
) -> None:
    class WeirdHook(Actor):
        async def handle(self, message: Any) -> Any:
            return message

    async def raise_custom(self: Any, *args: Any) -> None:
        raise Custom("odd hook")

    setattr(WeirdHook, hook, raise_custom)
    async with open_runtime() as runtime:
        echo = await runtime.spawn(Echo, name="echo")
        if hook == "on_start":
            with pytest.raises(ActorError, match="odd hook"):
                await runtime.spawn(WeirdHook, name="w")
        else:
            with capture_events("actor.cleanup_failed") as events:
                ref = await runtime.spawn(WeirdHook, name="w")
                await ref.stop()
            assert [e.hook for e in events] == ["on_stop"]
        assert await echo.call("fine") == "fine"


async def test_keyboard_interrupt_still_propagates(autojump_clock: MockClock) -> None:
    class Interrupt(Actor):
        async def handle(self, message: Any) -> Any:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as caught:
        async with open_runtime() as runtime:
            ref = await runtime.spawn(Interrupt, name="i")
            await ref.cast("x")
            await trio.sleep_forever()
    assert type(caught.value) is KeyboardInterrupt  # bare: only cancellations came with it


async def test_a_timeout_too_large_for_a_float_never_misdelivers(autojump_clock: MockClock) -> None:
    log: list[Any] = []
    async with open_runtime() as runtime:
        ref = await runtime.spawn(lambda: Recorder(log), name="r")
        with pytest.raises(ActorError, match="timeout must be None or a number") as caught:
            await ref.call("reply-for-a", timeout=10**400)
        assert isinstance(caught.value.__cause__, OverflowError)
        with pytest.raises(ActorError, match="timeout must be None or a number"):
            await ref.stop(timeout=10**400)
        assert await ref.call(("sleep", 1), timeout=None) == ("sleep", 1)
        assert await ref.call("x", timeout=Fraction(1, 2)) == "x"  # any real number
        assert await ref.call("y", timeout=10**300) == "y"
    assert log == [("sleep", 1), "x", "y"]


async def test_stop_from_the_actors_own_handler_does_not_wait_for_itself(
    autojump_clock: MockClock,
) -> None:
    stops: list[tuple[str, float]] = []

    class SelfStopping(Actor):
        async def handle(self, message: Any) -> Any:
            await self.ref.stop("done with it")
            return "stopping"

        async def on_stop(self, reason: str) -> None:
            stops.append((reason, trio.current_time()))

    async with open_runtime() as runtime:
        ref = await runtime.spawn(SelfStopping, name="s")
        assert await ref.call("stop yourself") == "stopping"
        await trio.sleep(1)
        assert str(ref.state) == "stopped"
    assert stops == [("done with it", 0.0)]


class Outer(Actor):
    """Calls ``inner`` (an actor of another tree) and returns its answer."""

    def __init__(self, inner: list[Any]) -> None:
        self.inner = inner

    async def handle(self, message: Any) -> Any:
        if message == "direct":
            return "direct"
        return await self.inner[0].call(message, timeout=None)


async def test_a_nested_calls_cancelled_resumes_the_actor(autojump_clock: MockClock) -> None:
    """The inner tree is aborted: its ``cancelled`` reaches the outer actor as an error.
    That request was cancelled; the outer actor is fine, so it resumes (no stop for good,
    no restart), and its caller sees ``cancelled``."""

    class Sleeper(Actor):
        async def handle(self, message: Any) -> Any:
            await trio.sleep(100)

    inner: list[Any] = []
    spec = tree_spec(ChildSpec(id="outer", actor=Outer, args=(inner,)))
    with capture_events("supervisor.decision") as decisions:
        async with open_tree(spec) as tree:
            with pytest.raises(ActorError, match="inner tree aborted"):
                async with open_tree(tree_spec(ChildSpec(id="s", actor=Sleeper)), name="in") as t2:
                    inner.append(t2.ref("s"))
                    async with trio.open_nursery() as nursery:

                        async def ask() -> None:
                            with pytest.raises(ActorError, match="inner tree aborted") as err:
                                await tree.ref("outer").call("work", timeout=None)
                            assert err.value.code is Code.CANCELLED

                        nursery.start_soon(ask)
                        await trio.sleep(1)
                        t2.abort("inner tree aborted")
            assert await tree.ref("outer").call("direct") == "direct"
            [info] = tree.root.which_children()
            assert (info.state, info.restarts) == ("running", 0)
    assert [(d.child, d.error.code, d.directive) for d in decisions] == [
        ("outer", "cancelled", "resume")
    ]


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"cleanup_budget": "x"}, "cleanup_budget must be a number of seconds >= 0, got 'x'"),
        ({"cleanup_budget": math.nan}, "cleanup_budget must be a number of seconds >= 0, got nan"),
        ({"cleanup_budget": -1}, "cleanup_budget must be a number of seconds >= 0, got -1"),
        ({"max_restarts": "x"}, "max_restarts must be an int >= 0, got 'x'"),
        ({"max_restarts": -1}, "max_restarts must be an int >= 0, got -1"),
        ({"max_restarts": 1.5}, "max_restarts must be an int >= 0, got 1.5"),
        ({"max_restarts": True}, "max_restarts must be an int >= 0, got True"),
        ({"name": ""}, "name must be a non-empty string or None, got str"),
        ({"name": 5}, "name must be a non-empty string or None, got int"),
    ],
)
async def test_bad_spawn_arguments_are_refused_before_anything_starts(
    autojump_clock: MockClock, options: dict[str, Any], problem: str
) -> None:
    async with open_runtime() as runtime:
        other = await runtime.spawn(Echo, name="other")
        with pytest.raises(ActorError) as caught:
            await runtime.spawn(BadInit, **options)
        assert (caught.value.code, caught.value.message) == (
            Code.CONFIG_INVALID,
            f"invalid spawn: {problem}",
        )
        assert BadInit.built == 0
        assert await other.call("fine") == "fine"
        assert len(runtime) == 1


@pytest.mark.parametrize("returned", [None, 5, object()], ids=["None", "int", "object"])
async def test_a_factory_returning_a_non_actor_is_a_typed_start_failure(
    autojump_clock: MockClock, returned: Any
) -> None:
    async with open_runtime() as runtime:
        with pytest.raises(ActorError, match=r"returned .*, not an Actor") as caught:
            await runtime.spawn(lambda: returned, name="odd")
        assert caught.value.code is Code.CONFIG_INVALID
        assert runtime.whereis("odd") is None
    spec = tree_spec(ChildSpec(id="odd", actor=lambda: returned))
    with pytest.raises(ActorError, match="child 'odd' failed to start") as tree_error:
        async with open_tree(spec):
            pytest.fail("must not start")  # pragma: no cover
    cause = tree_error.value.__cause__
    assert isinstance(cause, ActorError) and cause.code is Code.CONFIG_INVALID
