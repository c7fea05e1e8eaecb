"""Workflows from TOML: :func:`load_workflow`.

A file names its nodes' kinds, the registered functions of steps and routers, the
pools and tools of model nodes; edges may carry expression conditions::

    name = "triage"
    start = "fetch"              # optional: an id or a list; default the first node
    max_steps = 100              # optional

    [[nodes]]
    id = "fetch"
    kind = "step"
    fn = "fetch_doc"             # a name in `functions`: an async function
    writes = ["doc"]
    output = "doc"               # optional
    timeout = 5.0                # optional, seconds per attempt
    retry = { max_retries = 3, backoff = { initial = 1.0, factor = 2.0, max = 30.0 } }
    breaker = { failures = 3, cooldown = 10.0 }

    [[nodes]]
    id = "classify"
    kind = "llm"
    pool = "default"
    model = "gpt-x"
    messages = [["system", "You classify."], ["user", "Classify: {doc}"]]
    output_schema = { type = "object", required = ["label"] }

    [[nodes]]
    id = "work"
    kind = "agent"
    tools = "default"
    grants = ["lookup"]          # tool names; ["*"]: every tool; absent: none
    model = "gpt-x"
    messages = [["user", "Do: {task}"]]
    max_turns = 5

    [[nodes]]
    id = "route"
    kind = "router"
    managed_nodes = ["work", "classify"]
    pick = "choose"              # a name in `functions`, or model + messages

    [[nodes]]
    id = "ok"
    kind = "approval"
    prompt = "Ship it?"

    [[edges]]
    source = "fetch"
    target = "classify"
    when = "len(doc) > 0"        # optional: an expression (supervisors.runs.conditions)
    on = ["tool_failed"]         # optional: failure codes this edge handles ("*": any)

Errors name the node and the field, never a value of the file:

* not TOML → ``config_invalid`` with tomllib's line and column (nesting too deep for
  the parser: ``nested too deep``);
* a node without ``id`` or ``kind``, an unknown or mistyped field, a function name
  that ``functions`` lacks, a sync step function → ``node_config``
  (``nodes[1] ('classify'): max_tokens: expected int``);
* an unknown ``kind`` → ``unsupported_node_type``
  (``nodes[2] ('x'): unsupported node type 'foo'``);
* a ``when`` that does not parse → ``sandbox_error`` (``edges[0]: when: …``);
* then the workflow's own checks (:meth:`~supervisors.runs.Workflow.problems`).

The file is trusted no further than this: it names functions from ``functions`` only,
never imports anything.
"""

from __future__ import annotations

import inspect
import tomllib
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
import cattrs
from cattrs.v import format_exception

from actors import ActorError, Code
from actors.tools import ALL, NONE, Grants
from supervisors.runs.conditions import Condition
from supervisors.runs.graph import (
    Agent,
    Approval,
    Edge,
    Llm,
    Node,
    Router,
    Step,
    Workflow,
)
from supervisors.runs.node_policy import NodeBreaker, NodeRetry
from supervisors.tree.backoff import Backoff


@attrs.frozen(kw_only=True)
class _BackoffSpec:
    kind: str = "exponential"
    initial: float = 1.0
    factor: float = 2.0
    max: float = 30.0
    jitter: float = 0.0


@attrs.frozen(kw_only=True)
class _RetrySpec:
    max_retries: int = 2
    backoff: _BackoffSpec = _BackoffSpec()


@attrs.frozen(kw_only=True)
class _BreakerSpec:
    failures: int = 5
    cooldown: float = 30.0


@attrs.frozen(kw_only=True)
class _NodeSpec:
    id: str
    kind: str
    writes: list[str] | None = None
    retry: _RetrySpec | None = None
    breaker: _BreakerSpec | None = None
    timeout: float | None = None
    join: bool = False


@attrs.frozen(kw_only=True)
class _StepSpec(_NodeSpec):
    fn: str
    output: str | None = None


@attrs.frozen(kw_only=True)
class _ModelSpec(_NodeSpec):
    pool: str = "default"
    model: str | None = None
    messages: list[list[str]] = attrs.Factory(list)
    max_tokens: int = 1024


@attrs.frozen(kw_only=True)
class _LlmSpec(_ModelSpec):
    output_schema: dict[str, Any] | None = None
    output: str | None = None


@attrs.frozen(kw_only=True)
class _AgentSpec(_ModelSpec):
    tools: str = "default"
    grants: list[str] = attrs.Factory(list)
    max_turns: int = 10
    output: str | None = None


