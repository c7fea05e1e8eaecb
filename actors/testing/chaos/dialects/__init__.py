"""What the chaos server answers, per dialect (``openai`` or ``anthropic``).

Pure functions and tables from a request payload to bytes or JSON-ready dicts, no I/O:
:func:`answer_for` is what to answer (:mod:`~actors.testing.chaos.dialects.common`),
:data:`DIALECTS` how each API says it (:mod:`~actors.testing.chaos.dialects.openai`,
:mod:`~actors.testing.chaos.dialects.anthropic`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from actors.testing.chaos.dialects.anthropic import AnthropicWire
from actors.testing.chaos.dialects.common import (
    Answer,
    AnswerToolCall,
    StreamPlan,
    WireDialect,
    answer_for,
    is_json_event,
    truncate_event,
)
from actors.testing.chaos.dialects.openai import OpenAIWire

#: Route -> the dialect it speaks.
DIALECTS: Final[Mapping[str, WireDialect]] = {"openai": OpenAIWire(), "anthropic": AnthropicWire()}

__all__ = [
    "DIALECTS",
    "Answer",
    "AnswerToolCall",
    "AnthropicWire",
    "OpenAIWire",
    "StreamPlan",
    "WireDialect",
    "answer_for",
    "is_json_event",
    "truncate_event",
]
