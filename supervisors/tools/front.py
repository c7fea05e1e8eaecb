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

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import trio

from actors import ActorError, ActorRef, Code
from actors.events import ToolCallFailed, ToolFallback, ToolRetried
from actors.lowlevel import emit
from actors.providers import ToolSpec
from actors.tools import (
    NONE,
    Checker,
    Grants,
    ListTools,
    RunTool,
    ToolContext,
    ToolGroup,
    ToolResult,
    compile_schema,
    denied,
    info_of,
)
from supervisors.retry import RetryPolicy
from supervisors.tools.entry import (
    Entry,
    Workers,
    bad_call,
    config_error,
    failure_of,
    key_of,
    make_entry,
    result_of,
    retry_delay,
    timeout_of,
)
from supervisors.tools.hosts import host_ids

#: Seconds a front door gives an MCP host to list its tools.
LIST_TIMEOUT: Final = 30.0
#: Compiled grant constraints kept (grants made per call would otherwise pile up).
MAX_CONSTRAINTS: Final = 256


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
    back to a built-in tool of the same name.
    """

    def __init__(
        self,
        groups: Sequence[tuple[ToolGroup, Sequence[ActorRef] | ActorRef | None]] = (),
        *,
        mcp: Sequence[tuple[str, ActorRef]] = (),
        grants: Grants = NONE,
        fallback: bool = True,
    ) -> None:
        if not isinstance(grants, Grants):
            raise config_error("grants", "a Grants", grants)
        self.grants = grants
        self.fallback = fallback
        self._builtin: dict[str, Entry] = {}
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
        self._mcp_hosts = list(mcp)
        self._mcp: dict[str, Entry] = {}
        self._unlisted = {name for name, _ in self._mcp_hosts}
        self._constraints: dict[int, tuple[object, Checker]] = {}
        self._entries: dict[str, Entry] = {}
        self._merge()

    @classmethod
    async def from_tree(
        cls,
        tree: Any,
        *sources: Any,
        under: Sequence[str] = (),
        grants: Grants = NONE,
        fallback: bool = True,
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
                    self._mcp[info.name] = make_entry(info, Workers([ref]), server, None)
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
        return sorted(self._entries)

    def specs(self, grants: Grants | None = None) -> tuple[ToolSpec, ...]:
        """The tools ``grants`` allows, as :class:`~actors.providers.ToolSpec` values for
        ``LlmRequest.tools`` (``spec.openai()`` / ``spec.anthropic()`` render them)."""
        grants = self.grants if grants is None else grants
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
        if type(name) is not str or not name:
            raise bad_call("name", "a non-empty string", name)
        if arguments is None:
            arguments = {}
        elif type(arguments) is not dict and not isinstance(arguments, Mapping):
            raise bad_call("arguments", "a mapping (a JSON object)", arguments, tool=name)
        checked_timeout = None if timeout is None else timeout_of(timeout)
        if grants is None:
            grants = self.grants
        elif not isinstance(grants, Grants):
            raise bad_call("grants", "a Grants", grants, tool=name)
        key = key_of(key, run_id, node_id, index)
        attempts = 0
        try:
            entry = self._entries.get(name)
            if entry is None and self._unlisted:
                await self.refresh()
                entry = self._entries.get(name)
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
                if checked_timeout is None:  # no cancel scope on the common path
                    return await self._attempts(entry, name, arguments, context, deadline, counter)
                with trio.fail_at(deadline):
                    return await self._attempts(entry, name, arguments, context, deadline, counter)
            finally:
                attempts = counter[0]
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
        rules = grants.tools
        if name not in rules:
            if grants.everything:
                return
            raise denied(name, "no grant for this tool")
        rule = rules[name]
        if rule is None:
            return
        if isinstance(rule, Mapping):
            cached = self._constraints.get(id(rule))
            if cached is None or cached[0] is not rule:  # the rule is held: its id is its own
                cached = (rule, compile_schema(rule, what=f"the grant of {name!r}"))
                if len(self._constraints) >= MAX_CONSTRAINTS:
                    del self._constraints[next(iter(self._constraints))]  # the oldest
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
        entry: Entry,
        name: str,
        arguments: Mapping[str, Any],
        context: ToolContext,
        deadline: float,
        counter: list[int],
    ) -> ToolResult:
        attempt = 0
        policy = entry.retry
        if policy is not None and policy.deadline is not None:
            deadline = min(deadline, trio.current_time() + policy.deadline)
        while True:
            attempt += 1
            counter[0] = attempt
            run = context if attempt == 1 else context._replace(attempt=attempt)
            workers = entry.workers
            if workers is None:
                raise ActorError.from_code(
                    Code.INTERNAL,
                    f"tool {name!r} is declared but no host runs it",
                    retryable=False,
                    tool=name,
                )
            index = workers.pick()
            workers.busy[index] += 1
            try:
                reply = await workers.refs[index].call(
                    RunTool(name, arguments, run), timeout=None, propagate_cancel=True
                )
            except trio.Cancelled:
                raise
            except Exception as exc:  # noqa: BLE001 - classified: the attempt's failure
                failed: Exception | None = exc
            else:
                failed = None
            finally:
                workers.busy[index] -= 1
            if failed is not None:
                error = failure_of(failed, entry, name, attempt)
                if error.code is Code.MCP_GATEWAY and entry.fallback is not None:
                    emit(ToolFallback(tool=name, source=entry.source, code=str(error.code)))
                    entry, attempt = entry.fallback, 0
                    continue
                delay = retry_delay(entry.retry, error, attempt, deadline)
                if delay is None:
                    if error is failed:  # already typed: never its own cause
                        raise error
                    raise error from failed
                emit(ToolRetried(tool=name, attempt=attempt, error=error, delay=delay, key=run.key))
                await trio.sleep(delay)
                continue
            return result_of(entry, name, reply, attempt, context.key)
