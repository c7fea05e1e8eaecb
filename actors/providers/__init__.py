"""LLM provider adapters over httpx, as actors: OpenAI-compatible and Anthropic.

An adapter is an :class:`HttpProvider` (transport: the httpx client, the call, the
classification) speaking a :class:`Dialect` (the wire format: :class:`OpenAIDialect`,
:class:`AnthropicDialect`). :class:`OpenAIProvider` and :class:`AnthropicProvider` are
the two put together.
"""

from actors.providers.anthropic import AnthropicDialect, AnthropicProvider
from actors.providers.base import (
    Capabilities,
    Complete,
    EventStream,
    LlmProvider,
    LlmRequest,
    LlmResponse,
    Message,
    ProviderConfig,
    Stream,
    StreamEvent,
    StreamReader,
    ToolCall,
    ToolSpec,
)
from actors.providers.client import ProviderClient
from actors.providers.dialect import Dialect, ErrorAnswer, StreamState
from actors.providers.http import HttpProvider
from actors.providers.openai import OpenAIDialect, OpenAIProvider
from actors.providers.sse import SseEvent, SseParser

__all__ = [
    "AnthropicDialect",
    "AnthropicProvider",
    "Capabilities",
    "Complete",
    "Dialect",
    "ErrorAnswer",
    "EventStream",
    "HttpProvider",
    "LlmProvider",
    "LlmRequest",
    "LlmResponse",
    "Message",
    "OpenAIDialect",
    "OpenAIProvider",
    "ProviderClient",
    "ProviderConfig",
    "SseEvent",
    "SseParser",
    "Stream",
    "StreamEvent",
    "StreamReader",
    "StreamState",
    "ToolCall",
    "ToolSpec",
]
