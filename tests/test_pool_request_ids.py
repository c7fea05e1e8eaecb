"""The id a pooled request's ledger entries carry, on the fast path and the walk alike:
its ``metadata["request_id"]`` (as text), else a new ``pool-N`` for each request."""

from __future__ import annotations

import re
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, Usage, open_runtime
from actors.providers import LlmResponse
from supervisors import ProviderPool, Target
from tests.pool_helpers import request


class Answers(Actor):
    async def handle(self, message: Any) -> LlmResponse:
        return LlmResponse(
            content="ok",
            usage=Usage(input_tokens=1, output_tokens=1),
            model=message.request.model,
        )


async def _ids(deadline: float | None, *metadata: dict[str, Any]) -> list[str]:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Answers)
        pool = ProviderPool([Target(ref=ref, provider="alpha", model="m1")], deadline=deadline)
        for meta in metadata:
            await pool.complete(request("hi", metadata=meta))
        return [entry.request_id for entry in pool.ledger.entries]


@pytest.mark.parametrize("deadline", [None, 60.0], ids=["fast", "walk"])
async def test_a_given_id_names_the_entries_as_text(
    autojump_clock: MockClock, deadline: float | None
) -> None:
    assert await _ids(deadline, {"request_id": "req-9"}, {"request_id": 42}) == ["req-9", "42"]


@pytest.mark.parametrize("deadline", [None, 60.0], ids=["fast", "walk"])
async def test_without_an_id_each_request_gets_a_new_pool_id(
    autojump_clock: MockClock, deadline: float | None
) -> None:
    ids = await _ids(deadline, {}, {"request_id": ""}, {"request_id": 0}, {"other": "x"})
    assert all(re.fullmatch(r"pool-\d+", made) for made in ids), ids
    assert len(set(ids)) == 4
    numbers = [int(made.removeprefix("pool-")) for made in ids]
    assert numbers == sorted(numbers) and numbers[-1] - numbers[0] == 3


async def test_the_ids_do_not_depend_on_the_clock(autojump_clock: MockClock) -> None:
    await trio.sleep(5)
    assert await _ids(60.0, {"request_id": "late"}) == ["late"]
