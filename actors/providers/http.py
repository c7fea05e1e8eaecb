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
* a non-streaming body is read up to ``max_response_bytes`` (more:
  ``malformed_response``); a stream is capped by what it assembles: the answer (text and
  tool calls) and each SSE event at most ``max_response_bytes`` (more:
  ``malformed_response``), its total on the wire is not capped (SSE framing and keep-alive
  comments are not the answer);
* provider JSON is standard JSON, read at its exact types (:mod:`~actors.providers.dialect`);
  a body or an event that is not is ``malformed_response`` — never ``internal``;
* a 2xx answer to a streaming request is an event stream (``text/event-stream``, any
  parameters) or it is ``malformed_response`` naming its content type — a server that
  answers a whole JSON body to a streaming request is not a stream cut short;
* a stream ends with its terminator or it is a failure: ``network`` (retryable), with the
  usage and the text received so far on the error — never a silent truncation; an error
  event mid-stream is classified like the HTTP error it stands for; any failure mid-stream
  (a transport's bug too) keeps the text and usage received;
* once the terminator has arrived the answer is complete: the rest of the body is read for
  at most :data:`TRAILING_GRACE` seconds and :data:`TRAILING_BYTES` bytes (so that a
  server which ends the body right after it leaves a reusable connection), then the
  response is closed — a server that keeps the stream open after it (keep-alive comments)
  delays the answer by the grace, never more;
* stream events go to the caller's channel with backpressure: the adapter reads the next
  chunk only when the consumer has taken the previous event. A consumer that leaves the
  block (or is cancelled) cancels the request and closes the upstream; one that stays in
  the block without reading holds the request open — ``read_timeout`` does not apply, as
  nothing is being read — until it leaves or the caller's timeout fires.

``transport`` replaces httpx's own (an ``httpx.MockTransport`` in a unit test, say). The
client closes it with itself, as httpx does; then ``max_connections`` does not apply (it
configures httpx's own transport). A factory that may restart the actor should build a
fresh transport for each instance.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any, Final

import attrs
import httpx
import trio

from actors.actor import Actor
from actors.classify import classify
from actors.errors import ActorError, Code, fail, normalize
from actors.providers.base import (
    Complete,
    LlmRequest,
    LlmResponse,
    ProviderConfig,
    Stream,
    StreamEvent,
    ToolCall,
)
from actors.providers.dialect import Dialect, NotJson, StreamState, loads
from actors.providers.sse import SseParser
from actors.usage import Usage

#: Seconds the rest of a stream's body is read after its terminator, at most.
TRAILING_GRACE: Final = 0.5
#: Bytes of a stream's body read after its terminator, at most.
TRAILING_BYTES: Final = 64 << 10
#: The media type a streamed answer must have.
EVENT_STREAM: Final = "text/event-stream"


class HttpProvider(Actor):
    """A provider actor speaking ``dialect`` over httpx (see the module docstring)."""

    def __init__(
        self,
        config: ProviderConfig,
        dialect: Dialect,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if transport is not None and not isinstance(transport, httpx.AsyncBaseTransport):
            raise ActorError.from_code(
                Code.VALIDATION,
                f"transport must be an httpx.AsyncBaseTransport, not {type(transport).__name__}",
                provider=config.name,
            )
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
        data = self._json(response, raw, request)
        with _unparsable_is_malformed(self.config.name, request.model):
            answer = self.dialect.parse_response(data, request, provider=self.config.name)
        return attrs.evolve(answer, latency=trio.current_time() - started)

    def _json(self, response: httpx.Response, raw: bytes, request: LlmRequest) -> Any:
        """The JSON of a 2xx body; ``malformed_response`` when it is not standard JSON."""
        try:
            return loads(raw)
        except NotJson as exc:
            if exc.constant is not None:
                # NaN / Infinity: Python's json reads them, so classify would take the
                # body for a well-formed answer; say it here.
                raise self._malformed(
                    f"HTTP {response.status_code} body is not JSON ({exc.reason})",
                    request,
                    http_status=response.status_code,
                ) from None
            raise self._classify(_with_body(response, raw), request) from None

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
                self._check_event_stream(response, request)
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
        except Exception as exc:
            # Not a provider answer: a bug in a transport or a dialect (classify logs it,
            # unplaced). Typed, and as for any failure nothing streamed is lost.
            raise self._classify(exc, request, state) from exc
        return LlmResponse(
            content="".join(state.text),
            tool_calls=_tool_calls(state),
            finish_reason=state.finish_reason,
            usage=state.usage or Usage(),
            provider=self.config.name,
            model=request.model,
            latency=trio.current_time() - started,
        )

    def _check_event_stream(self, response: httpx.Response, request: LlmRequest) -> None:
        """A 2xx answer to a streaming request must be an event stream: anything else is
        ``malformed_response`` naming what came (a whole JSON answer, an HTML page, no
        content type), not a stream that ends without its terminator."""
        content_type = response.headers.get("content-type")
        media = (content_type or "").split(";", 1)[0].strip().lower()
        if media == EVENT_STREAM:
            return
        came = f"content-type {content_type}" if content_type else "no content-type"
        if media == "application/json":
            came += " (a whole answer where a stream was asked for)"
        raise self._malformed(
            f"HTTP {response.status_code} streaming answer is not an event stream "
            f"({EVENT_STREAM}): {came}",
            request,
            http_status=response.status_code,
        )

    async def _pump(
        self,
        response: httpx.Response,
        request: LlmRequest,
        state: StreamState,
        sink: trio.MemorySendChannel[StreamEvent],
    ) -> None:
        cap = self.config.max_response_bytes
        parser = SseParser(max_event_bytes=cap)
        provider = self.config.name
        assembled = 0  # bytes of the answer's text and tool calls so far
        chunks = response.aiter_bytes()
        try:
            async for chunk in chunks:
                for sse in parser.feed(chunk):
                    with _unparsable_is_malformed(provider, request.model):
                        events = self.dialect.stream_events(sse, state, provider=provider)
                    if state.error is not None:
                        error = httpx.Response(state.error.status, json=dict(state.error.body))
                        raise self._classify(error, request)
                    for event in events:
                        assembled += _answer_bytes(event)
                        if assembled > cap:
                            raise self._malformed(
                                f"streamed answer larger than {cap} bytes", request
                            )
                        await sink.send(event)
                    if state.done:
                        break  # anything after the terminator is not read as events
                if state.done:
                    await _discard_trailing(chunks)
                    return
        finally:
            await _aclose(chunks)
        parser.close()
        if self.dialect.complete_at_eof(state):
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
                raise self._malformed(
                    f"response larger than {cap} bytes", request, http_status=response.status_code
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _malformed(self, detail: str, request: LlmRequest, **fields: Any) -> ActorError:
        """``malformed_response`` of this provider for ``request``'s model."""
        return ActorError.from_code(
            Code.MALFORMED_RESPONSE,
            detail,
            provider=self.config.name,
            model=request.model,
            **fields,
        )

    def _classify(
        self, obj: object, request: LlmRequest, state: StreamState | None = None
    ) -> ActorError:
        if isinstance(obj, BaseExceptionGroup):
            err = normalize(obj)  # reduced to one error (classify takes one failure)
            if err.provider is None:
                err.provider = self.config.name
            if err.model is None:
                err.model = request.model
        else:
            err = classify(
                obj, provider=self.config.name, dialect=self.dialect.name, model=request.model
            )
        return _with_partial(err, state) if state is not None else err


async def _discard_trailing(chunks: AsyncIterator[bytes]) -> None:
    """Read what follows a stream's terminator, for :data:`TRAILING_GRACE` seconds and
    :data:`TRAILING_BYTES` bytes at most, and drop it.

    A server that ends the body right after the terminator (the usual case) ends this at
    once and leaves its connection reusable. One that keeps the stream open (keep-alive
    comments after ``[DONE]``) is cut off by the deadline: the cancel is delivered inside
    the pending read, so it unwinds httpx's whole chain of byte iterators (none is left
    suspended for the garbage collector). The answer is complete either way: a read that
    fails here (a reset, a read timeout) loses nothing.
    """
    received = 0
    with trio.move_on_after(TRAILING_GRACE):
        try:
            async for chunk in chunks:
                received += len(chunk)
                if received > TRAILING_BYTES:
                    return
        except httpx.HTTPError:
            return  # the answer is complete; the connection is closed, not reused


async def _aclose(chunks: AsyncIterator[bytes]) -> None:
    """Close the byte iterator (an async generator in httpx) explicitly, at once, rather
    than leave it to the garbage collector; a finished one is left as it is."""
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()


def _answer_bytes(event: StreamEvent) -> int:
    """What ``event`` adds to the assembled answer, in UTF-8 bytes."""
    size = len(event.text.encode()) + len(event.arguments.encode())
    for name in (event.tool_call_id, event.tool_name):
        if name:
            size += len(name.encode())
    return size


#: What a dialect reading an answer of the wrong shape may raise: the provider's
#: ``malformed_response``. ``OverflowError``: ``int()`` of an infinite float (``1e999``);
#: ``RecursionError``: an answer nested too deeply for the code reading it.
_PARSE_ERRORS = (
    AttributeError,
    IndexError,
    KeyError,
    OverflowError,
    RecursionError,
    TypeError,
    ValueError,
)


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
