"""The pool's own refusals, message by message (each exact: what the field must be and
the type it got), a request that is not one (input_validation, not delivered), and the
escalation audit's request id."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from trio.testing import MockClock

from actors import Actor, ActorError, Code, fail, open_runtime
from actors.testing import capture_events
from supervisors import (
    AllProvidersFailed,
    Price,
    ProviderPool,
    Resilience,
    RetryLater,
    RetryRules,
    Target,
)
from tests.pool_helpers import request

PRICE = Price(input_per_mtok=1, output_per_mtok=1)


class Down(Actor):
    """Fails every request, retryable."""

    async def handle(self, message: Any) -> Any:
        return fail(Code.UNAVAILABLE, "down", retryable=True)


BAD: list[tuple[dict[str, Any], str]] = [
    ({"targets": []}, "targets must be a non-empty list of Target, got list"),
    ({"targets": ["A"]}, "targets[0] must be a Target, got str"),
    ({"downgrades": ["m2"]}, "downgrades must be a mapping of provider to model names, got list"),
    ({"resilience": object()}, "resilience must be a Resilience, got object"),
    ({"budget": "lots"}, "budget must be a Budget, got str"),
    ({"on_exhausted": "x"}, "on_exhausted must be an async callable, got str"),
    ({"keep": -1}, "keep must be an integer >= 0, got int"),
    ({"keep": True}, "keep must be an integer >= 0, got bool"),
    ({"keep": sys.maxsize + 1}, "keep must be an integer >= 0, got int"),
    ({"name": ""}, "name must be a non-empty string, got str"),
    ({"name": 3}, "name must be a non-empty string, got int"),
    ({"prices": [1]}, "prices must be a mapping of (provider, model) to Price, got list"),
    ({"prices": {"A": PRICE}}, "prices key must be a (provider, model) pair of strings, got str"),
    (
        {"prices": {("A",): PRICE}},
        "prices key must be a (provider, model) pair of strings, got tuple",
    ),
    (
        {"prices": {("A", "m", "x"): PRICE}},
        "prices key must be a (provider, model) pair of strings, got tuple",
    ),
    (
        {"prices": {("A", 1): PRICE}},
        "prices key must be a (provider, model) pair of strings, got tuple",
    ),
    ({"prices": {("A", "m"): 3.0}}, "prices[('A', 'm')] must be a Price, got float"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD)
async def test_each_refusal_says_what_the_field_must_be(
    autojump_clock: MockClock, overrides: dict[str, Any], message: str
) -> None:
    async with open_runtime() as runtime:
        target = Target(ref=await runtime.spawn(Down), provider="A", model="m1")
        arguments: dict[str, Any] = {"targets": [target], **overrides}
        with pytest.raises(ActorError) as caught:
            ProviderPool(arguments.pop("targets"), **arguments)
    assert (caught.value.code, caught.value.message) == (Code.CONFIG_INVALID, message)


async def test_the_edges_of_what_a_pool_takes(autojump_clock: MockClock) -> None:
    async with open_runtime() as runtime:
        ref = await runtime.spawn(Down)
        targets = [Target(ref=ref, provider="A", model="m1")]
        with pytest.raises(ActorError) as caught:
            ProviderPool([*targets, Target(ref=ref, provider="A", model="m1")])
        assert caught.value.message == "targets[1] repeats the provider and model of targets[0]"
        assert ProviderPool(targets, keep=0).ledger.entries.maxlen == 0
        assert ProviderPool(targets, keep=sys.maxsize).ledger.entries.maxlen == sys.maxsize
        pool = ProviderPool(targets, prices={("A", "m1"): PRICE}, name="p")
        assert pool.name == "p"
        for bad, kind in [("hello", "str"), (None, "NoneType")]:
            with pytest.raises(ActorError) as refused:
                await pool.complete(bad)  # type: ignore[arg-type]
            error = refused.value
            assert (error.code, error.delivered) == (Code.INPUT_VALIDATION, False)
            assert error.message == f"a pool takes an LlmRequest, not {kind}"
        with pytest.raises(ActorError) as caught:
            await pool.complete(request(), budget="x")  # type: ignore[arg-type]
        assert caught.value.message == "budget must be a Budget or None, got str"
    assert len(pool.ledger) == 0


async def test_the_escalation_audit_names_the_request(autojump_clock: MockClock) -> None:
    decisions = [RetryLater(seconds=1, by="ops")]

    async def hook(failure: AllProvidersFailed) -> RetryLater | None:
        return decisions.pop(0) if decisions else None

    async with open_runtime() as runtime:
        target = Target(ref=await runtime.spawn(Down), provider="A", model="m1")
        pool = ProviderPool(
            [target], resilience=Resilience(retry=RetryRules(by_code={})), on_exhausted=hook
        )
        with capture_events("pool.escalated") as audit, pytest.raises(AllProvidersFailed):
            await pool.complete(request(metadata={"request_id": "r-7"}))
    assert [
        (e.request_id, e.decision, e.by, e.seconds, e.provider, e.model, e.reason) for e in audit
    ] == [
        ("r-7", "retry", "ops", 1.0, None, None, None),
        ("r-7", "none", None, None, None, None, None),
    ]
