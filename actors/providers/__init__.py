"""LLM provider adapters over httpx, as actors: OpenAI-compatible and Anthropic."""

from actors.providers.anthropic import AnthropicProvider
from actors.providers.base import (
    Capabilities,
    Complete,
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
from actors.providers.http import HttpProvider
from actors.providers.openai import OpenAIProvider
from actors.providers.sse import SseEvent, SseParser

__all__ = [
    "AnthropicProvider",
    "Capabilities",
    "Complete",
    "HttpProvider",
    "LlmProvider",
    "LlmRequest",
    "LlmResponse",
    "Message",
    "OpenAIProvider",
    "ProviderClient",
    "ProviderConfig",
    "SseEvent",
    "SseParser",
    "Stream",
    "StreamEvent",
    "StreamReader",
    "ToolCall",
    "ToolSpec",
]
