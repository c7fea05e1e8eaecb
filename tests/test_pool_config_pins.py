"""The pool's second checks' defaults, pinned: an attempt timeout and a RetryLater may be
0 (only a deadline and hedge_after must be > 0)."""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock

from actors import Actor, ActorError, Code, open_runtime
from supervisors import ProviderPool, RetryLater, Target


class Quiet(Actor):
    async def handle(self, message: Any) -> Any:
        return None


async def test_an_attempt_timeout_of_zero_is_accepted_and_a_negative_one_named(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as runtime:
        target = Target(ref=await runtime.spawn(Quiet), provider="A", model="m")
        assert ProviderPool([target], attempt_timeout=0).attempt_timeout == 0.0
        with pytest.raises(ActorError) as raised:
            ProviderPool([target], attempt_timeout=-1)
    assert raised.value.code is Code.CONFIG_INVALID
    assert raised.value.message == (
        "attempt_timeout must be None or a finite number of seconds >= 0, got int"
    )


def test_a_retry_later_of_zero_seconds_is_accepted_and_a_negative_one_named() -> None:
    assert RetryLater(seconds=0).seconds == 0
    with pytest.raises(ActorError) as raised:
        RetryLater(seconds=-1)
    assert raised.value.code is Code.CONFIG_INVALID
    assert raised.value.message == (
        "RetryLater.seconds must be None or a finite number of seconds >= 0, got int"
    )
