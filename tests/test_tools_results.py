"""What a tool call answers: full and partial results, idempotency keys, the
model-facing shape of every tool error, the tool list in the providers' formats, and a
failing tool that hurts no sibling."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, fail, open_runtime
from actors.events import ToolRetried
from actors.providers import LlmRequest, Message
from actors.testing import capture_events
from actors.tools import (
    ALL,
    Grants,
    ItemError,
    ListTools,
    Partial,
    ToolContext,
    ToolGroup,
    ToolInfo,
    ToolResult,
    for_model,
    partial,
    tool,
)
from supervisors import Tools
from tests.tools_helpers import TWO_RETRIES, hosted

CANARY = "sk-CANARY-51e0"
HOST_PATH = "/srv/secret/host/path.py"


@tool(output_schema={"type": "object", "properties": {"pages": {"type": "array"}}})
async def fetch(urls: list[str]) -> Any:
    """Fetch pages; the failing ones are listed, not blended in."""
    pages, errors = [], []
    for index, url in enumerate(urls):
        if "bad" in url:
            errors.append((str(index), Code.NETWORK, "the page could not be fetched"))
        else:
            pages.append(url.upper())
    return partial({"pages": pages}, errors)


async def test_a_partial_result_keeps_its_errors_apart(autojump_clock: MockClock) -> None:
    async with hosted(ToolGroup("web", [fetch])) as (_, tools):
        result = await tools.call("fetch", {"urls": ["a", "bad-1", "c", "bad-2", "e"]})
        full = await tools.call("fetch", {"urls": ["a"]})
    assert result.value == {"pages": ["A", "C", "E"]}
    assert result.errors == (
        ItemError("1", Code.NETWORK, "the page could not be fetched"),
        ItemError("3", Code.NETWORK, "the page could not be fetched"),
    )
    assert result.partial is True
    assert result.for_model() == {
        "result": {"pages": ["A", "C", "E"]},
        "errors": [
            {"item": "1", "code": "network", "message": "the page could not be fetched"},
            {"item": "3", "code": "network", "message": "the page could not be fetched"},
        ],
    }
    assert (full.partial, full.errors, full.for_model()) == (
        False,
        (),
        {"result": {"pages": ["A"]}},
    )


async def test_a_partial_payload_is_checked_against_the_output_schema(
    autojump_clock: MockClock,
) -> None:
    @tool(output_schema={"type": "object", "required": ["pages"]})
    async def broken() -> Any:
        return Partial({"oops": 1}, [ItemError("0", Code.NETWORK)])

    async with hosted(ToolGroup("web", [broken])) as (_, tools):
        with pytest.raises(ActorError, match=r"\] \$") as caught:
            await tools.call("broken", {})
    assert caught.value.code is Code.OUTPUT_VALIDATION


def test_partial_takes_item_errors_or_tuples_and_checks_codes() -> None:
    made = partial([1], [ItemError("a", "network", "x"), ("b", Code.TIMEOUT, "y")])
    assert made == Partial(
        [1], (ItemError("a", Code.NETWORK, "x"), ItemError("b", Code.TIMEOUT, "y"))
    )
    with pytest.raises(ValueError, match="no_such_code"):
        partial([], [("a", "no_such_code", "")])


async def test_every_call_carries_an_idempotency_key_the_tool_receives(
    autojump_clock: MockClock,
) -> None:
    seen: list[tuple[str, int]] = []

    @tool(retry=TWO_RETRIES)
    async def side_effect(context: ToolContext) -> str:
        seen.append((context.key, context.attempt))
        if context.attempt < 2:
            raise RuntimeError("flaky")
        return context.key

    async with hosted(ToolGroup("g", [side_effect])) as (_, tools):
        by_run = await tools.call("side_effect", {}, run_id="run-7", node_id="fetch", index=3)
        given = await tools.call("side_effect", {}, key="order-42")
        made = [await tools.call("side_effect", {}) for _ in range(2)]
    assert (by_run.value, by_run.key, by_run.attempt) == ("run-7/fetch/3", "run-7/fetch/3", 2)
    assert (given.value, given.attempt) == ("order-42", 2)
    assert seen[:4] == [
        ("run-7/fetch/3", 1),
        ("run-7/fetch/3", 2),
        ("order-42", 1),
        ("order-42", 2),
    ]
    assert made[0].key != made[1].key and made[0].key.startswith("call-")
    assert seen[4][0] == seen[5][0] == made[0].key  # the same key on each attempt


TOOL_CODES = [
    Code.TOOL_NOT_FOUND,
    Code.INPUT_VALIDATION,
    Code.OUTPUT_VALIDATION,
    Code.TOOL_DENIED,
    Code.TOOL_FAILED,
    Code.TOOL_TIMEOUT,
    Code.RESOURCE_BUSY,
    Code.MCP_GATEWAY,
    Code.MCP_TOOL_FAILED,
    Code.INTERNAL,
    Code.CANCELLED,
]


@pytest.mark.parametrize("code", TOOL_CODES)
def test_the_model_facing_shape_never_carries_internals(code: Code) -> None:
    cause = RuntimeError(f"token={CANARY} at {HOST_PATH} line 12")
    error = ActorError.from_code(
        code, f"$.path failed with {CANARY} in {HOST_PATH}", cause=cause, tool="fetch"
    )
    shaped = for_model(error)
    text = repr(shaped)
    assert CANARY not in text and HOST_PATH not in text and "line 12" not in text
    assert set(shaped) == {"error"}
    assert set(shaped["error"]) == {"code", "message", "retryable"}
    assert shaped["error"]["code"] == str(code)
    assert shaped["error"]["retryable"] is error.retryable
    assert "(tool: fetch)" in shaped["error"]["message"]
    if code in (Code.INPUT_VALIDATION, Code.OUTPUT_VALIDATION):
        assert shaped["error"]["message"].endswith("(at $.path)")


def test_an_unsafe_tool_name_is_left_out_of_the_model_facing_shape() -> None:
    error = ActorError.from_code(Code.TOOL_FAILED, "x", tool=f"../{CANARY}")
    assert CANARY not in repr(for_model(error))


async def test_the_model_facing_shape_of_a_real_failure(autojump_clock: MockClock) -> None:
    @tool
    async def leaky(path: str) -> str:
        raise OSError(f"cannot open {HOST_PATH} with key {CANARY}")

    async with hosted(ToolGroup("g", [leaky])) as (_, tools):
        with pytest.raises(ActorError) as caught:
            await tools.call("leaky", {"path": CANARY})
    assert for_model(caught.value) == {
        "error": {
            "code": "tool_failed",
            "message": "A tool failed while running. (tool: leaky)",
            "retryable": True,
        }
    }


async def test_the_tool_list_renders_in_both_providers_formats(autojump_clock: MockClock) -> None:
    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers.

        More text that is not the description."""
        return a + b

    async with hosted(ToolGroup("g", [add, fetch])) as (_, tools):
        assert tools.names() == ["add", "fetch"]
        specs = tools.specs()
        only_add = tools.specs(Grants.allow("add"))
    assert [spec.name for spec in only_add] == ["add"]
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    assert specs[0].openai() == {
        "type": "function",
        "function": {"name": "add", "description": "Add two integers.", "parameters": schema},
    }
    assert specs[0].anthropic() == {
        "name": "add",
        "description": "Add two integers.",
        "input_schema": schema,
    }
    request = LlmRequest(model="m", messages=[Message(role="user", content="hi")], tools=specs)
    assert [t.name for t in request.tools] == ["add", "fetch"]


