"""The API key is read when a provider adapter starts (issue 28): a key the config names
but that is missing — the variable not set or empty, an empty key, a callable returning
none — is ``config_invalid`` naming what is missing, never a start with no auth header;
a config naming no key at all sends none (an endpoint that needs none)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from trio.testing import MockClock

from actors import ActorError, Code, open_runtime
from actors.providers import Complete, LlmRequest, Message, OpenAIProvider, ProviderConfig

REQUEST = LlmRequest(model="m", messages=[Message(role="user", content="reply: hi")])


@pytest.mark.parametrize(
    ("key", "env", "environ", "message"),
    [
        (
            None,
            "ALPHA_KEY",
            {},
            "the environment variable ALPHA_KEY (api_key_env of provider alpha) is not set"
            " or is empty",
        ),
        (
            None,
            "ALPHA_KEY",
            {"ALPHA_KEY": ""},
            "the environment variable ALPHA_KEY (api_key_env of provider alpha) is not set"
            " or is empty",
        ),
        ("", None, {}, "the api_key of provider alpha is empty (str, not a non-empty string)"),
        (
            lambda: None,
            None,
            {},
            "the api_key callable of provider alpha returned no key (NoneType, not a non-empty"
            " string)",
        ),
        (
            lambda: "",
            None,
            {},
            "the api_key callable of provider alpha returned no key (str, not a non-empty string)",
        ),
        ("abc", None, {}, "the API key of provider alpha is shorter than 4 characters"),
    ],
    ids=["env-unset", "env-empty", "key-empty", "callable-none", "callable-empty", "short"],
)
async def test_a_key_named_but_missing_is_config_invalid_at_start(
    autojump_clock: MockClock,
    monkeypatch: pytest.MonkeyPatch,
    key: str | Callable[[], Any] | None,
    env: str | None,
    environ: dict[str, str],
    message: str,
) -> None:
    monkeypatch.delenv("ALPHA_KEY", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    config = ProviderConfig(
        name="alpha", base_url="http://127.0.0.1:9", api_key=key, api_key_env=env
    )
    async with open_runtime() as runtime:
        with pytest.raises(ActorError) as caught:
            await runtime.spawn(lambda: OpenAIProvider(config))
    assert caught.value.code is Code.CONFIG_INVALID
    assert caught.value.message == message
    assert caught.value.provider == "alpha"


async def test_the_key_of_a_set_variable_is_sent_and_none_when_no_key_is_named(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALPHA_KEY", "sk-from-the-environment")
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(503, json={"error": {"message": "down"}})

    transport = httpx.MockTransport(answer)
    async with open_runtime() as runtime:
        for config in (
            ProviderConfig(name="alpha", base_url="http://127.0.0.1:9", api_key_env="ALPHA_KEY"),
            ProviderConfig(name="local", base_url="http://127.0.0.1:9"),
        ):
            ref = await runtime.spawn(lambda c=config: OpenAIProvider(c, transport=transport))
            with pytest.raises(ActorError) as caught:
                await ref.call(Complete(REQUEST))
            assert caught.value.code is Code.UNAVAILABLE
    assert seen == ["Bearer sk-from-the-environment", None]
