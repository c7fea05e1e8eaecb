"""A pool refuses bad arguments when it is built — config_invalid naming the field —
and a bad request before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock

from actors import ActorError, Code, Usage, open_runtime
from actors.actor import Actor
from supervisors import Budget, BudgetLimits, Price, ProviderPool, Target
from tests.pool_helpers import fleet, request


class Idle(Actor):
    async def handle(self, message: Any) -> Any:
        return None


async def _target() -> tuple[Any, Target]:
    runtime_cm = open_runtime()
    runtime = await runtime_cm.__aenter__()
    ref = await runtime.spawn(Idle)
    return runtime_cm, Target(ref=ref, provider="A", model="m")


BAD_POOLS: list[tuple[dict[str, Any], str]] = [
    ({"targets": []}, "targets must be a non-empty list of Target, got list"),
    ({"targets": "A"}, "targets must be a non-empty list of Target, got str"),
    ({"targets": None}, "targets must be a non-empty list of Target, got NoneType"),
    ({"targets": ["A"]}, r"targets\[0\] must be a Target, got str"),
    ({"deadline": float("nan")}, "deadline must be None or a finite number of seconds > 0"),
    ({"deadline": 0}, "deadline must be None or a finite number of seconds > 0, got int"),
    ({"deadline": -1}, "deadline must be None or a finite number"),
    ({"deadline": float("inf")}, "deadline must be None or a finite number"),
    ({"deadline": "5"}, "deadline must be None or a finite number of seconds > 0, got str"),
    ({"deadline": True}, "deadline must be None or a finite number of seconds > 0, got bool"),
    ({"deadline": 10**400}, "deadline must be None or a finite number"),
    ({"hedge_after": 0}, "hedge_after must be None or a finite number of seconds > 0"),
    ({"hedge_after": -0.5}, "hedge_after must be None or a finite number of seconds > 0"),
    ({"attempt_timeout": float("nan")}, "attempt_timeout must be None or a finite number"),
    ({"on_exhausted": "call me"}, "on_exhausted must be an async callable, got str"),
    ({"keep": -1}, "keep must be an integer >= 0, got int"),
    ({"keep": 1.5}, "keep must be an integer >= 0, got float"),
    ({"keep": 2**80}, "keep must be an integer >= 0, got int"),
    ({"resilience": object()}, "resilience must be a Resilience, got object"),
    ({"budget": "lots"}, "budget must be a Budget, got str"),
    ({"downgrades": ["m2"]}, "downgrades must be a mapping of provider to model names"),
    ({"downgrades": {"Z": ["m2"]}}, r"downgrades\['Z'\] must be the provider of a target"),
    ({"downgrades": {"A": "m2"}}, r"downgrades\['A'\] must be a list of model names, got str"),
    ({"downgrades": {"A": [""]}}, r"downgrades\['A'\]\[0\] must be a non-empty string"),
    ({"prices": {"A": Price(input_per_mtok=1, output_per_mtok=1)}}, "prices key must be"),
    ({"prices": {("A", "m"): 3.0}}, r"prices\[\('A', 'm'\)\] must be a Price, got float"),
    ({"name": ""}, "name must be a non-empty string, got str"),
]


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (float("nan"), "float"),
        (-1.0, "float"),
        (float("inf"), "float"),
        ("1", "str"),
        (None, "NoneType"),
        (True, "bool"),
    ],
)
def test_prices_are_finite_dollars(value: Any, kind: str) -> None:
    with pytest.raises(
        ActorError, match=f"Price.input_per_mtok must be a finite number >= 0, got {kind}"
    ) as caught:
        Price(input_per_mtok=value, output_per_mtok=1)
    assert caught.value.code is Code.CONFIG_INVALID
    assert (
        Price(input_per_mtok=0, output_per_mtok=2.5).cost(
            Usage(input_tokens=1_000_000, output_tokens=2)
        )
        == 5e-06
    )


async def test_the_same_target_twice_is_refused(autojump_clock: MockClock) -> None:
    async with fleet({"A": None}) as f:
        with pytest.raises(
            ActorError, match=r"targets\[2\] repeats the provider and model of targets\[0\]"
        ) as caught:
            ProviderPool([f.target("A"), f.target("A", "m2"), f.target("A")])
        assert caught.value.code is Code.CONFIG_INVALID


@pytest.mark.parametrize(("overrides", "message"), BAD_POOLS)
async def test_bad_pool_arguments_are_config_invalid_naming_the_field(
    autojump_clock: MockClock, overrides: dict[str, Any], message: str
) -> None:
    runtime_cm, target = await _target()
    try:
        arguments: dict[str, Any] = {"targets": [target], **overrides}
        targets = arguments.pop("targets")
        with pytest.raises(ActorError, match=message) as caught:
            ProviderPool(targets, **arguments)
        assert caught.value.code is Code.CONFIG_INVALID
    finally:
        await runtime_cm.__aexit__(None, None, None)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"ref": "A"}, "Target.ref must be an ActorRef, got str"),
        ({"provider": ""}, "Target.provider must be a non-empty string, got str"),
        ({"model": 5}, "Target.model must be a non-empty string, got int"),
        ({"context_window": 0}, "Target.context_window must be None or an integer >= 1"),
        ({"context_window": True}, "Target.context_window must be None or an integer >= 1"),
        ({"content_filter_fallback": 1}, "Target.content_filter_fallback must be a bool"),
    ],
)
async def test_bad_targets_are_config_invalid(
    autojump_clock: MockClock, fields: dict[str, Any], message: str
) -> None:
    runtime_cm, target = await _target()
    try:
        arguments = {"ref": target.ref, "provider": "A", "model": "m", **fields}
        with pytest.raises(ActorError, match=message) as caught:
            Target(**arguments)
        assert caught.value.code is Code.CONFIG_INVALID
    finally:
        await runtime_cm.__aexit__(None, None, None)


async def test_defaults_are_pinned(autojump_clock: MockClock) -> None:
    async with fleet({"A": None}) as f:
        pool = ProviderPool(f.targets("A"))
        assert (pool.name, pool.deadline, pool.attempt_timeout, pool.hedge_after) == (
            "pool",
            None,
            None,
            None,
        )
        assert pool.on_exhausted is None and pool.budget is None
        assert pool.resilience.breaker is None and pool.resilience.limiter is None
        assert pool.ledger.entries.maxlen == 1000
        target = f.target("A")
        assert (target.context_window, target.content_filter_fallback, target.downgrade) == (
            None,
            False,
            False,
        )


async def test_a_request_that_is_not_an_llm_request_is_refused_before_sending(
    autojump_clock: MockClock,
) -> None:
    async with fleet({"A": None}) as f:
        pool = ProviderPool(f.targets("A"))
        for bad in ("hello", {"model": "m1"}, None):
            with pytest.raises(ActorError, match="a pool takes an LlmRequest") as caught:
                await pool.complete(bad)  # type: ignore[arg-type]
            assert caught.value.code is Code.INPUT_VALIDATION
            with pytest.raises(ActorError, match="a pool takes an LlmRequest"):
                async with pool.stream(bad):  # type: ignore[arg-type]
                    pass
        with pytest.raises(ActorError, match="budget must be a Budget or None"):
            await pool.complete(request(), budget="x")  # type: ignore[arg-type]
        assert f.count("A") == 0
        assert len(pool.ledger) == 0
        budget = Budget("x", BudgetLimits())
        with pytest.raises(ActorError, match="a pool takes an LlmRequest"):
            await pool.complete("hello", budget=budget)  # type: ignore[arg-type]
        assert budget.tokens == 0  # refused before anything was charged


async def test_the_deadline_defaults_to_the_retry_rules_deadline(
    autojump_clock: MockClock,
) -> None:
    from supervisors import Resilience
    from tests.pool_helpers import rules

    async with fleet({"A": None}) as f:
        assert ProviderPool(f.targets("A"), resilience=Resilience(retry=rules(30))).deadline == 30
        assert (
            ProviderPool(
                f.targets("A"), resilience=Resilience(retry=rules(30)), deadline=None
            ).deadline
            is None
        )
