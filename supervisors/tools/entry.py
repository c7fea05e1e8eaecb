"""What the front door knows of one tool, and the pieces of a call that are not the
front door's flow: failures classified, retry delays, results, keys and arguments."""

from __future__ import annotations

import copy
import itertools
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

import attrs
import trio

from actors import ActorError, ActorRef, Code, classify
from actors.tools import Checker, Grants, Partial, ToolInfo, ToolResult, compile_schema
from supervisors.resilience.retry import RetryPolicy, next_delay

#: Numbers of the ``call-N`` keys.
KEYS: Final = itertools.count(1)


class Workers:
    """The host actors of one source and the calls each is running: a call goes to the
    least busy (the first of them on a tie), as a worker pool hands out work."""

    __slots__ = ("busy", "refs")

    def __init__(self, refs: Sequence[ActorRef]) -> None:
        self.refs = list(refs)
        self.busy = [0] * len(self.refs)

    async def send(self, message: Any) -> tuple[Any, Exception | None]:
        """``message`` to the least busy worker (``propagate_cancel``): its reply, or the
        failure it raised. The worker counts as busy while it is waited for, on every path.

        A cancel of the caller propagates as ``trio.Cancelled``. A cancel that reached the
        worker instead (an abort, a scope around the tree) arrives as the actor layer's
        own answer, ``cancelled`` with the cancel's reason — also when the tool failed
        while being cancelled: the host hands such a failure to the actor layer, which
        keeps it as the cause (:func:`actors.lowlevel.cancel_supersedes`). Nothing here
        re-derives that decision; :func:`failure_of` keeps ``cancelled`` as it is.
        """
        busy = self.busy
        index = 0 if len(busy) == 1 else self.pick()
        busy[index] += 1
        try:
            return await self.refs[index].call(message, timeout=None, propagate_cancel=True), None
        except trio.Cancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - the attempt's failure, for the caller to read
            return None, exc
        finally:
            busy[index] -= 1

    def pick(self) -> int:
        busy = self.busy
        best = 0
        if busy[0]:
            low = busy[0]
            for index in range(1, len(busy)):
                if busy[index] < low:
                    best, low = index, busy[index]
                    if not low:
                        break
        return best


@attrs.define
class ToolEntry:
    """One callable tool: where it runs and how it is checked and retried."""

    info: ToolInfo
    #: ``None``: the tool is declared but no host runs it (a call is ``internal``).
    workers: Workers | None
    source: str
    input: Checker
    output: Checker | None
    retry: RetryPolicy | None
    fallback: ToolEntry | None = None


class Call(NamedTuple):
    """One call as the front door checked it: its copied arguments (``nested``: with
    lists or objects inside), grants, timeout and idempotency key."""

    name: str
    arguments: dict[str, Any]
    nested: bool
    grants: Grants
    timeout: float | None
    key: str
    run_id: str | None
    node_id: str | None


def failure_of(exc: Exception, entry: ToolEntry, name: str, attempt: int) -> ActorError:
    error = classify(exc)
    if error.code is Code.TOOL_NOT_FOUND:
        # Registered here, unknown to its host: a host/configuration gap.
        error = ActorError.from_code(
            Code.INTERNAL,
            f"tool {name!r} is registered but its host does not have it",
            retryable=False,
            cause=error,
            tool=name,
        )
    elif entry.source != "builtin" and error.code not in _TOOL_CODES:
        # The MCP host itself failed (restarting, stopped): its server is unreachable.
        error = ActorError.from_code(
            Code.MCP_GATEWAY,
            f"the MCP server {entry.source!r} could not be reached",
            cause=error,
            tool=name,
        )
    if error.tool is None:
        error.tool = name
    error.attempt = attempt
    return error


_TOOL_CODES: Final = frozenset(
    {
        Code.TOOL_FAILED,
        Code.TOOL_TIMEOUT,
        Code.RESOURCE_BUSY,
        Code.MCP_GATEWAY,
        Code.MCP_TOOL_FAILED,
        Code.TOOL_NOT_FOUND,
        Code.INPUT_VALIDATION,
        Code.OUTPUT_VALIDATION,
        Code.CANCELLED,
    }
)


