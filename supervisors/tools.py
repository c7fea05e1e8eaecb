"""The tools front door: one way in for every tool call — a node runner's and a user's.

``await tools.call(name, arguments, grants=..., timeout=...)`` does, in order:

1. ``name`` unknown → ``tool_not_found`` (an MCP server not listed yet is asked first);
2. not granted (``grants`` lacks it, or its argument constraint refuses) →
   ``tool_denied``: fatal, never retried, the tool never runs;
3. arguments failing the tool's input schema → ``input_validation`` naming the JSON path,
   never the value; the tool never runs;
4. attempts on the tool's host actor: a retryable failure (``tool_failed``,
   ``tool_timeout``, ``resource_busy``, ``mcp_gateway``, ``mcp_tool_failed``…) is retried
   by the tool's own ``retry`` policy — none by default — each retry audited as a
   ``tool.retry`` event with its attempt; an MCP tool whose server cannot be reached
   falls back to the built-in tool of the same name when there is one;
5. output failing the output schema → ``output_validation``.

Errors carry ``tool`` and ``attempt``; a call that ends in an error is reported as one
``tool.call_failed`` event. The caller's cancel always wins: ``trio.Cancelled`` comes out
as it is (never ``tool_failed`` / ``tool_timeout``), nothing is retried after it, and the
tool's run is cancelled (its host answers no one). ``timeout`` bounds the whole call,
retries included: past it, ``tool_timeout`` (not retryable).

Every call has an idempotency key, given to the tool in its
:class:`~actors.tools.ToolContext` on every attempt: ``key=`` when the caller gives one,
``run_id/node_id/index`` when it gives those, else a new ``call-N``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
import trio

from actors import ActorError, ActorRef, Code, classify
from actors.events import ToolCallFailed, ToolFallback, ToolRetried
from actors.lowlevel import emit
from actors.providers import ToolSpec
from actors.tools import (
    NONE,
    Checker,
    Grants,
    ListTools,
    Partial,
    RunTool,
    ToolContext,
    ToolGroup,
    ToolHost,
    ToolInfo,
    ToolResult,
    compile_schema,
    denied,
    info_of,
)
from supervisors.retry import RetryPolicy, next_delay
from supervisors.spec import ChildSpec

_keys = itertools.count(1)
#: Seconds a front door gives an MCP host to list its tools.
LIST_TIMEOUT: Final = 30.0


@attrs.define
class _Entry:
    """One callable tool: where it runs and how it is checked and retried."""

    info: ToolInfo
    ref: ActorRef
    source: str
    input: Checker
    output: Checker | None
    retry: RetryPolicy | None
    fallback: _Entry | None = None


class Tools:
    """The front door (see the module docstring).

    ``groups``: the built-in :class:`~actors.tools.ToolGroup` values and their host refs
    (``(group, ref)`` pairs: :meth:`from_tree` finds the refs of the hosts
    :func:`tool_hosts` made). ``mcp``: ``(server name, host ref)`` pairs of MCP hosts,
    listed on :meth:`refresh` (done by :meth:`from_tree`) and whenever a name is not
    found. ``grants``: what a call without ``grants=`` may use (default: nothing — pass
    :data:`actors.tools.ALL` for trusted code). ``fallback``: an MCP tool whose server
    cannot be reached falls back to a built-in tool of the same name.
    """

    def __init__(
        self,
        groups: Sequence[tuple[ToolGroup, ActorRef]] = (),
        *,
        mcp: Sequence[tuple[str, ActorRef]] = (),
        grants: Grants = NONE,
        fallback: bool = True,
    ) -> None:
        if not isinstance(grants, Grants):
            raise _config("grants", "a Grants", grants)
        self.grants = grants
        self.fallback = fallback
        self._builtin: dict[str, _Entry] = {}
        for group, ref in groups:
            if not isinstance(group, ToolGroup):
                raise _config("groups", "(ToolGroup, ActorRef) pairs", group)
            for item in group.tools:
                if item.name in self._builtin:
                    raise ActorError.from_code(
                        Code.CONFIG_INVALID, f"two built-in tools are named {item.name!r}"
                    )
                if item.retry is not None and not isinstance(item.retry, RetryPolicy):
                    raise _config(f"tool {item.name!r} retry", "a RetryPolicy or None", item.retry)
                self._builtin[item.name] = _entry(info_of(item), ref, "builtin", item.retry)
        self._mcp_hosts = list(mcp)
        self._mcp: dict[str, _Entry] = {}
        self._unlisted = {name for name, _ in self._mcp_hosts}
        self._constraints: dict[int, tuple[object, Checker]] = {}

    @classmethod
    async def from_tree(
        cls,
        tree: Any,
        *sources: Any,
        grants: Grants = NONE,
        fallback: bool = True,
    ) -> Tools:
        """The front door over the hosts :func:`tool_hosts` made in ``tree`` for
        ``sources`` (:class:`~actors.tools.ToolGroup` and MCP server configs); the MCP
        servers are listed now (one that cannot be reached is asked again later)."""
        groups, mcp = [], []
        for source in sources:
            if isinstance(source, ToolGroup):
                groups.append((source, tree.ref(host_id(source))))
            else:
                mcp.append((source.name, tree.ref(host_id(source))))
        tools = cls(groups, mcp=mcp, grants=grants, fallback=fallback)
        await tools.refresh()
        return tools

    # --- what there is --------------------------------------------------------------

    async def refresh(self) -> None:
        """List the MCP hosts not listed yet; one that cannot be reached stays unlisted
        (its tools are unknown until it answers)."""
        for server, ref in self._mcp_hosts:
            if server not in self._unlisted:
                continue
            try:
                infos = await ref.call(ListTools(), timeout=LIST_TIMEOUT, propagate_cancel=True)
            except ActorError:
                continue  # down: asked again when a name is not found
            self._unlisted.discard(server)
            for info in infos:
                if info.name not in self._mcp:
                    self._mcp[info.name] = _entry(info, ref, server, None)

    def names(self) -> list[str]:
        return sorted(set(self._builtin) | set(self._mcp))

    def specs(self, grants: Grants | None = None) -> tuple[ToolSpec, ...]:
        """The tools ``grants`` allows, as :class:`~actors.providers.ToolSpec` values for
        ``LlmRequest.tools`` (``spec.openai()`` / ``spec.anthropic()`` render them)."""
        grants = self.grants if grants is None else grants
        specs = []
        for name in self.names():
            if grants.rule_for(name)[0]:
                entry = self._entry(name)
                assert entry is not None
                specs.append(
                    ToolSpec(
                        name=name,
                        description=entry.info.description,
                        parameters=entry.info.input_schema,
                    )
                )
        return tuple(specs)

    def _entry(self, name: str) -> _Entry | None:
        entry = self._mcp.get(name)
        builtin = self._builtin.get(name)
        if entry is None:
            return builtin
        if builtin is not None and self.fallback and entry.fallback is None:
            entry.fallback = builtin
        return entry

    # --- the call -------------------------------------------------------------------

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        grants: Grants | None = None,
        timeout: float | None = None,
        key: str | None = None,
        run_id: str | None = None,
        node_id: str | None = None,
        index: int | None = None,
    ) -> ToolResult:
        """Call tool ``name`` (see the module docstring)."""
        arguments = {} if arguments is None else arguments
        checked_timeout = _timeout(timeout)
        if not isinstance(name, str) or not name:
            raise _bad_call("name", "a non-empty string", name)
        if not isinstance(arguments, Mapping):
            raise _bad_call("arguments", "a mapping (a JSON object)", arguments, tool=name)
        grants = self.grants if grants is None else grants
        if not isinstance(grants, Grants):
            raise _bad_call("grants", "a Grants", grants, tool=name)
        key = _key(key, run_id, node_id, index)
        attempts = 0
        try:
            entry = self._entry(name)
            if entry is None and self._unlisted:
                await self.refresh()
                entry = self._entry(name)
            if entry is None:
                raise ActorError.from_code(
                    Code.TOOL_NOT_FOUND, f"no tool named {name!r}", tool=name
                )
            self._check_grant(grants, name, arguments)
            entry.input.check(arguments, code=Code.INPUT_VALIDATION, tool=name)
            deadline = (
                math.inf if checked_timeout is None else trio.current_time() + checked_timeout
            )
            context = ToolContext(name, key, 1, run_id, node_id)
            counter = [0]
            try:
                with trio.fail_at(deadline):
                    result = await self._attempts(
                        entry, name, arguments, context, deadline, counter
                    )
            finally:
                attempts = counter[0]
            return result
        except trio.TooSlowError as exc:
            error = ActorError.from_code(
                Code.TOOL_TIMEOUT,
                f"the call of {name!r} did not finish within its timeout",
                retryable=False,
                tool=name,
                attempt=attempts or None,
                cause=exc,
            )
            emit(ToolCallFailed(tool=name, code=str(error.code), attempts=attempts, key=key))
            raise error from exc
        except trio.Cancelled:
            emit(ToolCallFailed(tool=name, code=str(Code.CANCELLED), attempts=attempts, key=key))
            raise
        except ActorError as error:
            if error.tool is None:
                error.tool = name
            emit(ToolCallFailed(tool=name, code=str(error.code), attempts=attempts, key=key))
            raise

    def _check_grant(self, grants: Grants, name: str, arguments: Mapping[str, Any]) -> None:
        granted, rule = grants.rule_for(name)
        if not granted:
            raise denied(name, "no grant for this tool")
        if rule is None:
            return
        if isinstance(rule, Mapping):
            cached = self._constraints.get(id(rule))
            if cached is None or cached[0] is not rule:
                cached = (rule, compile_schema(rule, what=f"the grant of {name!r}"))
                self._constraints[id(rule)] = cached
            checker = cached[1]
            if not checker.is_valid(arguments):
                raise denied(name, "the arguments are outside the grant's constraint")
            return
        try:
            allowed = rule(arguments)
        except Exception as exc:  # a constraint that raises fails closed
            raise denied(name, "the grant's constraint raised") from exc
        if allowed is not True:
            raise denied(name, "the grant's constraint refused the arguments")

    async def _attempts(
        self,
        entry: _Entry,
        name: str,
        arguments: Mapping[str, Any],
        context: ToolContext,
        deadline: float,
        counter: list[int],
    ) -> ToolResult:
        attempt = 0
        while True:
            attempt += 1
            counter[0] = attempt
            run = attrs.evolve(context, attempt=attempt)
            try:
                reply = await entry.ref.call(
                    RunTool(name, arguments, run), timeout=None, propagate_cancel=True
                )
            except trio.Cancelled:
                raise
            except Exception as exc:
                error = _failure(exc, entry, name, attempt)
                if error.code is Code.MCP_GATEWAY and entry.fallback is not None:
                    emit(ToolFallback(tool=name, source=entry.source, code=str(error.code)))
                    entry, attempt = entry.fallback, 0
                    continue
                delay = _retry_delay(entry.retry, error, attempt, deadline)
                if delay is None:
                    raise error from exc
                emit(ToolRetried(tool=name, attempt=attempt, error=error, delay=delay, key=run.key))
                await trio.sleep(delay)
                continue
            return _result(entry, name, reply, attempt, context.key)


def _failure(exc: Exception, entry: _Entry, name: str, attempt: int) -> ActorError:
    error = classify(exc)
    if entry.source != "builtin" and error.code not in _TOOL_CODES:
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


def _retry_delay(
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


def _result(entry: _Entry, name: str, reply: Any, attempt: int, key: str) -> ToolResult:
    value, errors = (reply.payload, reply.errors) if isinstance(reply, Partial) else (reply, ())
    if entry.output is not None:
        entry.output.check(value, code=Code.OUTPUT_VALIDATION, tool=name)
    return ToolResult(name, value, errors, attempt, key)


def _entry(info: ToolInfo, ref: ActorRef, source: str, retry: Any) -> _Entry:
    return _Entry(
        info,
        ref,
        source,
        compile_schema(info.input_schema, what=f"the input schema of {info.name!r}"),
        None
        if info.output_schema is None
        else compile_schema(info.output_schema, what=f"the output schema of {info.name!r}"),
        retry,
    )


def _key(key: str | None, run_id: str | None, node_id: str | None, index: int | None) -> str:
    if key is not None:
        if not isinstance(key, str) or not key:
            raise _bad_call("key", "a non-empty string", key)
        return key
    if run_id is not None and node_id is not None and index is not None:
        return f"{run_id}/{node_id}/{index}"
    return f"call-{next(_keys)}"


def _timeout(timeout: object) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise _bad_call("timeout", "a number of seconds > 0 or None", timeout)
    if not (math.isfinite(timeout) and timeout > 0):
        raise ActorError.from_code(
            Code.INPUT_VALIDATION, "timeout must be a finite number of seconds > 0"
        )
    return float(timeout)


def _bad_call(field: str, expected: str, value: object, **context: Any) -> ActorError:
    return ActorError.from_code(
        Code.INPUT_VALIDATION,
        f"{field} must be {expected}, got {type(value).__name__}",
        retryable=False,
        **context,
    )


def _config(field: str, expected: str, value: object) -> ActorError:
    return ActorError.from_code(
        Code.CONFIG_INVALID, f"Tools {field} must be {expected}, got {type(value).__name__}"
    )


def host_id(source: Any) -> str:
    """The child id of a source's host: ``tools.<group>`` or ``mcp.<server>``."""
    if isinstance(source, ToolGroup):
        return f"tools.{source.name}"
    return f"mcp.{source.name}"


def tool_hosts(*sources: Any, restart: str = "permanent") -> list[ChildSpec]:
    """Child specs of the host actors for ``sources``: one
    :class:`~actors.tools.ToolHost` per :class:`~actors.tools.ToolGroup` (id
    ``tools.<group>``), one MCP host per MCP server config (id ``mcp.<server>``; the
    config names its actor class as ``host_actor``). Put them in a supervisor's children;
    :meth:`Tools.from_tree` finds them by these ids."""
    specs = []
    for index, source in enumerate(sources):
        if isinstance(source, ToolGroup):
            specs.append(
                ChildSpec(
                    id=host_id(source),
                    actor=ToolHost,
                    args=(source.tools,),
                    kwargs={"concurrency": source.concurrency},
                    restart=restart,  # type: ignore[arg-type]
                )
            )
        elif hasattr(source, "host_actor") and isinstance(getattr(source, "name", None), str):
            specs.append(
                ChildSpec(
                    id=host_id(source),
                    actor=source.host_actor,
                    args=(source,),
                    restart=restart,  # type: ignore[arg-type]
                )
            )
        else:
            raise _config(f"sources[{index}]", "a ToolGroup or an MCP server config", source)
    return specs