async def test_a_failing_tool_hurts_no_sibling_and_no_caller(autojump_clock: MockClock) -> None:
    @tool
    async def crashes() -> str:
        raise RuntimeError("boom")

    @tool
    async def sibling() -> str:
        await trio.sleep(1)
        return "fine"

    @tool
    async def other() -> str:
        return "other"

    async with hosted(ToolGroup("a", [crashes, sibling]), ToolGroup("b", [other])) as (tree, tools):
        async with trio.open_nursery() as nursery:
            answers: list[Any] = []

            async def call(name: str) -> None:
                try:
                    answers.append((await tools.call(name, {})).value)
                except ActorError as error:
                    answers.append(error.code)

            for name in ("sibling", "crashes", "other"):
                nursery.start_soon(call, name)
        assert sorted(answers, key=str) == sorted([Code.TOOL_FAILED, "fine", "other"], key=str)
        assert [tree.ref(f"tools.a.{i}").restarts for i in range(4)] == [0, 0, 0, 0]


def test_a_tool_result_is_plain_data() -> None:
    result = ToolResult("t", 1)
    assert (result.errors, result.attempt, result.key, result.partial) == ((), 1, "", False)


class Meltdown(BaseException):
    """Not an Exception: a tool raising it takes its worker down (not just its call)."""