def retry_delay(
    policy: RetryPolicy | None, error: ActorError, attempt: int, deadline: float
) -> float | None:
    """Seconds before the next attempt, or ``None`` when ``error`` ends the call."""
    if policy is None or not error.retryable:
        return None
    step = next_delay(policy, error, attempt - 1)
    if step is None:
        return None
    delay = step[0]
    if trio.current_time() + delay >= deadline:
        return None  # the retry could not start before the call's timeout
    return delay


def result_of(entry: ToolEntry, name: str, reply: Any, attempt: int, key: str) -> ToolResult:
    value, errors = (reply.payload, reply.errors) if isinstance(reply, Partial) else (reply, ())
    if entry.output is not None:
        entry.output.check(value, code=Code.OUTPUT_VALIDATION, tool=name)
    return ToolResult(name, value, errors, attempt, key)


def make_entry(info: ToolInfo, workers: Workers | None, source: str, retry: Any) -> ToolEntry:
    return ToolEntry(
        info,
        workers,
        source,
        compile_schema(info.input_schema, what=f"the input schema of {info.name!r}"),
        None
        if info.output_schema is None
        else compile_schema(info.output_schema, what=f"the output schema of {info.name!r}"),
        retry,
    )


def key_of(key: str | None, run_id: str | None, node_id: str | None, index: int | None) -> str:
    """The call's idempotency key: ``key``; else ``run_id/node_id/index`` (all three, or
    none); else a new ``call-N``."""
    if key is not None:
        if type(key) is not str or not key:
            raise bad_call("key", "a non-empty string", key)
        return key
    if run_id is None and node_id is None and index is None:
        return f"call-{next(KEYS)}"
    for field, value in (("run_id", run_id), ("node_id", node_id)):
        if type(value) is not str or not value or "/" in value:
            raise bad_call(
                field, "a non-empty string without '/' (with run_id, node_id and index)", value
            )
    if type(index) is not int or index < 0:
        raise bad_call("index", "an integer >= 0 (with run_id and node_id)", index)
    return f"{run_id}/{node_id}/{index}"


def snapshot(arguments: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """A copy of ``arguments`` that nobody else holds, and whether it has nested lists or
    objects (then each attempt needs a copy of its own: a tool may change them). The top
    level is always copied; the nested values only when there are any (a flat object of
    numbers and strings, the common case, costs one ``dict()``). Nesting too deep to copy
    is ``input_validation``."""
    for value in arguments.values():
        if type(value) not in _LEAVES:  # a list, an object, anything else: copied deep
            return deep_copy(arguments), True
    return dict(arguments), False


#: Values a flat copy shares safely with the caller (immutable JSON leaves).
_LEAVES: Final = frozenset({str, int, float, bool, type(None)})


def deep_copy(arguments: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return copy.deepcopy(dict(arguments))
    except RecursionError:
        raise ActorError.from_code(
            Code.INPUT_VALIDATION, "$: the arguments are nested too deeply", retryable=False
        ) from None


def timeout_of(timeout: object) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise bad_call("timeout", "a number of seconds > 0 or None", timeout)
    seconds = float(timeout) if timeout <= _FLOAT_MAX else math.inf  # a huge int: inf
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ActorError.from_code(
            Code.INPUT_VALIDATION, "timeout must be a finite number of seconds > 0"
        )
    return seconds


_FLOAT_MAX: Final = sys.float_info.max


def bad_call(field: str, expected: str, value: object, **context: Any) -> ActorError:
    return ActorError.from_code(
        Code.INPUT_VALIDATION,
        f"{field} must be {expected}, got {type(value).__name__}",
        retryable=False,
        **context,
    )


def config_error(field: str, expected: str, value: object) -> ActorError:
    return ActorError.from_code(
        Code.CONFIG_INVALID, f"Tools {field} must be {expected}, got {type(value).__name__}"
    )
