"""Bad specs are refused when they are built, in code or by load_spec (issue #9, item 17).

Every refusal is one ``config_invalid`` :class:`ActorError` whose message names each bad
field: ``invalid child spec 'w': capacity must be ...`` in code, ``must be ... @
$.children[0].capacity`` from load_spec (a dict or TOML).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import attrs
import pytest

from actors import ActorError, Code, open_runtime
from actors.mailbox import Mailbox
from supervisors import Backoff, ChildSpec, Policy, SupervisorSpec, load_spec
from tests.sup_helpers import Worker

WORKER = "tests.sup_helpers:Worker"
HUGE = 10**400  # no float holds it: trio's clock arithmetic would raise OverflowError
HUGE_SHOWN = f"an integer of {HUGE.bit_length()} bits"

CAPACITY = "must be an integer >= 1, got {}"
OVERFLOW = "must be one of 'backpressure', 'drop_oldest', got {}"
SHUTDOWN = "must be seconds >= 0 or 'brutal', got {}"
ID = "must be a non-empty string, got {}"
RESTART = "must be one of 'permanent', 'transient', 'temporary', got {}"
BOOL = "must be true or false, got {}"
MAX_RESTARTS = "must be an integer >= 0, got {}"
PERIOD = "must be a finite number of seconds > 0, got {}"
MAX_CHILDREN = "must be an integer >= 1 or None, got {}"
STRATEGY = "must be one of 'one_for_one', 'one_for_all', 'rest_for_one', got {}"
AUTO_SHUTDOWN = "must be one of 'never', 'any_significant', 'all_significant', got {}"


def _shown(value: Any) -> str:
    return HUGE_SHOWN if value is HUGE else repr(value)


# (field, bad value, problem): refused the same way in code and by load_spec.
CHILD_CASES: list[tuple[str, Any, str]] = [
    *[("capacity", v, CAPACITY) for v in (0, -1, True, 1.5, "10")],
    *[("overflow", v, OVERFLOW) for v in ("bogus", "", "BACKPRESSURE")],
    *[("shutdown", v, SHUTDOWN) for v in (-1, -0.5, math.nan, -math.inf, True, "soon", HUGE)],
    *[("id", v, ID) for v in ("", "   ", 5)],
    ("restart", "often", RESTART),
    *[("significant", v, BOOL) for v in ("yes", 1)],
]
SUPERVISOR_CASES: list[tuple[str, Any, str]] = [
    *[("max_restarts", v, MAX_RESTARTS) for v in (-1, True, 1.0, "3")],
    *[("period", v, PERIOD) for v in (0, -1, math.nan, math.inf, True, "5", HUGE)],
    *[("max_children", v, MAX_CHILDREN) for v in (0, -1, True, 1.5, "2")],
    ("strategy", "one_for_some", STRATEGY),
    ("auto_shutdown", "sometimes", AUTO_SHUTDOWN),
]

# Refused in code only (load_spec reads these from other shapes, or TOML cannot say them).
CODE_ONLY_CHILD: list[tuple[str, Any, str]] = [
    ("capacity", None, CAPACITY),
    ("id", None, ID),
    ("actor", WORKER, "must be an actor class or factory, got {}"),
    ("actor", 5, "must be an actor class or factory, got {}"),
    ("args", ["a"], "must be a tuple, got {}"),
    ("kwargs", {1: "x"}, "must be a mapping of names to values, got {}"),
    ("policy", {"by_code": {}}, "must be a Policy or None, got {}"),
    ("supervisor", "sub", "must be a SupervisorSpec or None, got {}"),
]
CODE_ONLY_SUPERVISOR: list[tuple[str, Any, str]] = [
    ("max_restarts", None, MAX_RESTARTS),
    ("period", None, PERIOD),
    ("policy", None, "must be a Policy, got {}"),
    ("backoff", "fast", "must be a Backoff, got {}"),
    ("children", 5, "must be a sequence of ChildSpec, got {}"),
]


def _child(**options: Any) -> ChildSpec:
    return ChildSpec(**{"id": "w", "actor": Worker, "args": ("w", []), **options})


def _refusal(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ActorError, match=r"^\[config_invalid\] invalid ") as caught:
        call(*args, **kwargs)
    assert caught.value.code is Code.CONFIG_INVALID
    return caught.value.message


def _ids(cases: list[tuple[str, Any, str]]) -> list[str]:
    return [f"{field}={_shown(value)}" for field, value, _ in cases]


# --- in code ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    CHILD_CASES + CODE_ONLY_CHILD,
    ids=_ids(CHILD_CASES + CODE_ONLY_CHILD),
)
def test_child_spec_refuses_a_bad_field(field: str, value: Any, problem: str) -> None:
    label = _shown(value) if field == "id" else "'w'"
    message = _refusal(_child, **{field: value})
    assert message == f"invalid child spec {label}: {field} {problem.format(_shown(value))}"


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    SUPERVISOR_CASES + CODE_ONLY_SUPERVISOR,
    ids=_ids(SUPERVISOR_CASES + CODE_ONLY_SUPERVISOR),
)
def test_supervisor_spec_refuses_a_bad_field(field: str, value: Any, problem: str) -> None:
    message = _refusal(SupervisorSpec, **{"children": [_child()], field: value})
    assert message == f"invalid supervisor spec: {field} {problem.format(_shown(value))}"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"initial": math.nan}, "initial must be a finite number >= 0, got nan"),
        ({"initial": -1}, "initial must be a finite number >= 0, got -1"),
        ({"initial": "1"}, "initial must be a finite number >= 0, got str"),
        ({"factor": True}, "factor must be a finite number >= 0, got True"),
        ({"max": math.inf}, "max must be a finite number >= 0, got inf"),
        ({"reset_after": math.inf}, "reset_after must be a finite number >= 0, got inf"),
        ({"jitter": 5}, "jitter must be a finite number within [0, 1], got 5"),
        ({"kind": "random"}, "kind must be fixed, linear or exponential, got 'random'"),
    ],
)
def test_a_backoff_with_unsound_numbers_is_refused_when_built(
    fields: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ActorError) as caught:
        Backoff(**fields)
    assert (caught.value.code, caught.value.message) == (
        Code.CONFIG_INVALID,
        f"Backoff.{problem}",
    )


def test_every_bad_field_is_named_at_once() -> None:
    message = _refusal(_child, capacity=0, overflow="bogus", shutdown=math.nan)
    assert message == (
        "invalid child spec 'w': "
        f"shutdown {SHUTDOWN.format('nan')}; "
        f"capacity {CAPACITY.format('0')}; "
        f"overflow {OVERFLOW.format(repr('bogus'))}"
    )


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (
            lambda: ChildSpec(id="w"),
            "invalid child spec 'w': give exactly one of 'actor' or 'supervisor'",
        ),
        (
            lambda: ChildSpec(id="w", actor=Worker, supervisor=SupervisorSpec()),
            "invalid child spec 'w': give exactly one of 'actor' or 'supervisor'",
        ),
        (
            lambda: _child(significant=True),
            "invalid child spec 'w': significant: a permanent child cannot be significant",
        ),
        (
            lambda: SupervisorSpec(children=[_child(), _child()]),
            "invalid supervisor spec: children: duplicate child ids ['w']",
        ),
        (
            lambda: SupervisorSpec(children=[_child(), "w2"]),
            "invalid supervisor spec: children[1] must be a ChildSpec, got 'w2'",
        ),
        (
            lambda: attrs.evolve(_child(), capacity=0),
            f"invalid child spec 'w': capacity {CAPACITY.format(0)}",
        ),
    ],
    ids=["neither", "both", "significant-permanent", "duplicates", "not-a-child", "evolve"],
)
def test_rules_across_fields(build: Any, expected: str) -> None:
    assert _refusal(build) == expected


def test_sound_values_at_the_edges_are_accepted() -> None:
    child = _child(capacity=1, shutdown=0, overflow="drop_oldest", restart="transient")
    assert (child.capacity, child.shutdown) == (1, 0)
    assert _child(shutdown=math.inf).shutdown == math.inf  # wait as long as it takes
    assert _child(shutdown="brutal", significant=True, restart="temporary").significant
    spec = SupervisorSpec(
        children=(child,), max_restarts=0, period=1e-9, max_children=1, policy=Policy()
    )
    assert spec.children == (child,)


async def test_a_mailbox_refuses_a_bad_capacity_or_overflow() -> None:
    assert _mailbox_refusal(0) == "mailbox capacity must be an integer >= 1, got 0"
    assert _mailbox_refusal(True) == "mailbox capacity must be an integer >= 1, got True"
    assert _mailbox_refusal(1, "bogus") == (
        "mailbox overflow must be one of 'backpressure', 'drop_oldest', got 'bogus'"
    )
    async with open_runtime() as runtime:
        with pytest.raises(ActorError, match=r"^\[config_invalid\] mailbox capacity") as caught:
            await runtime.spawn(lambda: Worker("w", []), capacity=0)
    assert caught.value.code is Code.CONFIG_INVALID


def _mailbox_refusal(*args: Any) -> str:
    with pytest.raises(ActorError) as caught:
        Mailbox(*args)
    assert caught.value.code is Code.CONFIG_INVALID
    return caught.value.message


# --- load_spec: a dict and the same thing in TOML -------------------------------------------


def _toml_value(value: Any) -> str | None:
    """``value`` as a TOML scalar, or ``None`` when TOML cannot say it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if -(2**63) <= value < 2**63 else None
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else {math.inf: "inf", -math.inf: "-inf"}.get(value, repr(value))
        )
    if isinstance(value, str):
        return json.dumps(value)
    return None


