"""The chaos provider: a loopback LLM server that fails on purpose, by script.

It speaks the OpenAI-compatible ``POST /v1/chat/completions`` and Anthropic's
``POST /v1/messages`` (non-streaming and SSE), answers deterministically — by the first
row that fits, usage computed from the input and the answer (4 characters a token) —
and follows a fault script.

| the request | the answer, streamed or not |
|---|---|
| ends with tool results (a) | ``"echo: <their text>"``, never a tool call |
| offers tools; the last user message has ``call:`` | a call of the first tool (b) |
| the last user message has ``reply:`` | exactly the text after it, stripped (c) |
| anything else | ``"echo: <last user message>"`` |

(a) OpenAI ``role: "tool"`` messages, Anthropic a ``user`` message with ``tool_result``
blocks: an agent loop ends after one tool round; a ``call:`` or ``reply:`` in a tool
result is not interpreted. (b) with ``{"query": <the text after "call:">}``; it wins over
a ``reply:`` in the same message. (c) scripts a model's exact output, e.g.
``reply: {"label": "bug"}`` answers ``{"label": "bug"}``. The details are in
:mod:`~actors.testing.chaos.dialects.common`. Use it in-process::

    async with chaos_server(FaultScript(faults=[Fault(kind="status", status=429,
                                                      headers={"retry-after": "2"})])) as server:
        provider = OpenAIProvider(ProviderConfig(name="alpha", base_url=server.url))

or as a command: ``python -m actors.testing.chaos --port 8099 --script faults.toml``.

Faults (``Fault.kind``), consumed in order from a queue per route (``openai``,
``anthropic``; ``*`` for any), ``times`` each; a fault with ``model`` fits only requests
for that model, and stream-only faults only streaming requests — a fault waits in its
queue, in its place, for a request it fits; with no queued fault that fits,
``probabilities`` (seeded) may pick one. A fault recorded against a request was applied
to it, streaming or not; a value the server could not play is refused when the fault is
built (``config_invalid``).

| kind | what the client sees, not streaming | streaming |
|---|---|---|
| ``status`` | ``status``, ``headers``, the API's error body (or ``body``) | the same |
| ``html`` | a proxy's HTML page (``status``; 500 is sent as 502) | the same |
| ``malformed_json`` | 200, the JSON body cut in half | one event's JSON cut in half (a) |
| ``latency`` | the normal answer after ``seconds`` | the same |
| ``hang`` | nothing; after ``seconds`` the normal answer (b) | the same |
| ``reset_before`` | a reset before any response | the same |
| ``reset_mid`` | headers and half the body, then a reset | half the events (c), a reset |
| ``cut_stream`` | (waits for a stream) | ``after`` events (c), a close (d) |
| ``stream_error`` | (waits for a stream) | ``after`` events (c), the error event |
| ``slow_stream`` | (waits for a stream) | a pause of ``seconds`` after each event |
| ``content_filter`` | the API's content-policy refusal (400) | the same |
| ``context_length`` | the API's context-length error (400) | the same |

(a) the middle one of the JSON events before the finish; the rest of the stream, its
terminator included, follows. (b) without ``seconds``, nothing until the client gives up.
(c) at most the events before the finish: no terminator ever. (d) a clean close
(``clean``, the default) or a reset. The error event is the API's "overloaded"
(OpenAI ``{"error": ...}``, Anthropic ``event: error``), then a clean close.

Events count as the server sends them, OpenAI's leading keep-alive comment included; the
finish is OpenAI's ``finish_reason`` chunk, Anthropic's ``message_delta`` — a stream
broken by a fault never reaches it. The error bodies are each API's own: for ``status``
404 OpenAI's ``model_not_found`` (``The model `<model>` does not exist ...``) and
Anthropic's ``not_found_error``, 401 ``invalid_api_key`` / ``authentication_error``, 402
``insufficient_quota`` / ``billing_error``, 429 ``rate_limit_exceeded`` /
``rate_limit_error``.

Every request is recorded (:attr:`ChaosServer.requests`, :class:`RecordedRequest`)
without secrets: credential headers are dropped. A client that goes away before it has
the whole answer — while the server waits (``latency``, ``hang``: it stops waiting),
before the body, mid-stream — is recorded as ``disconnected``, with ``disconnected_at``
(trio time).

The package: :mod:`~actors.testing.chaos.script` (faults, scripts, TOML),
:mod:`~actors.testing.chaos.server` (the server, records),
:mod:`~actors.testing.chaos.respond` (what a fault makes the server send),
:mod:`~actors.testing.chaos.dialects` (the bodies and events each API answers),
:mod:`~actors.testing.chaos.wire` (h11 plumbing), :mod:`~actors.testing.chaos.cli` (the
command). Import from here.
"""

from actors.testing.chaos.cli import main
from actors.testing.chaos.script import (
    STREAM_ONLY,
    Fault,
    FaultKind,
    FaultScript,
    Route,
    load_script,
)
from actors.testing.chaos.server import ROUTES, ChaosServer, RecordedRequest, chaos_server

__all__ = [
    "ROUTES",
    "STREAM_ONLY",
    "ChaosServer",
    "Fault",
    "FaultKind",
    "FaultScript",
    "RecordedRequest",
    "Route",
    "chaos_server",
    "load_script",
    "main",
]