async def test_a_worker_a_tool_crashes_is_restarted_and_the_others_go_on(
    autojump_clock: MockClock,
) -> None:
    melted: list[int] = []

    @tool
    async def melt() -> str:
        melted.append(1)
        raise Meltdown(f"the worker goes down {CANARY} {HOST_PATH}")

    @tool
    async def calm() -> str:
        return "calm"

    group = ToolGroup("g", [melt, calm], concurrency=2)
    async with hosted(group) as (tree, tools):
        with pytest.raises(
            ActorError, match=r"tool .melt. crashed its worker \(Meltdown\)$"
        ) as caught:
            await tools.call("melt", {})
        assert CANARY not in str(caught.value) and HOST_PATH not in str(caught.value)
        assert (caught.value.code, caught.value.tool, caught.value.attempt) == (
            Code.INTERNAL,
            "melt",
            1,
        )
        with trio.fail_after(5):
            while tree.ref("tools.g.0").restarts == 0:
                await trio.sleep(0.01)
        assert [tree.ref(f"tools.g.{i}").restarts for i in range(2)] == [1, 0]
        assert (await tools.call("calm", {})).value == "calm"
        assert (await tools.call("calm", {})).value == "calm"
    assert melted == [1]


# --- what an MCP host's answers and listing become (pins of the mutation runs) ----------


class ScriptedMcp(Actor):
    """An MCP host whose listing and answers a test sets (class attributes)."""

    input_schema: dict[str, Any] = {"type": "object"}
    output_schema: dict[str, Any] | None = None
    answer: Code = Code.NETWORK

    async def handle(self, message: Any) -> Any:
        if isinstance(message, ListTools):
            info = ToolInfo(
                "echo", "remote", ScriptedMcp.input_schema, ScriptedMcp.output_schema, "remote"
            )
            return (info,)
        return fail(ScriptedMcp.answer, "the server said no", retryable=True)


async def scripted_call(answer: Code, **options: Any) -> tuple[ActorError, list[ToolRetried]]:
    ScriptedMcp.answer = answer
    async with open_runtime() as runtime:
        remote = await runtime.spawn(ScriptedMcp)
        tools = Tools(mcp=[("remote", remote)], grants=ALL, **options)
        await tools.refresh()
        with (
            capture_events(ToolRetried) as retries,
            pytest.raises(ActorError) as caught,
        ):
            await tools.call("echo", {})
    return caught.value, retries


async def test_an_mcp_host_failing_with_no_tool_code_is_mcp_gateway(
    autojump_clock: MockClock,
) -> None:
    error, retries = await scripted_call(Code.NETWORK, mcp_retry=TWO_RETRIES)
    assert (error.code, error.message, error.retryable, error.tool, error.attempt) == (
        Code.MCP_GATEWAY,
        "the MCP server 'remote' could not be reached",
        True,
        "echo",
        3,
    )
    assert isinstance(error.__cause__, ActorError)
    assert (error.__cause__.code, error.__cause__.message) == (Code.NETWORK, "the server said no")
    # Each retried attempt's error is the gateway error too, its cause the host's answer.
    assert [(e.attempt, e.error.code, e.error.tool, e.error.attempt) for e in retries] == [
        (1, Code.MCP_GATEWAY, "echo", 1),
        (2, Code.MCP_GATEWAY, "echo", 2),
    ]
    assert [getattr(e.error.__cause__, "code", None) for e in retries] == [
        Code.NETWORK,
        Code.NETWORK,
    ]
    assert trio.current_time() == 3.0


@pytest.mark.parametrize("code", [Code.MCP_TOOL_FAILED, Code.TOOL_TIMEOUT, Code.RESOURCE_BUSY])
async def test_an_mcp_hosts_tool_code_is_kept_and_named_after_the_tool(
    autojump_clock: MockClock, code: Code
) -> None:
    error, retries = await scripted_call(code, mcp_retry=TWO_RETRIES)
    assert (error.code, error.message, error.tool, error.attempt) == (
        code,
        "the server said no",
        "echo",
        3,
    )
    assert [(e.error.code, e.error.tool, e.error.attempt) for e in retries] == [
        (code, "echo", 1),
        (code, "echo", 2),
    ]


@pytest.mark.parametrize(
    ("schemas", "which"),
    [
        ({"input_schema": {"type": "no-such-type"}}, "input"),
        ({"output_schema": {"type": "no-such-type"}}, "output"),
    ],
)
async def test_an_mcp_tool_with_a_bad_schema_is_config_invalid_naming_it(
    autojump_clock: MockClock, schemas: dict[str, Any], which: str
) -> None:
    ScriptedMcp.input_schema, ScriptedMcp.output_schema = {"type": "object"}, None
    for name, schema in schemas.items():
        setattr(ScriptedMcp, name, schema)
    try:
        async with open_runtime() as runtime:
            remote = await runtime.spawn(ScriptedMcp)
            tools = Tools(mcp=[("remote", remote)], grants=ALL)
            with pytest.raises(ActorError) as caught:
                await tools.refresh()
    finally:
        ScriptedMcp.input_schema, ScriptedMcp.output_schema = {"type": "object"}, None
    assert caught.value.code is Code.CONFIG_INVALID
    assert caught.value.message.startswith(
        f"the {which} schema of 'echo': invalid JSON Schema at $.type"
    )