def _child_doc(field: str, value: Any) -> dict[str, Any]:
    return {"children": [{"id": "w", "actor": WORKER, field: value}]}


def _child_toml(field: str, text: str) -> str:
    return f'[[children]]\nid = "w"\nactor = "{WORKER}"\n{field} = {text}\n'


def _supervisor_toml(field: str, text: str) -> str:
    return f'{field} = {text}\n[[children]]\nid = "w"\nactor = "{WORKER}"\n'


def _load_cases() -> list[Any]:
    cases = []
    for field, value, problem in CHILD_CASES:
        expected = f"{problem.format(_shown(value))} @ $.children[0].{field}"
        doc = _child_doc(field, value)
        if field == "id":
            doc["children"][0] = {"id": value, "actor": WORKER}
        cases.append(pytest.param(doc, expected, id=f"dict-child-{field}={_shown(value)}"))
        text = _toml_value(value)
        if text is not None:
            toml = _child_toml(field, text).replace('id = "w"\n', "", field == "id")
            cases.append(pytest.param(toml, expected, id=f"toml-child-{field}={text}"))
    for field, value, problem in SUPERVISOR_CASES:
        expected = f"{problem.format(_shown(value))} @ $.{field}"
        doc = {field: value, "children": [{"id": "w", "actor": WORKER}]}
        cases.append(pytest.param(doc, expected, id=f"dict-{field}={_shown(value)}"))
        text = _toml_value(value)
        if text is not None:
            toml = _supervisor_toml(field, text)
            cases.append(pytest.param(toml, expected, id=f"toml-{field}={text}"))
    return cases


