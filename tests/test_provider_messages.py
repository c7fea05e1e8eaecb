"""Issue 9, item 13: a message a provider actor cannot serve fails its caller, as a value.

A wrong message type (``input_validation``) or a request the model cannot serve
(``capability_missing``) fails only that caller: the provider actor is not restarted, goes
on serving, and the tree does not fail. A bare ``LlmRequest`` is read as
``Complete(request)``. Real clock, the chaos server over loopback.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio

from actors import ActorError, ActorRef, Code
from actors.providers import (
    Capabilities,
    Complete,
    HttpProvider,
    LlmRequest,
    LlmResponse,
    Message,
    ProviderConfig,
    Stream,
    StreamEvent,
    ToolSpec,
)
from actors.testing.chaos import ChaosServer, FaultScript, chaos_server
from supervisors import Breaker, ChildSpec, Resilience, SupervisorSpec, Tree, open_tree
from tests.test_providers import PROVIDERS, REQUEST

NO_TOOLS = {"m-1": Capabilities(tools=False, streaming=False)}


@asynccontextmanager
async def provider_tree(
    provider: type[HttpProvider], **config: Any
) -> AsyncIterator[tuple[Tree, ActorRef, ChaosServer]]:
    """The provider as child ``alpha`` of a supervisor tree, against a chaos server."""
    async with chaos_server(FaultScript()) as server:
        cfg = ProviderConfig(name="alpha", base_url=server.url, api_key="sk-test", **config)
        spec = SupervisorSpec(children=[ChildSpec(id="alpha", actor=provider, args=(cfg,))])
        async with open_tree(spec) as tree:
            yield tree, tree.ref("alpha"), server
        assert tree.error is None  # the tree did not fail


async def _served(resilience: Resilience, ref: ActorRef, message: Any) -> None:
    reply = await resilience.call(ref, message, provider="alpha", model="m-1")
    assert isinstance(reply, LlmResponse)
    assert reply.content == "echo: hello chaos world"


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("wrong", ["hello", {"request": REQUEST}, 42], ids=["str", "dict", "int"])
async def test_a_wrong_message_type_fails_only_its_caller(
    provider: type[HttpProvider], wrong: Any
) -> None:
    breaker = Breaker()
    resilience = Resilience(breaker=breaker)
    async with provider_tree(provider) as (tree, ref, server):
        with pytest.raises(ActorError, match="is not a provider message") as caught:
            await resilience.call(ref, wrong, provider="alpha", model="m-1")
        err = caught.value
        assert (err.code, err.retryable, err.provider) == (Code.INPUT_VALIDATION, False, "alpha")
        assert err.actor == ref.path
        assert tree.root.which_children()[0].restarts == 0
        await _served(resilience, ref, Complete(REQUEST))  # the actor goes on serving
        assert tree.root.which_children()[0].restarts == 0
        assert server.count() == 1  # the wrong message never reached the provider's server
        assert str(await breaker.state_of("alpha")) == "closed"  # not the provider's fault
        assert str(await breaker.state_of("alpha", "m-1")) == "closed"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_bare_request_is_read_as_complete(provider: type[HttpProvider]) -> None:
    resilience = Resilience()
    async with provider_tree(provider) as (tree, ref, server):
        await _served(resilience, ref, REQUEST)  # as docs/resilience.md shows the call
        assert server.count() == 1
        assert tree.root.which_children()[0].restarts == 0


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("message", "missing"),
    [
        (Complete(attrs.evolve(REQUEST, tools=(ToolSpec(name="t"),))), "tools"),
        (attrs.evolve(REQUEST, max_tokens=200_000), "context window of 128000 tokens"),
        ("stream", "streaming"),
    ],
    ids=["tools", "context-window", "streaming"],
)
async def test_capability_missing_fails_only_its_caller(
    provider: type[HttpProvider], message: Any, missing: str
) -> None:
    breaker = Breaker()
    resilience = Resilience(breaker=breaker)
    send, _receive = trio.open_memory_channel[StreamEvent](0)
    if message == "stream":
        message = Stream(attrs.evolve(REQUEST, stream=True), send)
    async with provider_tree(provider, models=NO_TOOLS) as (tree, ref, server):
        with pytest.raises(ActorError, match=f"alpha/m-1 lacks: {missing}") as caught:
            await resilience.call(ref, message, provider="alpha", model="m-1")
        err = caught.value
        assert (err.code, err.retryable) == (Code.CAPABILITY_MISSING, False)
        assert (err.provider, err.model) == ("alpha", "m-1")
        assert tree.root.which_children()[0].restarts == 0
        await _served(resilience, ref, Complete(REQUEST))
        assert tree.root.which_children()[0].restarts == 0
        assert server.count() == 1  # refused before any HTTP call
        assert str(await breaker.state_of("alpha")) == "closed"


OK_MESSAGE = Message(role="user", content="hi")


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: LlmRequest(model=None, messages=[OK_MESSAGE]), "LlmRequest.model"),  # type: ignore[arg-type]
        (lambda: LlmRequest(model="", messages=[OK_MESSAGE]), "LlmRequest.model"),
        (lambda: LlmRequest(model="m", messages="abc"), "LlmRequest.messages"),  # type: ignore[arg-type]
        (lambda: LlmRequest(model="m", messages=[]), "LlmRequest.messages"),
        (lambda: LlmRequest(model="m", messages=[{"role": "user"}]), "LlmRequest.messages"),  # type: ignore[list-item]
        (
            lambda: LlmRequest(model="m", messages=[OK_MESSAGE], max_tokens=-1),
            "LlmRequest.max_tokens",
        ),
        (
            lambda: LlmRequest(model="m", messages=[OK_MESSAGE], max_tokens=True),
            "LlmRequest.max_tokens",
        ),
        (
            lambda: LlmRequest(model="m", messages=[OK_MESSAGE], temperature=math.nan),
            "LlmRequest.temperature",
        ),
        (lambda: LlmRequest(model="m", messages=[OK_MESSAGE], tools=["t"]), "LlmRequest.tools"),  # type: ignore[list-item]
        (lambda: LlmRequest(model="m", messages=[OK_MESSAGE], stream="yes"), "LlmRequest.stream"),  # type: ignore[arg-type]
        (lambda: Message(role="wizard", content="x"), "Message.role"),  # type: ignore[arg-type]
        (lambda: Message(role="user", content=5), "Message.content"),  # type: ignore[arg-type]
        (lambda: ToolSpec(name=""), "ToolSpec.name"),
        (lambda: Complete("x"), "Complete.request"),  # type: ignore[arg-type]
        (lambda: Complete(None), "Complete.request"),  # type: ignore[arg-type]
        (lambda: Stream(REQUEST, None), "Stream.sink"),  # type: ignore[arg-type]
        (lambda: Stream("x", None), "Stream.request"),  # type: ignore[arg-type]
    ],
)
def test_a_malformed_request_is_refused_when_it_is_built(build: Any, field: str) -> None:
    """Before anything is sent or queued: a provider actor never sees it."""
    with pytest.raises(ActorError, match=rf"^\[input_validation\] {field} must be") as caught:
        build()
    assert caught.value.code is Code.INPUT_VALIDATION


def test_a_valid_request_keeps_its_lists_as_tuples() -> None:
    request = LlmRequest(model="m", messages=[OK_MESSAGE], tools=[ToolSpec(name="t")])
    assert (request.messages, request.tools) == ((OK_MESSAGE,), (ToolSpec(name="t"),))
