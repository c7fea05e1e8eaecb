"""Tool hosts: the actors tools run in, and the two messages every host answers.

A host is an actor under a supervisor; a :class:`~actors.tools.define.ToolGroup` runs
``concurrency`` of them, OTP-style workers (one run each at a time, in the actor's own
task: no task is spawned per call), and the front door (:class:`supervisors.Tools`)
gives each call to the least busy. A host answers :class:`ListTools` with its tools'
:class:`ToolInfo` and :class:`RunTool` with a tool's output; a caller that goes away
(``propagate_cancel``) cancels its run. The front door checks grants and arguments
before a run reaches a host; a host trusts what it is sent.

How a run ends, as the host reports it:

* the function returned — its output, or a :class:`~actors.tools.define.Partial`;
* it raised an :class:`~actors.ActorError` — that error, its code kept (``resource_busy``,
  ``tool_failed``…), the tool named; any other exception — ``tool_failed``, the exception
  its cause (the model never sees the cause: :func:`~actors.tools.facing.for_model`);
* its own ``timeout`` passed — ``tool_timeout``, even if the function raised something
  else while being cancelled;
* a cancel covers the run — the caller went away (``propagate_cancel``), the tree was
  aborted, a scope around the tree was cancelled — or what it raised is itself a
  cancellation (a group holding ``trio.Cancelled`` next to other errors): the failure is
  never answered as ``tool_failed``. The host decides nothing here: it re-raises what
  the function raised (:func:`actors.errors.cancel_supersedes`, the rule every actor
  follows), and the actor layer answers the caller as for any handler that failed while
  cancelled — ``cancelled`` with the cancel's reason and the failure as ``__cause__``
  (logged as ``error.suppressed``), or nothing to a caller that already left with
  ``trio.Cancelled``. The host goes on (or ends with the cancel), never crashed by it.

A tool function that shields itself from cancellation is waited for (trio cannot
interrupt a shield); one that timed out and took more than its ``cleanup`` seconds to end
after that is reported as ``tool.cleanup_overrun``. A tool's failure fails its caller
only: it never crashes the host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import attrs
import trio

from actors.actor import Actor
from actors.codes import Code
from actors.error_types import ActorError, Failure, fail
from actors.errors import cancel_supersedes
from actors.events import ToolCleanupOverrun
from actors.observe import emit
from actors.tools.define import Tool, ToolContext
from actors.tools.schema import structure_arguments


@attrs.frozen
class ToolInfo:
    """What a front door needs to know of a hosted tool (built-in or from MCP)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    #: ``"builtin"`` or the MCP server's name.
    source: str = "builtin"


@attrs.frozen
class ListTools:
    """Call message: the host's tools, answered with a tuple of :class:`ToolInfo`."""


class RunTool(NamedTuple):
    """Call message: run ``tool`` with ``arguments`` (already checked) for one attempt (a
    named tuple: one is made for every attempt)."""

    tool: str
    arguments: Mapping[str, Any]
    context: ToolContext


def info_of(tool: Tool) -> ToolInfo:
    """What the model is shown of ``tool``: name, description, input and output schemas."""
    return ToolInfo(tool.name, tool.description, tool.input_schema, tool.output_schema)


class ToolHost(Actor):
    """Hosts built-in :class:`~actors.tools.define.Tool` values (see the module docstring).

    ``ChildSpec(id="tools.web", actor=ToolHost, args=((fetch, search),))``.
    """

    def __init__(self, tools: Sequence[Tool]) -> None:
        if isinstance(tools, Tool):
            tools = (tools,)
        by_name: dict[str, Tool] = {}
        for index, tool in enumerate(tools):
            if not isinstance(tool, Tool):
                raise ActorError.from_code(
                    Code.CONFIG_INVALID,
                    f"ToolHost tools[{index}] must be a Tool, got {type(tool).__name__}",
                )
            if tool.name in by_name:
                raise ActorError.from_code(
                    Code.CONFIG_INVALID, f"ToolHost has two tools named {tool.name!r}"
                )
            by_name[tool.name] = tool
        self.tools = by_name
        # Tools run as ``fn(**arguments)`` with nothing around them (no timeout, context
        # or structuring): the handler awaits them itself.
        self._runs: dict[str, tuple[Tool, Any]] = {
            name: (
                tool,
                tool.fn
                if tool.timeout is None and not tool.takes_context and not tool.structured
                else None,
            )
            for name, tool in by_name.items()
        }

    async def handle(self, message: Any) -> Any:
        if type(message) is RunTool:
            found = self._runs.get(message.tool)
            if found is None:
                return fail(
                    Code.TOOL_NOT_FOUND,
                    f"this host has no tool {message.tool!r}",
                    retryable=False,
                )
            tool, plain = found
            try:
                if plain is not None:
                    try:
                        running = plain(**message.arguments)  # binds only (see _started)
                    except TypeError as exc:
                        raise _misfit(tool) from exc
                    return await running
                return await run_tool(tool, message.arguments, message.context)
            except trio.Cancelled:
                raise
            except BaseException as exc:  # every way a run ends badly: see _outcome
                if await cancel_supersedes(exc) is not None:
                    raise  # the actor layer answers ``cancelled``, ``exc`` its cause
                failure, crash = _outcome(tool, exc)
                if failure is None:  # an interrupt (Ctrl-C): the worker and the tree see it
                    raise
                if crash:
                    raise failure from exc
                return _returned(failure)
        if isinstance(message, ListTools):
            return tuple(info_of(tool) for tool in self.tools.values())
        return fail(
            Code.INPUT_VALIDATION,
            f"a tool host takes RunTool or ListTools, not {type(message).__name__}",
            retryable=False,
        )


