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

import contextlib
import math
from collections.abc import Coroutine, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final

import trio

from actors import ActorError, ActorRef, Code
from actors.events import ToolCallFailed, ToolFallback, ToolRetried
from actors.lowlevel import emit
from actors.providers import ToolSpec
from actors.tools import (
    NONE,
    Grants,
    ListTools,
    RunTool,
    ToolContext,
    ToolGroup,
    ToolResult,
    info_of,
)
from supervisors.resilience.retry import RetryPolicy
from supervisors.tools.entry import (
    Call,
    ToolEntry,
    Workers,
    bad_call,
    config_error,
    deep_copy,
    failure_of,
    key_of,
    make_entry,
    result_of,
    retry_delay,
    snapshot,
    timeout_of,
)
from supervisors.tools.hosts import host_ids

#: Seconds a front door gives an MCP host to list its tools.
LIST_TIMEOUT: Final = 30.0


class Tools:
    """The front door (see the module docstring).

    ``groups``: the built-in :class:`~actors.tools.ToolGroup` values and the refs of
    their host workers (``(group, refs)`` pairs: :meth:`from_tree` finds the hosts
    :func:`tool_hosts` made; ``None`` or no refs: declared, but no host runs it — a call
    of its tools is ``internal``, a host/configuration gap, not the model's fault).
    ``mcp``: ``(server name, host ref)`` pairs of MCP hosts, listed on :meth:`refresh`
    (done by :meth:`from_tree`) and whenever a name is not found. ``grants``: what a
    call without ``grants=`` may use (default: nothing — pass :data:`actors.tools.ALL`
    for trusted code). ``fallback``: an MCP tool whose server cannot be reached falls
    back to a built-in tool of the same name — after the retries of ``mcp_retry`` (the
    MCP tools' retry policy; default ``None``: none).
    """

    def __init__(
        self,
        groups: Sequence[tuple[ToolGroup, Sequence[ActorRef] | ActorRef | None]] = (),
        *,
        mcp: Sequence[tuple[str, ActorRef]] = (),
        grants: Grants = NONE,
        fallback: bool = True,
        mcp_retry: RetryPolicy | None = None,
    ) -> None:
        if not isinstance(grants, Grants):
            raise config_error("grants", "a Grants", grants)
        self.grants = grants
        self.fallback = fallback
        self._builtin: dict[str, ToolEntry] = {}
        for group, refs in groups:
            if not isinstance(group, ToolGroup):
                raise config_error("groups", "(ToolGroup, refs) pairs", group)
            if isinstance(refs, ActorRef):
                refs = [refs]
            workers = Workers(refs) if refs else None
            for item in group.tools:
                if item.name in self._builtin:
                    raise ActorError.from_code(
                        Code.CONFIG_INVALID, f"two built-in tools are named {item.name!r}"
                    )
                if item.retry is not None and not isinstance(item.retry, RetryPolicy):
                    raise config_error(
                        f"tool {item.name!r} retry", "a RetryPolicy or None", item.retry
                    )
                self._builtin[item.name] = make_entry(info_of(item), workers, "builtin", item.retry)
        if mcp_retry is not None and not isinstance(mcp_retry, RetryPolicy):
            raise config_error("mcp_retry", "a RetryPolicy or None", mcp_retry)
        self.mcp_retry = mcp_retry
        self._mcp_hosts = list(mcp)
        self._mcp: dict[str, ToolEntry] = {}
        self._unlisted = {name for name, _ in self._mcp_hosts}
        self._entries: dict[str, ToolEntry] = {}
        self._merge()

    @classmethod
    async def from_tree(
        cls,
        tree: Any,
        *sources: Any,
        under: Sequence[str] = (),
        grants: Grants = NONE,
        fallback: bool = True,
        mcp_retry: RetryPolicy | None = None,
    ) -> Tools:
        """The front door over the hosts :func:`tool_hosts` made in ``tree`` (under the
        nested supervisors ``under``) for ``sources`` (:class:`~actors.tools.ToolGroup`
        and MCP server configs); the MCP servers are listed now (one that cannot be
        reached is asked again later). A group whose host is not in the tree is kept as
        declared: its calls are ``internal``."""
        groups: list[tuple[ToolGroup, Sequence[ActorRef] | ActorRef | None]] = []
        mcp: list[tuple[str, ActorRef]] = []
        for source in sources:
            refs: list[ActorRef] = []
            for child_id in host_ids(source):
                try:
                    refs.append(tree.ref(*under, child_id))
                except ActorError as error:
                    if error.code is not Code.CHILD_NOT_FOUND or not isinstance(source, ToolGroup):
                        raise
            if isinstance(source, ToolGroup):
                groups.append((source, refs))
            else:
                mcp.append((source.name, refs[0]))
        tools = cls(groups, mcp=mcp, grants=grants, fallback=fallback, mcp_retry=mcp_retry)
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
                    self._mcp[info.name] = make_entry(info, Workers([ref]), server, self.mcp_retry)
        self._merge()

    def _merge(self) -> None:
        """Every callable name's entry: an MCP tool first, falling back (when allowed) to
        the built-in tool of the same name."""
        entries = dict(self._builtin)
        for name, entry in self._mcp.items():
            builtin = self._builtin.get(name)
            if builtin is not None and self.fallback:
                entry.fallback = builtin
            entries[name] = entry
        self._entries = entries

    def names(self) -> list[str]:
        """The tools this front door serves, sorted."""
        return sorted(self._entries)

    def specs(self, grants: Grants | None = None) -> tuple[ToolSpec, ...]:
        """The tools ``grants`` allows, as :class:`~actors.providers.ToolSpec` values for
        ``LlmRequest.tools`` (``spec.openai()`` / ``spec.anthropic()`` render them)."""
        grants = self.grants if grants is None else grants
        if not isinstance(grants, Grants):
            raise bad_call("grants", "a Grants", grants)
        specs = []
        for name in self.names():
            if grants.rule_for(name)[0]:
                entry = self._entries[name]
                specs.append(
                    ToolSpec(
                        name=name,
                        description=entry.info.description,
                        parameters=entry.info.input_schema,
                    )
                )
        return tuple(specs)

    # --- the call -------------------------------------------------------------------

    def call(
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
    ) -> Coroutine[Any, Any, ToolResult]:
        """Call tool ``name``: ``await tools.call(...)`` (see the module docstring).

        The checks that need no waiting — the arguments of ``call`` itself, the name, the
        grants, the input schema — are made when ``call`` is called, and their errors
        raised there; what is awaited is the attempts. (One coroutine frame fewer on
        every call: each frame a task is suspended in costs on every switch.) A caller
        whose scope is already cancelled gets ``trio.Cancelled`` at its first attempt,
        which no host runs.
        """
        if type(name) is not str or not name:
            raise bad_call("name", "a non-empty string", name)  # no tool to name
        try:
            key = key_of(key, run_id, node_id, index)
            # What is checked is what runs: a copy, so changing the caller's dict while
            # the call waits changes nothing (and, nested, each attempt gets its own).
            if arguments is None:
                arguments = {}
            elif type(arguments) is not dict and not isinstance(arguments, Mapping):
                raise bad_call("arguments", "a mapping (a JSON object)", arguments)
            copied, nested = snapshot(arguments)
            if timeout is not None:
                timeout = timeout_of(timeout)
            if grants is None:
                grants = self.grants
            elif not isinstance(grants, Grants):
                raise bad_call("grants", "a Grants", grants)
        except ActorError as error:
            # A bad argument of the call names its tool and is reported once, as every
            # failed call is (the key as given when it is the bad one).
            error.tool = name
            shown = key if type(key) is str else ""
            emit(ToolCallFailed(tool=name, code=str(error.code), attempts=0, key=shown))
            raise
        entry = self._entries.get(name)
        if entry is None:
            call = Call(name, copied, nested, grants, timeout, key, run_id, node_id)
            if self._unlisted:
                return self._after_refresh(call)
            return self._attempts(self._checked(entry, call), call, None)
        try:
            if grants.tools or not grants.everything:  # ALL has nothing to check
                grants.check(name, copied)
            entry.input.check(copied, code=Code.INPUT_VALIDATION, tool=name)
        except ActorError as error:
            emit(ToolCallFailed(tool=name, code=str(error.code), attempts=0, key=key))
            raise
        workers = entry.workers
        if timeout is None and workers is not None:
            return self._first(entry, workers, name, copied, nested, key, run_id, node_id)
        call = Call(name, copied, nested, grants, timeout, key, run_id, node_id)
        return self._attempts(entry, call, None)

    async def _after_refresh(self, call: Call) -> ToolResult:
        """``call`` of a name not known yet while some MCP server is not listed: list it,
        then go on (a name still unknown is ``tool_not_found``)."""
        await self.refresh()
        return await self._attempts(self._checked(self._entries.get(call.name), call), call, None)

    def _checked(self, entry: ToolEntry | None, call: Call) -> ToolEntry:
        """``entry`` when ``call`` may go to it: found, granted, its arguments valid."""
        try:
            if entry is None:
                raise ActorError.from_code(
                    Code.TOOL_NOT_FOUND, f"no tool named {call.name!r}", tool=call.name
                )
            call.grants.check(call.name, call.arguments)
            entry.input.check(call.arguments, code=Code.INPUT_VALIDATION, tool=call.name)
        except ActorError as error:
            emit(ToolCallFailed(tool=call.name, code=str(error.code), attempts=0, key=call.key))
            raise
        return entry

    async def _first(
        self,
        entry: ToolEntry,
        workers: Workers,
        name: str,
        arguments: dict[str, Any],
        nested: bool,
        key: str,
        run_id: str | None,
        node_id: str | None,
    ) -> ToolResult:
        """The common call (no timeout, a host to run it): its first attempt without the
        retry loop's scaffolding; a failed one goes on in :meth:`_attempts`, told when the
        first attempt began (the retry policy's ``deadline`` counts from there, as it
        does when :meth:`_attempts` makes the first attempt itself). An attempt's copy of
        nested arguments that fails is left to :meth:`_attempts` too, which makes the same
        copy and reports its failure as for any attempt (``tool`` set, one
        ``tool.call_failed``)."""
        # When the call began, for the retry policy's deadline only (no clock read
        # on the common path, which has none).
        policy = entry.retry
        began = None if policy is None or policy.deadline is None else trio.current_time()
        if nested:
            try:
                sent = deep_copy(arguments)
            except ActorError:
                call = Call(name, arguments, nested, NONE, None, key, run_id, node_id)
                return await self._attempts(entry, call, None, began)
        else:
            sent = arguments
        try:
            reply, failed = await workers.send(
                RunTool(name, sent, ToolContext(name, key, 1, run_id, node_id))
            )
        except trio.Cancelled:
            emit(ToolCallFailed(tool=name, code=str(Code.CANCELLED), attempts=1, key=key))
            raise
        if failed is not None:
            # The grants were checked: the retries need the rest of the call.
            call = Call(name, arguments, nested, NONE, None, key, run_id, node_id)
            return await self._attempts(entry, call, failed, began)
        try:
            return result_of(entry, name, reply, 1, key)
        except ActorError as error:
            emit(ToolCallFailed(tool=name, code=str(error.code), attempts=1, key=key))
            raise

    async def _attempts(
        self,
        entry: ToolEntry,
        call: Call,
        first: Exception | None,
        began: float | None = None,
    ) -> ToolResult:
        """The attempts of ``call`` on ``entry``'s workers (see the module docstring): one
        coroutine, the retry loop inside the call's timeout scope (none without one).
        ``first``: how a first attempt made by :meth:`_first` failed; ``began``: when
        :meth:`_first` began the call (``None``: now) — the retry policy's ``deadline``
        counts from the first attempt's start, whichever method made it."""
        name, arguments, nested = call.name, call.arguments, call.nested
        context = ToolContext(name, call.key, 1, call.run_id, call.node_id)
        attempt = 0
        now = trio.current_time()
        deadline = math.inf
        scope: AbstractContextManager[Any] = _NO_SCOPE
        if call.timeout is not None:
            deadline = now + call.timeout
            scope = trio.CancelScope(deadline=deadline)
        policy = entry.retry
        if policy is not None and policy.deadline is not None:
            deadline = min(deadline, (now if began is None else began) + policy.deadline)
        try:
            with scope:
                while True:
                    attempt += 1
                    run = context if attempt == 1 else context._replace(attempt=attempt)
                    if first is not None:  # made by _first
                        failed: Exception | None = first
                        first = None
                    else:
                        sent = deep_copy(arguments) if nested else arguments
                        workers = entry.workers
                        if workers is None:
                            raise ActorError.from_code(
                                Code.INTERNAL,
                                f"tool {name!r} is declared but no host runs it",
                                retryable=False,
                                tool=name,
                            )
                        reply, failed = await workers.send(RunTool(name, sent, run))
                        if failed is None:
                            return result_of(entry, name, reply, attempt, call.key)
                    assert failed is not None  # the first attempt's, or this one's
                    error = failure_of(failed, entry, name, attempt)
                    delay = retry_delay(entry.retry, error, attempt, deadline)
                    if (
                        delay is None
                        and error.code is Code.MCP_GATEWAY
                        and entry.fallback is not None
                    ):
                        # The MCP server's retries are spent: the built-in of the same name.
                        emit(ToolFallback(tool=name, source=entry.source, code=str(error.code)))
                        entry, attempt = entry.fallback, 0
                        continue
                    if delay is None:
                        if error is failed:  # already typed: never its own cause
                            raise error
                        raise error from failed
                    emit(
                        ToolRetried(
                            tool=name, attempt=attempt, error=error, delay=delay, key=run.key
                        )
                    )
                    await trio.sleep(delay)
            # Only a timeout scope gets here: its deadline cancelled the attempts.
            raise ActorError.from_code(
                Code.TOOL_TIMEOUT,
                f"the call of {name!r} did not finish within its timeout",
                retryable=False,
                tool=name,
                attempt=attempt or None,
            )
        except trio.Cancelled:
            emit(
                ToolCallFailed(tool=name, code=str(Code.CANCELLED), attempts=attempt, key=call.key)
            )
            raise
        except ActorError as error:
            if error.tool is None:
                error.tool = name
            emit(ToolCallFailed(tool=name, code=str(error.code), attempts=attempt, key=call.key))
            raise


#: The "scope" of a call without a timeout: nothing to enter (a CancelScope costs ~1 µs).
_NO_SCOPE: Final = contextlib.nullcontext()
