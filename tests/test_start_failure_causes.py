"""A start failure that is already typed is raised as it is — never its own cause (a
cause chain that loops hangs every reader of it); a provider's too-short API key is a
``config_invalid`` naming the provider."""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock

from actors import Actor, ActorError, Code, open_runtime
from actors.providers import OpenAIProvider, ProviderConfig
from supervisors import ChildSpec, SupervisorSpec, open_tree


def chain_of(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cause: BaseException | None = error
    while cause is not None:
        assert all(cause is not s for s in seen), "the cause chain loops"
        seen.append(cause)
        cause = cause.__cause__
    return seen


TYPED = ActorError.from_code(Code.CONFIG_INVALID, "no backend configured")


class FailsToStart(Actor):
    async def on_start(self) -> None:
        raise TYPED


def factory_fails() -> Actor:
    raise ActorError.from_code(Code.CONFIG_INVALID, "no backend configured")


@pytest.mark.parametrize("factory", [FailsToStart, factory_fails])
async def test_a_typed_start_failure_is_not_its_own_cause(
    autojump_clock: MockClock, factory: Any
) -> None:
    async with open_runtime() as runtime:
        with pytest.raises(ActorError, match="no backend configured") as caught:
            await runtime.spawn(factory)
    chain = chain_of(caught.value)
    assert chain[0].code is Code.CONFIG_INVALID  # type: ignore[attr-defined]
    assert chain[0].__cause__ is None


async def test_a_too_short_api_key_is_config_invalid(autojump_clock: MockClock) -> None:
    config = ProviderConfig(name="alpha", base_url="http://127.0.0.1:9", api_key="k")
    spec = SupervisorSpec(children=[ChildSpec(id="alpha", actor=OpenAIProvider, args=(config,))])
    with pytest.raises(ActorError) as caught:
        async with open_tree(spec):
            pass
    chain = chain_of(caught.value)
    assert [getattr(c, "code", None) for c in chain] == [
        Code.START_FAILED,
        Code.CONFIG_INVALID,
        None,
    ]
    assert (
        str(chain[1])
        == "[config_invalid] the API key of provider alpha is shorter than 4 characters"
    )
    assert isinstance(chain[2], ValueError)