async def run_tool(tool: Tool, arguments: Mapping[str, Any], context: ToolContext) -> Any:
    """Run one attempt of ``tool``: its value, or what it raised as it is (the host's
    :func:`_outcome` reads it); ``tool_timeout`` past its own timeout — even when the
    function swallowed the cancel and returned, or raised something else meanwhile —
    and ``input_validation`` when the arguments do not fit its parameters."""
    call: Mapping[str, Any] = arguments  # as it is: ``**`` makes the function's own copy
    if tool.structured:
        call = structure_arguments(tool.fn, arguments, skip=("context",))
    if tool.takes_context:
        call = {**call, "context": context}
    if tool.timeout is None:
        return await _started(tool, tool.fn, call)
    deadline = trio.current_time() + tool.timeout
    with trio.CancelScope(deadline=deadline) as own:
        try:
            value = await _started(tool, tool.fn, call)
        except trio.Cancelled:
            raise
        except BaseException as exc:
            if own.cancel_called and not _interrupts(exc):
                raise _timed_out(tool, exc) from exc
            raise
        finally:
            if own.cancel_called:
                _overran(tool, deadline)
        if not own.cancel_called:
            return value
    raise _timed_out(tool, None)  # the timeout cancelled it: what it did after is too late


def _started(tool: Tool, fn: Any, arguments: Mapping[str, Any]) -> Any:
    """The coroutine of ``fn(**arguments)``. Calling an ``async def`` only binds its
    arguments: a ``TypeError`` here is arguments that do not fit its parameters (a
    hand-written schema looser than the function), not a failure of the tool."""
    try:
        return fn(**arguments)
    except TypeError as exc:
        raise _misfit(tool) from exc


def _misfit(tool: Tool) -> ActorError:
    return ActorError.from_code(
        Code.INPUT_VALIDATION,
        f"the arguments do not fit the parameters of tool {tool.name!r}",
        retryable=False,
        tool=tool.name,
    )


def _outcome(tool: Tool, exc: BaseException) -> tuple[ActorError | None, bool]:
    """What a run that raised ``exc`` answers, and whether it crashes the worker — for a
    run no cancel superseded (that one never gets here: see :meth:`ToolHost.handle`).

    * ``KeyboardInterrupt`` (alone or in a group): ``(None, False)`` — it propagates
      (Ctrl-C must reach the daemon);
    * an ``ActorError``: itself, named after the tool that ran (a name the tool put in is
      replaced) — except ``cancelled``: the caller's cancel arrives as ``trio.Cancelled``,
      so a tool's own ``cancelled`` is its failure (``tool_failed``);
    * an ``Exception``, an exception group (holding no ``trio.Cancelled``), or
      ``SystemExit`` (a library calling ``sys.exit()`` must not stop the daemon):
      ``tool_failed``, the exception its cause;
    * any other ``BaseException`` (``GeneratorExit``, a custom one): ``internal``, naming
      only its type, and the worker crashes — its supervisor restarts it.
    """
    if _interrupts(exc):
        return None, False
    if isinstance(exc, ActorError):
        if exc.code is Code.CANCELLED:
            return _tool_failed(tool, exc), False
        exc.tool = tool.name
        return exc, False
    if isinstance(exc, Exception | SystemExit | BaseExceptionGroup):
        return _tool_failed(tool, exc), False
    crashed = ActorError.from_code(
        Code.INTERNAL,
        f"tool {tool.name!r} crashed its worker ({type(exc).__name__})",
        tool=tool.name,
    )
    return crashed, True


def _interrupts(exc: BaseException) -> bool:
    """``KeyboardInterrupt``, alone or in a group."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(KeyboardInterrupt) is not None
    return isinstance(exc, KeyboardInterrupt)


def _tool_failed(tool: Tool, cause: BaseException) -> ActorError:
    return ActorError.from_code(
        Code.TOOL_FAILED, f"tool {tool.name!r} raised", cause=cause, tool=tool.name
    )


def _returned(error: ActorError) -> Failure:
    """``error`` as a reply value: the caller gets it (code, message, retryable, tool,
    retry_after kept, ``error`` its cause); the host goes on."""
    context: dict[str, Any] = {"tool": error.tool}
    if error.retry_after is not None:
        context["retry_after"] = error.retry_after
    return fail(error.code, error.message, retryable=error.retryable, cause=error, **context)


def _overran(tool: Tool, deadline: float) -> None:
    """Report a timed-out tool that took longer than its ``cleanup`` budget to end."""
    late = trio.current_time() - deadline
    if late > tool.cleanup:
        emit(ToolCleanupOverrun(tool=tool.name, budget=tool.cleanup, seconds=late))


def _timed_out(tool: Tool, cause: BaseException | None) -> ActorError:
    return ActorError.from_code(
        Code.TOOL_TIMEOUT,
        f"tool {tool.name!r} did not finish within its timeout",
        cause=cause,
        tool=tool.name,
    )
