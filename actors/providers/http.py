"""The HTTP adapter actor shared by every dialect: one attempt per call, classify all.

A :class:`HttpProvider` carries one :class:`~actors.providers.dialect.Dialect` over
httpx. It owns one ``httpx.AsyncClient`` (opened in ``on_start``, closed in ``on_stop`` /
``on_restart``), answers :class:`~actors.providers.base.Complete` and
:class:`~actors.providers.base.Stream` messages concurrently (deferred replies, up to
``max_in_flight``), and never retries: the runner owns retry and fallback.

Rules every dialect inherits:

* a bare :class:`~actors.providers.base.LlmRequest` is read as ``Complete(request)``;
* a request needing a capability the model lacks fails with ``capability_missing``
  before any HTTP call, and a message that is not a provider message with
  ``input_validation`` — both returned as values (:func:`actors.errors.fail`): they fail
  that caller only, the actor goes on serving (no crash, no restart);
* any httpx failure, any error status, any body that is not the dialect's shape is
  classified by :func:`actors.classify.classify` — no vendor error escapes;
* the response body is read up to ``max_response_bytes`` (more: ``malformed_response``);
* a stream ends with its terminator or it is a failure: ``network`` (retryable), with the
  usage and the text received so far on the error — never a silent truncation; an error
  event mid-stream is classified like the HTTP error it stands for;
* stream events go to the caller's channel with backpressure; if the consumer stops or is
  cancelled, the upstream request is closed.

``transport`` replaces httpx's own (an ``httpx.MockTransport`` in a unit test, say). The
client closes it with itself, as httpx does; then ``max_connections`` does not apply (it
configures httpx's own transport). A factory that may restart the actor should build a
fresh transport for each instance.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import httpx
import trio

from actors.actor import Actor
from actors.classify import classify
from actors.errors import ActorError, Code, fail
from actors.providers.base import (
    Complete,
    LlmRequest,
    LlmResponse,
    ProviderConfig,
    Stream,
    StreamEvent,
    ToolCall,
)
from actors.providers.dialect import Dialect, StreamState
from actors.providers.sse import SseParser
from actors.usage import Usage


class HttpProvider(Actor):
    """A provider actor speaking ``dialect`` over httpx (see the module docstring)."""

    def __init__(
        self,
        config: ProviderConfig,
        dialect: Dialect,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self.dialect = dialect
        self.transport = transport
        self.client: httpx.AsyncClient | None = None
        self.max_deferred = config.max_in_flight  # calls in flight at once

    # --- lifecycle ------------------------------------------------------------------

    async def on_start(self) -> None:
        config = self.config
        self.client = httpx.AsyncClient(
            base_url=config.base_url,
            headers=self.dialect.headers(config.resolve_api_key()),
            timeout=httpx.Timeout(
                connect=config.connect_timeout,
                read=config.read_timeout,
                write=config.read_timeout,
                pool=config.read_timeout,
            ),
            limits=httpx.Limits(
                max_connections=config.max_connections,
                max_keepalive_connections=config.max_connections,
            ),
            transport=self.transport,
        )

    async def on_stop(self, reason: str) -> None:
        await self._close()

    async def on_restart(self, error: ActorError) -> None:
        await self._close()

    async def _close(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            await client.aclose()

    # --- messages ---------------------------------------------------------------------

    async def handle(self, message: Any) -> Any:
        """Serve :class:`Complete` (or a bare :class:`LlmRequest`, its shorthand) and
        :class:`Stream` as deferred replies.

        A request the actor cannot serve fails only its caller, as a value — never a crash
        of the actor: ``capability_missing`` when the model lacks what the request needs,
        ``input_validation`` for a message that is not a provider message.
        """
        if isinstance(message, LlmRequest):
            message = Complete(message)
        if isinstance(message, Complete | Stream):
            refusal = self.config.refusal(message.request)
            if refusal is not None:
                return refusal
            if isinstance(message, Stream):
                return self.defer(self._stream, message.request, message.sink)
            return self.defer(self._complete, message.request)
        return fail(
            Code.INPUT_VALIDATION,
            f"{self.config.name}: {type(message).__name__} is not a provider message; "
            "send Complete(request), Stream(request, sink) or an LlmRequest",
            provider=self.config.name,
        )

    async def _complete(self, request: LlmRequest) -> LlmResponse:
        started = trio.current_time()
        body = self.dialect.request_body(request, stream=False)
        try:
            async with self._client().stream("POST", self.dialect.path, json=body) as response:
                raw = await self._read(response, request)
        except httpx.HTTPError as exc:
            raise self._classify(exc, request) from exc
        if response.status_code >= 300:
            raise self._classify(_with_body(response, raw), request)
        try:
            data = json.loads(raw)
        except ValueError:
            raise self._classify(_with_body(response, raw), request) from None
        with _unparsable_is_malformed(self.config.name, request.model):
            answer = self.dialect.parse_response(data, request, provider=self.config.name)
        return attrs.evolve(answer, latency=trio.current_time() - started)

    async def _stream(
        self, request: LlmRequest, sink: trio.MemorySendChannel[StreamEvent]
    ) -> LlmResponse:
        started = trio.current_time()
        state = StreamState()
        body = self.dialect.request_body(request, stream=True)
        try:
            # The sink is the caller's to close (after it has recorded the outcome).
            async with self._client().stream("POST", self.dialect.path, json=body) as response:
                if response.status_code >= 300:
                    raw = await self._read(response, request)
                    raise self._classify(_with_body(response, raw), request)
                await self._pump(response, request, state, sink)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ActorError.from_code(
                Code.CANCELLED,
                "the stream's consumer stopped reading",
                provider=self.config.name,
                model=request.model,
                usage=state.usage,
                partial_text="".join(state.text),
            ) from exc
        except httpx.HTTPError as exc:
            raise self._classify(exc, request, state) from exc
        except ActorError as err:
            if err.model is None:
                err.model = request.model
            raise _with_partial(err, state) from err.__cause__
        return LlmResponse(
            content="".join(state.text),
            tool_calls=_tool_calls(state),
            finish_reason=state.finish_reason,
            usage=state.usage or Usage(),
            provider=self.config.name,
            model=request.model,
            latency=trio.current_time() - started,
        )

    async def _pump(
        self,
        response: httpx.Response,
        request: LlmRequest,
        state: StreamState,
        sink: trio.MemorySendChannel[StreamEvent],
    ) -> None:
        parser = SseParser(max_event_bytes=self.config.max_response_bytes)
        provider = self.config.name
        # Read to the end of the body even after the terminator (it ends right after it):
        # leaving httpx's byte iterator early leaks its inner async generators
        # (encode/httpx#3686).
        async for chunk in response.aiter_bytes():
            for sse in parser.feed(chunk):
                if state.done:
                    continue  # anything after the terminator is ignored
                with _unparsable_is_malformed(provider, request.model):
                    events = self.dialect.stream_events(sse, state, provider=provider)
                if state.error is not None:
                    error = httpx.Response(state.error.status, json=dict(state.error.body))
                    raise self._classify(error, request)
                for event in events:
                    await sink.send(event)
        parser.close()
        if state.done or self.dialect.complete_at_eof(state):
            return
        raise ActorError.from_code(
            Code.NETWORK,
            "stream ended without its terminator",
            provider=provider,
            model=request.model,
        )

    # --- helpers ----------------------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        if self.client is None:
            raise ActorError.from_code(Code.INTERNAL, f"{self.config.name}: client is closed")
        return self.client

    async def _read(self, response: httpx.Response, request: LlmRequest) -> bytes:
        cap = self.config.max_response_bytes
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > cap:
                raise ActorError.from_code(
                    Code.MALFORMED_RESPONSE,
                    f"response larger than {cap} bytes",
                    provider=self.config.name,
                    model=request.model,
                    http_status=response.status_code,
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _classify(
        self, obj: object, request: LlmRequest, state: StreamState | None = None
    ) -> ActorError:
        err = classify(
            obj, provider=self.config.name, dialect=self.dialect.name, model=request.model
        )
        return _with_partial(err, state) if state is not None else err


_PARSE_ERRORS = (AttributeError, IndexError, KeyError, TypeError, ValueError)


@contextmanager
def _unparsable_is_malformed(provider: str, model: str | None) -> Iterator[None]:
    """A dialect reading an answer of the wrong shape (a string where an object belongs,
    an index that is not a number) fails with a plain Python error: that is the
    provider's ``malformed_response``, the error kept as cause — not ``internal``."""
    try:
        yield
    except _PARSE_ERRORS as exc:
        raise ActorError.from_code(
            Code.MALFORMED_RESPONSE,
            f"provider answer has the wrong shape ({type(exc).__name__})",
            provider=provider,
            model=model,
        ) from exc


def _with_body(response: httpx.Response, raw: bytes) -> httpx.Response:
    """A read copy of ``response`` for :func:`classify` (which wants the body)."""
    return httpx.Response(
        response.status_code, headers=response.headers, content=raw, request=response.request
    )


def _with_partial(err: ActorError, state: StreamState) -> ActorError:
    """Keep what the stream delivered on the error: nothing is lost."""
    if err.usage is None and state.usage is not None:
        err.usage = state.usage
    if err.partial_text is None and state.text:
        err.partial_text = "".join(state.text)
    return err


def _tool_calls(state: StreamState) -> tuple[ToolCall, ...]:
    return tuple(
        ToolCall(
            id=call.get("id", ""), name=call.get("name", ""), arguments=call.get("arguments", "")
        )
        for _, call in sorted(state.tool_calls.items())
    )


__all__ = ["HttpProvider"]
