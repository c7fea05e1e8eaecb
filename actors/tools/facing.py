"""The model-facing face of a tool error: what the next LLM turn is told.

Never internals by default: a tool error renders to ``{"error": {"code", "message",
"retryable"}}`` — the code, the code's fixed user-safe message (plus the tool's name and,
for a validation failure, the JSON path that failed), and whether trying again may help.
No stack, no cause, no argument value, no host path, no secret: the message is built
from the code table, never from the error's own text, which may carry any of them.
"""

from __future__ import annotations

import re
from typing import Any, Final

from actors.codes import Code, info
from actors.error_types import ActorError

#: A JSON path as the schema checker writes it (``$``, ``$.a``, ``$.a[2].b``).
_PATH: Final = re.compile(r"(\$(?:\.[A-Za-z0-9_-]{1,64}|\[\d{1,9}\]){0,32})")
_PATH_CODES: Final = frozenset({Code.INPUT_VALIDATION, Code.OUTPUT_VALIDATION})


def for_model(error: ActorError) -> dict[str, Any]:
    """``error`` as the model may see it (see the module docstring)."""
    code = error.code
    message = info(code).user_message
    if error.tool is not None and _safe_name(error.tool):
        message = f"{message} (tool: {error.tool})"
    if code in _PATH_CODES:
        found = _PATH.search(error.message)
        if found is not None:
            message = f"{message} (at {found.group(1)})"
    return {"error": {"code": str(code), "message": message, "retryable": error.retryable}}


def _safe_name(name: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name))
