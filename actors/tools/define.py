"""What a tool is: a name, a description, an async function, its schemas, its timeout and
its retry policy — and what a tool function receives and may return.

A tool function is ``async def fn(**arguments)`` or ``async def fn(..., context)``: a
parameter named ``context`` receives the call's :class:`ToolContext` (its idempotency
key, the attempt number). It returns its output (JSON-shaped: validated against the
output schema when one is declared), or a :class:`Partial` — the payload in its declared
shape plus typed per-item errors — and fails by raising: an :class:`~actors.ActorError`
keeps its code (``resource_busy`` to say a resource is contended), anything else is
``tool_failed``.

``retry`` is the tool's own retry policy (a :class:`supervisors.RetryPolicy`): the front
door retries the tool's *retryable* failures by it. The default is ``None``: never
retried — the tool's contract sets its policy, the runtime imposes none.
"""

from __future__ import annotations

import inspect
import math
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

import attrs

from actors.codes import Code
from actors.error_types import ActorError
from actors.redact import redact_text

#: A tool's name as the model sees it (OpenAI and Anthropic accept this set).
NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The parameter of a tool function that receives the :class:`ToolContext`.
CONTEXT_PARAMETER: Final = "context"

ToolFunction = Callable[..., Awaitable[Any]]


def _bad_config(field: str, expected: str, value: object) -> ActorError:
    return ActorError.from_code(
        Code.CONFIG_INVALID, f"{field} must be {expected}, got {type(value).__name__}"
    )


def check_name(value: object) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        raise ActorError.from_code(
            Code.CONFIG_INVALID,
            "Tool.name must be 1-64 letters, digits, '_' or '-'"
            + (f", got {value!r}" if isinstance(value, str) and len(value) <= 80 else ""),
        )
    return value


def _seconds_or_none(field: str) -> Callable[[Any, Any, Any], None]:
    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _bad_config(field, "a number of seconds > 0 or None", value)
        if not (value > 0 and value < sys.float_info.max and math.isfinite(value)):
            raise ActorError.from_code(
                Code.CONFIG_INVALID, f"{field} must be a finite number of seconds > 0"
            )

    return check


def _schema_or_none(field: str) -> Callable[[Any, Any, Any], None]:
    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value is not None and not isinstance(value, Mapping):
            raise _bad_config(field, "a JSON Schema (a mapping) or None", value)

    return check


def _callable(instance: Any, attribute: Any, value: Any) -> None:
    if not is_async_callable(value):
        raise _bad_config("Tool.fn", "an async function", value)


def is_async_callable(value: object) -> bool:
    """An ``async def`` function (or a partial of one, or an object whose ``__call__`` is
    one): a plain function would run its body on the worker's event loop, blocking it."""
    if inspect.iscoroutinefunction(value):
        return True
    call = getattr(value, "__call__", None)  # noqa: B004 - the method itself is inspected
    return call is not None and inspect.iscoroutinefunction(call)


@attrs.frozen(kw_only=True)
class Tool:
    """One tool (see the module docstring). Build it with :func:`tool`, which derives the
    schemas from the function's annotations when they are not given.

    ``timeout``: seconds one attempt may run (``None``: no limit of its own); past it
    the attempt fails with ``tool_timeout`` — answered when the function ends: one that
    shields its cleanup from the cancel delays that answer (trio cannot interrupt a
    shield; a caller's own cancel is answered at once). ``cleanup``: seconds a timed-out
    function may take to end before ``tool.cleanup_overrun`` reports it.
    """

    name: str = attrs.field(converter=check_name)
    description: str = attrs.field(default="")
    fn: ToolFunction = attrs.field(validator=_callable, repr=False)
    input_schema: Mapping[str, Any] = attrs.field(validator=_schema_or_none("Tool.input_schema"))
    output_schema: Mapping[str, Any] | None = attrs.field(
        default=None, validator=_schema_or_none("Tool.output_schema")
    )
    timeout: float | None = attrs.field(default=None, validator=_seconds_or_none("Tool.timeout"))
    cleanup: float = attrs.field(default=5.0, validator=_seconds_or_none("Tool.cleanup"))
    #: A ``supervisors.RetryPolicy`` (checked by the front door); ``None``: never retried.
    retry: Any = None
    #: Whether ``fn`` takes the :class:`ToolContext` (a ``context`` parameter).
    takes_context: bool = False
    #: Whether the arguments are made into the annotated types (attrs classes) first.
    structured: bool = False

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.description, str):
            raise _bad_config("Tool.description", "a string", self.description)


