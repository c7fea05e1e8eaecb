"""What a provider API speaks, apart from how it is carried: the :class:`Dialect` protocol.

A dialect (:class:`~actors.providers.openai.OpenAIDialect`,
:class:`~actors.providers.anthropic.AnthropicDialect`) turns an
:class:`~actors.providers.base.LlmRequest` into a path, headers and a JSON body, and an
answer — a JSON body or SSE events — into the provider-neutral result types. It does no
I/O and classifies nothing: :class:`~actors.providers.http.HttpProvider` owns the httpx
client, the call and the classification.

A dialect raises ``malformed_response`` (an :class:`~actors.errors.ActorError`) for an
answer of the wrong shape, naming the field (:func:`structure`). An error event received
mid-stream is not raised: the dialect records the HTTP answer it stands for in
:attr:`StreamState.error` and the HTTP provider classifies it like that answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

import attrs
import cattrs

from actors.errors import ActorError, Code
from actors.providers.base import LlmRequest, LlmResponse, StreamEvent
from actors.providers.sse import SseEvent
from actors.usage import Usage

_converter = cattrs.Converter(forbid_extra_keys=False)


@attrs.frozen
class ErrorAnswer:
    """The HTTP answer an error event received mid-stream stands for."""

    status: int
    body: Mapping[str, Any]


@attrs.define
class StreamState:
    """What a stream delivered so far (for the assembled answer or the failure).

    A dialect sets ``done`` on the stream's terminator and ``error`` on an error event;
    events after either are not read.
    """

    text: list[str] = attrs.Factory(list)
    tool_calls: dict[int, dict[str, str]] = attrs.Factory(dict)
    usage: Usage | None = None
    finish_reason: str | None = None
    done: bool = False
    error: ErrorAnswer | None = None


class Dialect(Protocol):
    """One provider API's wire format. ``provider`` arguments are the configured provider
    name, for the errors a dialect raises."""

    #: The :func:`~actors.errors.classify` dialect (``"openai"``, ``"anthropic"``).
    name: str
    #: The endpoint, relative to ``ProviderConfig.base_url``.
    path: str

    def headers(self, api_key: str | None) -> dict[str, str]:
        """Headers sent with every request (authentication, API version)."""
        ...

    def request_body(self, request: LlmRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request``; ``stream`` asks for an SSE answer."""
        ...

    def parse_response(self, data: Any, request: LlmRequest, *, provider: str) -> LlmResponse:
        """The answer of a non-streaming 2xx whose body parsed as JSON ``data``."""
        ...

    def stream_events(
        self, event: SseEvent, state: StreamState, *, provider: str
    ) -> list[StreamEvent]:
        """Translate one SSE event into stream events, updating ``state``."""
        ...

    def complete_at_eof(self, state: StreamState) -> bool:
        """Whether a stream that closed cleanly before its terminator is still complete."""
        ...


def structure(data: Any, cls: type[Any], *, provider: str, model: str | None) -> Any:
    """cattrs-structure untrusted provider JSON; ``malformed_response`` naming the field."""
    try:
        return _converter.structure(data, cls)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        problems = (
            cattrs.transform_error(exc)
            if isinstance(exc, cattrs.BaseValidationError)
            else [str(exc)]
        )
        raise ActorError.from_code(
            Code.MALFORMED_RESPONSE,
            "provider answer does not match its schema: " + "; ".join(problems),
            provider=provider,
            model=model,
        ) from exc


def event_json(event: SseEvent, *, provider: str) -> Any:
    """The JSON of one stream event, or ``malformed_response``."""
    try:
        return json.loads(event.data)
    except ValueError:
        raise ActorError.from_code(
            Code.MALFORMED_RESPONSE, "stream event is not JSON", provider=provider
        ) from None


__all__ = ["Dialect", "ErrorAnswer", "StreamState", "event_json", "structure"]
