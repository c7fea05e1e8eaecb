"""The chaos provider: a loopback LLM server that fails on purpose, by script.

It speaks the OpenAI-compatible ``POST /v1/chat/completions`` and Anthropic's
``POST /v1/messages`` (non-streaming and SSE), answers deterministically — the reply is
``"echo: <last user message>"``, usage is computed from the input (4 characters a token)
— and follows a fault script. Use it in-process::

    async with chaos_server(FaultScript(faults=[Fault(kind="status", status=429,
                                                      headers={"retry-after": "2"})])) as server:
        provider = OpenAIProvider(ProviderConfig(name="alpha", base_url=server.url))

or as a command: ``python -m actors.testing.chaos --port 8099 --script faults.toml``.

Faults (``Fault.kind``), consumed in order from a queue per route (``openai``,
``anthropic``; ``*`` for any), ``times`` each — stream-only faults wait for the next
streaming request; with no queued fault, ``probabilities`` (seeded) may pick one:

| kind | what the client sees |
|---|---|
| ``status`` | ``status`` with ``headers`` and the dialect's error body (or ``body``) |
| ``html`` | a proxy's HTML error page (``status``, default 502) |
| ``malformed_json`` | 200 with a truncated JSON body |
| ``latency`` | the normal answer after ``seconds`` |
| ``hang`` | nothing, for ``seconds`` (default: until the client gives up) |
| ``reset_before`` | the connection reset before any response |
| ``reset_mid`` | headers and half a body, then a reset |
| ``cut_stream`` | ``after`` events, then a clean close (``clean``) or a reset; no terminator |
| ``stream_error`` | ``after`` stream events, then the dialect's error event (overloaded) |
| ``slow_stream`` | stream events ``seconds`` apart |
| ``content_filter`` | the dialect's content-policy refusal (400) |
| ``context_length`` | the dialect's context-length error (400) |

Every request is recorded (:attr:`ChaosServer.requests`) without secrets: credential
headers are dropped, and whether a streaming client disconnected early is noted.

The package: :mod:`~actors.testing.chaos.script` (faults, scripts, TOML),
:mod:`~actors.testing.chaos.server` (the server), :mod:`~actors.testing.chaos.dialects`
(the bodies and events each API answers), :mod:`~actors.testing.chaos.wire` (h11
plumbing), :mod:`~actors.testing.chaos.cli` (the command). Import from here.
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