@attrs.frozen(kw_only=True)
class _RouterSpec(_ModelSpec):
    managed_nodes: list[str] = attrs.Factory(list)
    pick: str | None = None


@attrs.frozen(kw_only=True)
class _ApprovalSpec(_NodeSpec):
    prompt: str = ""


@attrs.frozen(kw_only=True)
class _EdgeSpec:
    source: str
    target: str
    when: str | None = None
    on: list[str] = attrs.Factory(list)


@attrs.frozen(kw_only=True)
class _WorkflowSpec:
    name: str
    start: Any = None
    max_steps: int = 1000
    nodes: list[dict[str, Any]] = attrs.Factory(list)
    edges: list[dict[str, Any]] = attrs.Factory(list)


#: The roles a message may have.
ROLES: Final = ("system", "user", "assistant", "tool")

_SPECS: Final[Mapping[str, type[_NodeSpec]]] = {
    "step": _StepSpec,
    "llm": _LlmSpec,
    "agent": _AgentSpec,
    "router": _RouterSpec,
    "approval": _ApprovalSpec,
}


def _strict(kind: type) -> Callable[[Any, Any], Any]:
    """A hook that accepts ``kind`` only (TOML has types: no silent ``str(3)``)."""

    def hook(value: Any, _: Any) -> Any:
        if kind is float and type(value) is int:
            return float(value)
        if type(value) is not kind:
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return hook


def _converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    for kind in (str, int, float, bool):
        converter.register_structure_hook(kind, _strict(kind))
    converter.register_structure_hook_func(lambda t: t == dict[str, Any], _strict(dict))
    return converter


