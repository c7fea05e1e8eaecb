"""Small actors the runtime tests share."""

from __future__ import annotations

from typing import Any

import trio

from actors import Actor, Code, fail


class Recorder(Actor):
    """Replies with the message; "crash" raises, ("sleep", s) sleeps, "fail" returns a Failure.

    Every execution is appended to the shared ``log`` (across restarts).
    """

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    async def handle(self, message: Any) -> Any:
        self.log.append(message)
        if message == "crash":
            raise ValueError("handler blew up")
        if message == "fail":
            return fail(Code.TOOL_FAILED, "expected failure", retryable=True)
        if isinstance(message, tuple) and message[0] == "sleep":
            await trio.sleep(message[1])
        return message