@pytest.mark.parametrize(("data", "expected"), _load_cases())
def test_load_spec_names_the_bad_field_by_its_path(data: Any, expected: str) -> None:
    assert _refusal(load_spec, data) == f"invalid supervisor spec: {expected}"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            _child_doc("actor", "no_colon"),
            "must be an import path 'package.module:Class', got 'no_colon' @ $.children[0].actor",
        ),
        (
            _child_doc("actor", "tests.no_such_module:Actor"),
            "cannot import 'tests.no_such_module:Actor': No module named "
            "'tests.no_such_module' @ $.children[0].actor",
        ),
        (_child_doc("args", "w"), "must be a tuple, got 'w' @ $.children[0].args"),
        (
            {"children": [{"id": "w"}]},
            "invalid child spec 'w': give exactly one of 'actor' or 'supervisor' @ $.children[0]",
        ),
        (
            {"children": [{"id": "w", "actor": WORKER}, {"id": "w", "actor": WORKER}]},
            "children: duplicate child ids ['w'] @ $",
        ),
        (
            {"backoff": {"initial": math.nan, "jitter": 2, "kind": "random"}},
            "must be one of 'fixed', 'linear', 'exponential', got 'random' @ $.backoff.kind; "
            "must be a finite number >= 0, got nan @ $.backoff.initial; "
            "must be a number from 0 to 1, got 2 @ $.backoff.jitter",
        ),
        (
            {"children": [{"id": "s", "supervisor": _child_doc("capacity", 0)}]},
            f"{CAPACITY.format(0)} @ $.children[0].supervisor.children[0].capacity",
        ),
        (
            {
                "children": [{"id": "s", "supervisor": {"children": [{"id": "x"}, {"id": "x"}]}}],
            },
            "invalid child spec 'x': give exactly one of 'actor' or 'supervisor' "
            "@ $.children[0].supervisor.children[0]; "
            "invalid child spec 'x': give exactly one of 'actor' or 'supervisor' "
            "@ $.children[0].supervisor.children[1]",
        ),
        (
            [_child_doc("capacity", 1)],
            f"expected a table, got {repr([_child_doc('capacity', 1)])[:57]}...",
        ),
        ("capacity = ", "not valid TOML: Invalid value (at end of document)"),
    ],
    ids=[
        "actor-path",
        "actor-import",
        "args",
        "neither",
        "duplicates",
        "backoff",
        "nested",
        "nested-neither",
        "not-a-table",
        "bad-toml",
    ],
)
def test_load_spec_refusals(data: Any, expected: str) -> None:
    assert _refusal(load_spec, data) == f"invalid supervisor spec: {expected}"


