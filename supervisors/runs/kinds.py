"""The work of each node kind, run on a node runner: one attempt, an outcome.

Each function takes the :class:`~supervisors.runs.context.NodeContext` and returns the
state updates (a mapping), a :class:`Pick` (a router), or raises / returns the attempt's
failure. Approval nodes have no work here: the engine waits for their decision.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from actors import ActorError, Code, Failure
from actors.providers import LlmRequest, Message
from actors.tools import Checker, for_model
from supervisors.runs.context import (
    AttemptBegan,
    NodeContext,
    ToolEnded,
    WorkStarting,
    messages_of,
)
from supervisors.runs.graph import Agent, Llm, Router, Step

#: No updates.
NOTHING: Final[Mapping[str, Any]] = MappingProxyType({})


class Pick:
    """A router's choice: the node that runs next."""

    __slots__ = ("target",)

    def __init__(self, target: str) -> None:
        self.target = target


async def run_step(ctx: NodeContext) -> Any:
    node: Step = ctx.node  # type: ignore[assignment]
    value = await node.fn(ctx)  # type: ignore[misc]
    if node.output is not None:
        return value if isinstance(value, Failure) else {node.output: value}
    if value is None:
        return NOTHING
    if isinstance(value, Mapping | Failure):
        return value
    raise ActorError.from_code(
        Code.OUTPUT_VALIDATION,
        f"step {node.id!r} returned {type(value).__name__}: return a mapping of state "
        "updates, None or fail(...), or name an output key",
        node_id=node.id,
    )


def _request(node: Llm | Agent | Router, ctx: NodeContext, **extra: Any) -> LlmRequest:
    request = getattr(node, "request", None)
    if isinstance(request, LlmRequest):
        return request
    if request is not None:
        made = request(ctx.state)
        if not isinstance(made, LlmRequest):
            raise ActorError.from_code(
                Code.NODE_CONFIG,
                f"node {node.id!r}: request: returned {type(made).__name__}, not an LlmRequest",
                node_id=node.id,
            )
        return made
    assert node.model is not None
    return LlmRequest(
        model=node.model,
        messages=messages_of(node.messages, ctx.state, node.id),
        max_tokens=node.max_tokens,
        **extra,
    )


def _pool(ctx: NodeContext) -> Any:
    assert ctx.pool is not None  # checked when the run was validated
    return ctx.pool


async def run_llm(ctx: NodeContext) -> Any:
    node: Llm = ctx.node  # type: ignore[assignment]
    checker = ctx.checker
    extra = {}
    if node.output_schema is not None:
        extra["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": node.output, "schema": dict(node.output_schema)},
        }
    response = await _pool(ctx).complete(_request(node, ctx, **extra), budget=ctx.budget)
    text = response.content
    if checker is None:
        return {node.output: text}
    return {node.output: parse_output(text, checker, node.id)}


def parse_output(text: str, checker: Checker, node_id: str) -> Any:
    """``text`` as JSON that satisfies the node's output schema: not JSON is
    ``validation`` (not retryable), JSON against the schema ``output_validation``."""
    try:
        value = json.loads(text)
    except ValueError:
        raise ActorError.from_code(
            Code.VALIDATION, f"node {node_id!r}: the model's answer is not JSON", node_id=node_id
        ) from None
    try:
        checker.check(value, code=Code.OUTPUT_VALIDATION, tool=node_id)
    except ActorError as error:
        error.tool = None
        error.node_id = node_id
        raise
    return value


async def run_agent(ctx: NodeContext) -> Any:
    node: Agent = ctx.node  # type: ignore[assignment]
    tools = ctx.tools
    assert tools is not None  # checked when the run was validated
    specs = tools.specs(node.grants)
    messages = list(messages_of(node.messages, ctx.state, node.id))
    pool = _pool(ctx)
    index = 0
    for turn in range(1, node.max_turns + 1):
        await ctx.budget.turn()
        request = LlmRequest(
            model=node.model or "",
            messages=tuple(messages),
            tools=specs,
            max_tokens=node.max_tokens,
        )
        response = await pool.complete(request, budget=ctx.budget)
        if not response.tool_calls:
            return {node.output: response.content}
        if turn == node.max_turns:
            break
        messages.append(
            Message(role="assistant", content=response.content, tool_calls=response.tool_calls)
        )
        for call in response.tool_calls:
            content = await _call_tool(ctx, node, call.name, call.arguments, index)
            index += 1
            messages.append(Message(role="tool", content=content, tool_call_id=call.id))
    raise ActorError.from_code(
        Code.TURN_LIMIT,
        f"agent {node.id!r} still called tools after {node.max_turns} turns",
        node_id=node.id,
    )


async def _call_tool(ctx: NodeContext, node: Agent, name: str, arguments: str, index: int) -> str:
    """One tool call of the model: its result, or its error in the model-facing shape
    (the model decides what to do). ``cancelled`` ends the node."""
    tools = ctx.tools
    assert tools is not None
    # The same on every attempt and on a resumed run: an idempotent tool runs once.
    key = f"{ctx.key}:{index}"
    try:
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            raise ActorError.from_code(
                Code.INPUT_VALIDATION, "the tool call's arguments are not JSON", tool=name
            ) from None
        if not isinstance(parsed, dict):
            raise ActorError.from_code(
                Code.INPUT_VALIDATION, "the tool call's arguments are not an object", tool=name
            )
        result = await tools.call(name, parsed, grants=node.grants, key=key)
    except ActorError as error:
        if error.code is Code.CANCELLED:
            raise
        await ctx.reporter.progress(ToolEnded(ctx, name, index, key, str(error.code)))
        return json.dumps(for_model(error))
    await ctx.reporter.progress(ToolEnded(ctx, name, index, key, "ok"))
    return json.dumps(result.for_model(), default=str)


async def run_router(ctx: NodeContext) -> Pick:
    node: Router = ctx.node  # type: ignore[assignment]
    if node.pick is not None:
        choice = node.pick(ctx.state)
        if isinstance(choice, Awaitable):
            choice = await choice
    else:
        response = await _pool(ctx).complete(_request(node, ctx), budget=ctx.budget)
        choice = _named(response.content)
    if type(choice) is not str or choice not in node.managed_nodes:
        raise ActorError.from_code(
            Code.SUPERVISOR_ROUTING,
            f"router {node.id!r} picked a node outside its managed nodes",
            node_id=node.id,
        )
    return Pick(choice)


def _named(text: str) -> Any:
    text = text.strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return text
        return parsed.get("next") if isinstance(parsed, dict) else text
    return text


async def run_attempt(ctx: NodeContext) -> Any:
    """One attempt on a node runner: ``node:started`` once a runner has taken it (not
    while it waits for one), then — once that record is durable, with a journal — the
    work of the node's kind. An attempt that a runner
    takes after its run began to end does nothing (nobody waits for its answer)."""
    progress = ctx.reporter.progress
    if not await progress(AttemptBegan(ctx)) or not await progress(WorkStarting(ctx)):
        return ActorError.from_code(Code.CANCELLED, "the run is ending", node_id=ctx.node_id)
    return await WORK[ctx.node.kind](ctx)


#: The work of each kind that runs on a node runner.
WORK: Mapping[str, Callable[[NodeContext], Awaitable[Any]]] = {
    "step": run_step,
    "llm": run_llm,
    "agent": run_agent,
    "router": run_router,
}