class ToolContext(NamedTuple):
    """What one attempt of a tool call knows about itself (immutable; a named tuple, as
    one is made for every call).

    ``key`` is the call's idempotency key — the same on every attempt and on a resumed
    run's re-execution of the same call (``run/node/index`` when the caller gives a run
    and node, else one made per call): a tool with side effects uses it to do them once.
    ``attempt`` counts from 1.
    """

    tool: str
    key: str
    attempt: int = 1
    run_id: str | None = None
    node_id: str | None = None


def _redacted(value: Any) -> Any:
    """Text with secrets redacted (it may reach a model); anything else for the
    validator to refuse."""
    return redact_text(value) if isinstance(value, str) else value


@attrs.frozen
class ItemError:
    """One item a tool could not do, typed: ``item`` names it (an index, a URL — never a
    secret), ``code`` and a user-safe ``message``."""

    item: str = attrs.field(converter=_redacted, validator=attrs.validators.instance_of(str))
    code: Code = attrs.field(converter=Code)
    message: str = attrs.field(
        default="", converter=_redacted, validator=attrs.validators.instance_of(str)
    )

    def as_dict(self) -> dict[str, Any]:
        """The error as JSON data: ``item``, ``code``, ``message``."""
        return {"item": self.item, "code": str(self.code), "message": self.message}


def _item_errors(items: Iterable[Any]) -> tuple[ItemError, ...]:
    """Typed per-item errors: :class:`ItemError` values or ``(item, code, message)``
    tuples; anything else is refused (a ``TypeError``: a tool returning it fails as
    ``tool_failed``), so an untyped error never reaches a caller or a model."""
    if isinstance(items, str | bytes):
        raise TypeError("Partial.errors must be ItemError values or (item, code, message) tuples")
    made = []
    for error in items:
        if isinstance(error, ItemError):
            made.append(error)
        elif isinstance(error, tuple) and len(error) == 3 and isinstance(error[0], str):
            made.append(ItemError(*error))
        else:
            raise TypeError(
                "Partial.errors must be ItemError values or (item, code, message) tuples, "
                f"got {type(error).__name__}"
            )
    return tuple(made)


def _tools(tools: Iterable[Tool]) -> tuple[Tool, ...]:
    return tuple(tools)


@attrs.frozen
class Partial:
    """A partial result: ``payload`` in the tool's declared output shape, plus the typed
    errors of the items that failed (e.g. 3 of 5 URLs fetched). Errors are never blended
    into the payload: a caller sees ``ToolResult.errors``, the model sees both."""

    payload: Any
    errors: tuple[ItemError, ...] = attrs.field(converter=_item_errors)


def partial(payload: Any, errors: Sequence[ItemError | tuple[str, Code | str, str]]) -> Partial:
    """Return this from a tool that did some of its items: ``payload`` in the declared
    shape, ``errors`` as :class:`ItemError` values or ``(item, code, message)`` tuples.
    With no errors it is a full result (``ToolResult.errors`` is empty)."""
    return Partial(payload, _item_errors(errors))


class ToolResult(NamedTuple):
    """What the front door answers: the tool's ``value`` (the payload of a partial
    result), its per-item ``errors`` (empty for a full result), the ``attempt`` that
    produced it and the call's idempotency ``key`` (immutable; a named tuple, as one is
    made for every call)."""

    tool: str
    value: Any
    errors: tuple[ItemError, ...] = ()
    attempt: int = 1
    key: str = ""

    @property
    def partial(self) -> bool:
        """Whether some items failed (``errors`` is not empty) while the call succeeded."""
        return bool(self.errors)

    def for_model(self) -> dict[str, Any]:
        """The shape the next LLM turn gets: ``{"result": value}`` plus ``"errors"``
        (item, code, message) when some items failed."""
        shaped: dict[str, Any] = {"result": self.value}
        if self.errors:
            shaped["errors"] = [error.as_dict() for error in self.errors]
        return shaped


