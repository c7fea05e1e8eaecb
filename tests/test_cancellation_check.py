"""Issue 26: one cancellation check. A group holding ``trio.Cancelled`` and anything else
is a cancellation — for the one function itself, for ``normalize``, for the breaker and for
an actor — the other error kept (in ``errors``, as the cause)."""

from __future__ import annotations

from typing import Any

import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, normalize
from actors.lowlevel import cancel_supersedes, cancellation_reason, current_cancel_reason
from supervisors import Breaker, ChildSpec, SupervisorSpec, open_tree

REASON = "mixed cancel"


async def mixed_group() -> BaseExceptionGroup[BaseException]:
    """A real group from a nursery cancelled with ``REASON``: one child cancelled, the
    other broke in its ``except trio.Cancelled`` — caught after its scope is left, so no
    cancel is in effect where it is looked at."""
    caught: list[BaseExceptionGroup[BaseException]] = []
    with trio.CancelScope() as scope:
        scope.cancel(reason=REASON)
        try:
            async with trio.open_nursery() as nursery:

                async def breaks() -> None:
                    try:
                        await trio.sleep(1)
                    except trio.Cancelled:
                        raise ValueError("broke while cancelled") from None

                nursery.start_soon(breaks)
                nursery.start_soon(trio.sleep_forever)
        except BaseExceptionGroup as group:
            caught.append(group)
    [group] = caught
    assert group.subgroup(trio.Cancelled) is not None
    assert group.subgroup(ValueError) is not None
    return group


async def test_the_one_check_says_a_mixed_group_is_a_cancellation(
    autojump_clock: MockClock,
) -> None:
    group = await mixed_group()
    assert cancellation_reason(group) == REASON
    assert await current_cancel_reason(group) == REASON
    assert await cancel_supersedes(group) == REASON  # no cancel in effect: the group's own
    assert await cancel_supersedes(ValueError("plain")) is None
    assert cancellation_reason(ExceptionGroup("g", [ValueError("v")])) is None
    nested = BaseExceptionGroup("outer", [ValueError("v"), group])
    assert cancellation_reason(nested) == REASON
    # normalize agrees: cancelled, with the check's reason, the ValueError kept.
    error = normalize(nested)
    assert (error.code, error.message) == (Code.CANCELLED, REASON)
    assert sorted(str(member.code) for member in error.errors) == [
        "cancelled",
        "internal",
        "internal",
    ]
    assert error.__cause__ is nested


async def test_cancel_supersedes_a_failure_while_a_cancel_is_in_effect(
    autojump_clock: MockClock,
) -> None:
    with trio.CancelScope() as scope:
        scope.cancel(reason="in effect")
        assert await cancel_supersedes(ValueError("late")) == "in effect"
    assert await cancel_supersedes(ValueError("late")) is None


async def test_a_mixed_group_neither_opens_nor_closes_the_breaker(
    autojump_clock: MockClock,
) -> None:
    breaker = Breaker()
    assert cancellation_reason(await mixed_group()) == REASON  # the one check says so
    # Closed: a mixed group counts no failure (the threshold is 1: one would open it).
    admission = await breaker.admit("alpha")
    await breaker.record(admission, await mixed_group())
    assert str(await breaker.state_of("alpha")) == "closed"
    # Half-open: the probe is freed, the breaker stays half-open (not re-opened, not closed).
    admission = await breaker.admit("alpha")
    await breaker.record(admission, ActorError.from_code(Code.UNAVAILABLE, "down"))
    assert str(await breaker.state_of("alpha")) == "open"
    await trio.sleep(60)
    probe = await breaker.admit("alpha")
    await breaker.record(probe, await mixed_group())
    assert str(await breaker.state_of("alpha")) == "half_open"
    again = await breaker.admit("alpha")  # the probe lease was freed: admitted at once
    await breaker.record(again, None)
    assert str(await breaker.state_of("alpha")) == "closed"


class Mixed(Actor):
    """Raises the mixed group from its handler."""

    async def handle(self, message: Any) -> Any:
        raise await mixed_group()


async def test_a_mixed_group_from_a_handler_is_cancelled_for_its_caller(
    autojump_clock: MockClock,
) -> None:
    async with open_tree(SupervisorSpec(children=[ChildSpec(id="m", actor=Mixed)])) as tree:
        try:
            await tree.ref("m").call("go", timeout=5)
        except ActorError as error:
            caught = error
    assert (caught.code, caught.message) == (Code.CANCELLED, REASON)
    assert cancellation_reason(caught.__cause__ or caught) == REASON
    assert isinstance(caught.__cause__, BaseExceptionGroup)
    assert caught.__cause__.subgroup(ValueError) is not None