def test_load_spec_reports_every_bad_field_with_its_path() -> None:
    message = _refusal(
        load_spec,
        f"""
        max_restarts = -1
        period = nan

        [[children]]
        id = "w"
        actor = "{WORKER}"
        capacity = 0
        overflow = "bogus"
        shutdown = -1
        """,
    )
    assert message == (
        "invalid supervisor spec: "
        f"{SHUTDOWN.format(-1)} @ $.children[0].shutdown; "
        f"{CAPACITY.format(0)} @ $.children[0].capacity; "
        f"{OVERFLOW.format(repr('bogus'))} @ $.children[0].overflow; "
        f"{MAX_RESTARTS.format(-1)} @ $.max_restarts; "
        f"{PERIOD.format('nan')} @ $.period"
    )


GOOD_TOML = f"""
strategy = "rest_for_one"
max_restarts = 0
period = 0.5
auto_shutdown = "any_significant"
max_children = 4

[backoff]
kind = "linear"
initial = 0
step = 0.5
max = 2
jitter = 1
reset_after = 10

[policy.by_code]
tool_failed = "resume"

[[children]]
id = "w"
actor = "{WORKER}"
args = ["w", []]
kwargs = {{}}
restart = "transient"
shutdown = 0
significant = true
capacity = 1
overflow = "drop_oldest"

[[children]]
id = "inner"
shutdown = "brutal"
[children.supervisor]
strategy = "one_for_all"
[[children.supervisor.children]]
id = "x"
actor = "{WORKER}"
"""


def test_a_good_spec_loads_from_toml_and_dict_as_built_in_code() -> None:
    import tomllib

    from supervisors import Directive

    in_code = SupervisorSpec(
        strategy="rest_for_one",
        max_restarts=0,
        period=0.5,
        auto_shutdown="any_significant",
        max_children=4,
        backoff=Backoff(kind="linear", initial=0, step=0.5, max=2, jitter=1, reset_after=10),
        policy=Policy(by_code={Code.TOOL_FAILED: Directive.RESUME}),
        children=[
            ChildSpec(
                id="w",
                actor=Worker,
                args=("w", []),
                restart="transient",
                shutdown=0.0,
                significant=True,
                capacity=1,
                overflow="drop_oldest",
            ),
            ChildSpec(
                id="inner",
                shutdown="brutal",
                supervisor=SupervisorSpec(
                    strategy="one_for_all", children=[ChildSpec(id="x", actor=Worker)]
                ),
            ),
        ],
    )
    from_toml = load_spec(GOOD_TOML)
    from_dict = load_spec(tomllib.loads(GOOD_TOML))
    assert from_toml == in_code
    assert from_dict == in_code
    assert isinstance(from_toml.children, tuple)
    assert from_toml.children[0].args == ("w", [])


def test_error_messages_stay_short_for_huge_values() -> None:
    message = _refusal(_child, capacity="x" * 10_000)
    assert len(message) < 200
    assert re.search(r"capacity must be an integer >= 1, got 'x{56}\.\.\.$", message)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            {"children": [{"id": "a", "actor": "os:system", "args": ["echo pwned"]}]},
            "'os:system' is not an Actor subclass @ $.children[0].actor",
        ),
        (
            {"children": [{"id": "a", "actor": "builtins:print"}]},
            "'builtins:print' is not an Actor subclass @ $.children[0].actor",
        ),
        ({1: 2}, "keys must be strings @ $[1]"),
        ({"children": [{"id": "a", 3: 4}]}, "keys must be strings @ $.children[0][3]"),
    ],
    ids=["os-system", "print", "int-key", "nested-int-key"],
)
def test_untrusted_specs_name_only_actor_classes(data: Any, problem: str) -> None:
    """A spec from a file names Actor classes only: no other callable runs with its args."""
    with pytest.raises(ActorError) as caught:
        load_spec(data)
    assert (caught.value.code, caught.value.message) == (
        Code.CONFIG_INVALID,
        f"invalid supervisor spec: {problem}",
    )