def tool(
    fn: ToolFunction | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
    output_schema: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    cleanup: float = 5.0,
    retry: Any = None,
) -> Any:
    """Make a :class:`Tool` of an async function — ``@tool`` or ``@tool(timeout=5)``.

    ``name`` defaults to the function's name, ``description`` to its docstring's first
    paragraph. The input schema is derived from the parameters' annotations (str, int,
    float, bool, lists, dicts, ``Optional``, ``Literal``, enums, nested attrs classes:
    :func:`~actors.tools.schema.schema_from_function`) unless given; the output schema
    from the return annotation when it is one of those. A parameter named ``context``
    receives the :class:`ToolContext`. Arguments are turned into the annotated types
    (attrs classes from objects) before the call.
    """
    from actors.tools.schema import (
        needs_structuring,
        output_schema_from_function,
        schema_from_function,
    )

    def make(function: ToolFunction) -> Tool:
        if not callable(function):
            raise _bad_config("tool()", "an async function", function)
        parameters = _parameters(function)
        doc = (function.__doc__ or "").strip().split("\n\n")[0]
        return Tool(
            name=name if name is not None else getattr(function, "__name__", ""),
            description=description if description is not None else " ".join(doc.split()),
            fn=function,
            input_schema=input_schema
            if input_schema is not None
            else schema_from_function(function, skip=(CONTEXT_PARAMETER,)),
            output_schema=output_schema
            if output_schema is not None
            else output_schema_from_function(function),
            timeout=timeout,
            cleanup=cleanup,
            retry=retry,
            takes_context=CONTEXT_PARAMETER in parameters,
            structured=input_schema is None
            and needs_structuring(function, skip=(CONTEXT_PARAMETER,)),
        )

    return make if fn is None else make(fn)


def _parameters(function: ToolFunction) -> Mapping[str, Any]:
    try:
        return inspect.signature(function).parameters
    except (TypeError, ValueError) as exc:
        raise ActorError.from_code(
            Code.CONFIG_INVALID, "tool() needs a function whose signature can be read", cause=exc
        ) from exc


@attrs.frozen
class ToolGroup:
    """Tools hosted together: ``concurrency`` :class:`~actors.tools.host.ToolHost`
    actors (workers), each running one call at a time, each able to run every tool of
    the group. A host that crashes (a tool raising ``KeyboardInterrupt``-like exits
    only: a tool's failure fails its caller, not its host) is restarted by its
    supervisor; its siblings go on. Group by what may share workers."""

    name: str = attrs.field(converter=check_name)
    tools: tuple[Tool, ...] = attrs.field(converter=_tools)
    concurrency: int = 4

    def __attrs_post_init__(self) -> None:
        names: set[str] = set()
        for index, item in enumerate(self.tools):
            if not isinstance(item, Tool):
                raise _bad_config(f"ToolGroup.tools[{index}]", "a Tool", item)
            if item.name in names:
                raise ActorError.from_code(
                    Code.CONFIG_INVALID,
                    f"ToolGroup {self.name!r} has two tools named {item.name!r}",
                )
            names.add(item.name)
        if not self.tools:
            raise ActorError.from_code(Code.CONFIG_INVALID, "ToolGroup.tools must not be empty")
        concurrency = self.concurrency
        if isinstance(concurrency, bool) or not isinstance(concurrency, int):
            raise _bad_config("ToolGroup.concurrency", "an integer from 1 to 1024", concurrency)
        if not 1 <= concurrency <= 1024:
            raise ActorError.from_code(
                Code.CONFIG_INVALID, "ToolGroup.concurrency must be an integer from 1 to 1024"
            )