def _start(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if type(value) is str:
        return (value,)
    if type(value) is list and all(type(item) is str for item in value):
        return tuple(value)
    raise ActorError.from_code(
        Code.NODE_CONFIG,
        f"workflow: start: expected a node id or a list of them, got {type(value).__name__}",
    )


_CONVERTER: Final = _converter()


def load_workflow(
    text: str, *, functions: Mapping[str, Callable[..., Any]] | None = None
) -> Workflow:
    """A :class:`~supervisors.runs.Workflow` from TOML ``text`` (see the module
    docstring); ``functions`` are what ``fn`` and ``pick`` may name."""
    if type(text) is not str:
        raise ActorError.from_code(Code.CONFIG_INVALID, "load_workflow: text must be a str")
    if functions is not None and (
        not isinstance(functions, Mapping)
        or not all(type(name) is str and callable(fn) for name, fn in functions.items())
    ):
        raise ActorError.from_code(
            Code.CONFIG_INVALID, "load_workflow: functions must map names to functions"
        )
    registry = dict(functions or {})
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ActorError.from_code(
            Code.CONFIG_INVALID, f"workflow: not valid TOML: {error}", cause=error
        ) from error
    except RecursionError as error:  # tomllib parses nested arrays and tables recursively
        raise ActorError.from_code(
            Code.CONFIG_INVALID, "workflow: not valid TOML: nested too deep", cause=error
        ) from error
    spec = _structure(raw, _WorkflowSpec, "workflow")
    nodes = [_node(index, table, registry) for index, table in enumerate(spec.nodes)]
    edges = [_edge(index, table) for index, table in enumerate(spec.edges)]
    start = _start(spec.start)
    workflow = Workflow(
        name=spec.name,
        nodes=nodes,
        edges=edges,
        start=start,
        max_steps=spec.max_steps,
    )
    problems = workflow.problems()
    if problems:
        raise problems[0]
    return workflow


def _structure(value: Any, cls: type[Any], where: str) -> Any:
    if not isinstance(value, dict):
        raise ActorError.from_code(
            Code.NODE_CONFIG, f"{where}: expected a table, got {type(value).__name__}"
        )
    try:
        return _CONVERTER.structure(value, cls)
    except Exception as error:
        raise ActorError.from_code(
            Code.NODE_CONFIG, f"{where}: {_first_problem(error)}", cause=error
        ) from error


def _first_problem(error: BaseException) -> str:
    """``field.path: what is wrong`` for the first problem cattrs found."""
    for line in cattrs.transform_error(error, path="$", format_exception=_describe):
        what, _, path = line.rpartition(" @ ")
        field = path.removeprefix("$").lstrip(".")
        return f"{field}: {what}" if field else what
    return type(error).__name__


def _describe(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return f"unknown field {sorted(exc.extra_fields)[0]!r}"
    if isinstance(exc, TypeError) and str(exc).startswith("expected"):
        return str(exc)
    if isinstance(exc, KeyError):
        return "required field missing"
    return format_exception(exc, type_)


def _node(index: int, table: Any, registry: Mapping[str, Callable[..., Any]]) -> Node:
    if not isinstance(table, dict):
        raise ActorError.from_code(Code.NODE_CONFIG, f"nodes[{index}]: expected a table")
    node_id = table.get("id")
    where = f"nodes[{index}] ({node_id!r})" if type(node_id) is str else f"nodes[{index}]"
    for required in ("id", "kind"):
        if required not in table:
            raise ActorError.from_code(
                Code.NODE_CONFIG, f"{where}: {required}: required field missing"
            )
    kind = table["kind"]
    spec_class = _SPECS.get(kind) if type(kind) is str else None
    if spec_class is None:
        shown = kind if type(kind) is str else type(kind).__name__
        raise ActorError.from_code(
            Code.UNSUPPORTED_NODE_TYPE,
            f"{where}: unsupported node type {shown!r}",
            node_id=node_id if type(node_id) is str else None,
        )
    spec = _structure(table, spec_class, where)
    try:
        return _build(spec, registry, where)
    except ActorError as error:
        if error.code is Code.NODE_CONFIG and not error.message.startswith(where):
            raise ActorError.from_code(
                Code.NODE_CONFIG, f"{where}: {error.message}", node_id=spec.id, cause=error
            ) from error
        raise


def _function(registry: Mapping[str, Callable[..., Any]], name: str, field: str, where: str) -> Any:
    if name not in registry:
        raise ActorError.from_code(
            Code.NODE_CONFIG, f"{where}: {field}: no function named {name!r}"
        )
    return registry[name]


def _build(spec: Any, registry: Mapping[str, Callable[..., Any]], where: str) -> Node:
    common: dict[str, Any] = {"id": spec.id, "join": spec.join, "timeout": spec.timeout}
    if spec.writes is not None:
        common["writes"] = tuple(spec.writes)
    if spec.retry is not None:
        backoff = Backoff(**attrs.asdict(spec.retry.backoff))
        common["retry"] = NodeRetry(max_retries=spec.retry.max_retries, backoff=backoff)
    if spec.breaker is not None:
        common["breaker"] = NodeBreaker(
            failures=spec.breaker.failures, cooldown=spec.breaker.cooldown
        )
    if isinstance(spec, _ModelSpec):
        for pair in spec.messages:
            if len(pair) != 2:
                raise ActorError.from_code(
                    Code.NODE_CONFIG, f"{where}: messages: (role, text) pairs"
                )
            if pair[0] not in ROLES:
                raise ActorError.from_code(
                    Code.NODE_CONFIG, f"{where}: messages: a role is one of {', '.join(ROLES)}"
                )
        common.update(
            pool=spec.pool, model=spec.model, messages=spec.messages, max_tokens=spec.max_tokens
        )
    if isinstance(spec, _StepSpec):
        fn = _function(registry, spec.fn, "fn", where)
        if not inspect.iscoroutinefunction(fn):
            raise ActorError.from_code(Code.NODE_CONFIG, f"{where}: fn: an async function")
        return Step(fn=fn, output=spec.output, **common)
    if isinstance(spec, _LlmSpec):
        return Llm(output_schema=spec.output_schema, **_output(spec), **common)
    if isinstance(spec, _AgentSpec):
        if "*" in spec.grants and spec.grants != ["*"]:
            raise ActorError.from_code(Code.NODE_CONFIG, f"{where}: grants: '*' stands alone")
        grants = ALL if spec.grants == ["*"] else Grants.of(spec.grants) if spec.grants else NONE
        return Agent(
            tools=spec.tools, grants=grants, max_turns=spec.max_turns, **_output(spec), **common
        )
    if isinstance(spec, _RouterSpec):
        pick = None if spec.pick is None else _function(registry, spec.pick, "pick", where)
        return Router(managed_nodes=tuple(spec.managed_nodes), pick=pick, **common)
    assert isinstance(spec, _ApprovalSpec)
    return Approval(prompt=spec.prompt, **common)


def _output(spec: Any) -> dict[str, Any]:
    return {} if spec.output is None else {"output": spec.output}


def _edge(index: int, table: Any) -> Edge:
    where = f"edges[{index}]"
    spec = _structure(table, _EdgeSpec, where)
    when: Condition | None = None
    if spec.when is not None:
        try:
            when = Condition(spec.when)
        except ActorError as error:
            raise ActorError.from_code(
                Code.SANDBOX_ERROR, f"{where}: when: {error.message}", retryable=False
            ) from error
    return Edge(source=spec.source, target=spec.target, when=when, on=tuple(spec.on))
