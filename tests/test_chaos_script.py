"""Fault scripts: faults that fit one model, values refused when a script is built, chance
faults that fit the request."""

from __future__ import annotations

import pytest

from actors import ActorError, Code
from actors.testing.chaos import Fault, FaultScript, load_script
from actors.testing.chaos.script import FAULT_KINDS, ROUTES


def test_a_fault_for_one_model_is_passed_by_for_another_and_stays_in_its_place() -> None:
    script = FaultScript(
        faults=[
            Fault(kind="status", status=404, model="model-1"),
            Fault(kind="status", status=429),
            Fault(kind="status", status=503, model="model-1"),
        ]
    )
    taken = [
        script.next("openai", model="model-2"),  # skips the model-1 fault, takes the 429
        script.next("openai", model="model-2"),  # nothing fits model-2 any more
        script.next("openai", model="model-1"),  # the 404, still first
        script.next("anthropic", model="model-1"),  # the 503 ("*" fits any route)
        script.next("openai", model="model-1"),
    ]
    assert [f.status if f else None for f in taken] == [429, None, 404, 503, None]


def test_a_fault_for_a_model_does_not_fit_a_request_without_one() -> None:
    script = FaultScript(faults=[Fault(kind="hang", model="model-1")])
    assert script.next("openai", model=None) is None
    assert script.next("openai", model="model-1") == Fault(kind="hang", model="model-1")


def test_a_stream_only_fault_for_a_model_waits_for_a_stream_of_that_model() -> None:
    script = FaultScript(faults=[Fault(kind="cut_stream", model="model-1")])
    assert script.next("openai", stream=True, model="model-2") is None
    assert script.next("openai", stream=False, model="model-1") is None
    fault = script.next("openai", stream=True, model="model-1")
    assert fault is not None and fault.kind == "cut_stream"


def test_load_script_reads_the_model() -> None:
    script = load_script(
        '[[faults]]\nkind = "status"\nstatus = 404\nmodel = "model-1"\ntimes = 2\n'
    )
    assert script.next("openai", model="model-2") is None
    assert [script.next("openai", model="model-1") for _ in range(3)] == [
        Fault(kind="status", status=404, model="model-1", times=2)
    ] * 2 + [None]


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        ('[[faults]]\nkind = "explode"\n', "@ $.faults[0].kind"),
        ('[[faults]]\nkind = "hang"\nmodle = "m"\n', "extra fields found (modle) @ $.faults[0]"),
        ('[[faults]]\nkind = "hang"\nmodel = 3\n', "expected str, got int @ $.faults[0].model"),
        (
            '[[faults]]\nkind = "hang"\n[[faults]]\nkind = "hang"\nseconds = -1\n',
            "Fault.seconds must be a finite number of seconds >= 0, got -1.0 @ $.faults[1]",
        ),
        (
            '[[faults]]\nkind = "status"\nstatus = 101\n',
            "Fault.status must be an HTTP status from 200 to 999, got 101 @ $.faults[0]",
        ),
        (
            '[[faults]]\nkind = "html"\nstatus = 204\n',
            "Fault.status must be a status with a body, got 204 @ $.faults[0]",
        ),
        (
            '[[faults]]\nkind = "status"\nstatus = 429.5\n',
            "expected int, got float @ $.faults[0].status",
        ),
        (
            '[[faults]]\nkind = "cut_stream"\nafter = -2\n',
            "Fault.after must be an integer >= 0, got -2 @ $.faults[0]",
        ),
        (
            '[[faults]]\nkind = "status"\nheaders = { "content-length" = "3" }\n',
            "Fault.headers has content-length, which frames the answer @ $.faults[0]",
        ),
        (
            '[[faults]]\nkind = "status"\nheaders = { "retry after" = "3" }\n',
            "Fault.headers has 'retry after', which is not a header name @ $.faults[0]",
        ),
        (
            "[probabilities]\nhtml = 1.5\n",
            "FaultScript.probabilities.html must be a number from 0 to 1, got 1.5 @ $",
        ),
    ],
    ids=[
        "kind",
        "unknown-field",
        "model-type",
        "seconds",
        "status",
        "bodiless",
        "status-float",
        "after",
        "framing-header",
        "header-name",
        "probability",
    ],
)
def test_load_script_refuses_what_the_server_could_not_play(toml: str, problem: str) -> None:
    with pytest.raises(ActorError, match="invalid fault script") as caught:
        load_script(toml)
    assert caught.value.code is Code.CONFIG_INVALID
    assert problem in caught.value.message


def test_a_fault_built_in_code_is_checked_too() -> None:
    with pytest.raises(
        ActorError, match=r"Fault\.seconds must be a finite number of seconds >= 0, got inf"
    ):
        Fault(kind="latency", seconds=float("inf"))
    with pytest.raises(ActorError, match=r"Fault\.headers has X\-Y with CR, LF or NUL"):
        Fault(kind="status", headers={"X-Y": "a\r\nb"})


def test_a_chance_fault_only_of_a_kind_that_fits_the_request() -> None:
    script = FaultScript(probabilities={"cut_stream": 1.0, "slow_stream": 1.0})
    assert [script.next("openai", stream=False) for _ in range(3)] == [None] * 3
    fault = script.next("openai", stream=True)
    assert fault is not None and fault.kind == "cut_stream"  # the first in name order


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"kind": "503"},
            "Fault.kind must be one of 'status', 'html', 'malformed_json', 'latency', 'hang', "
            "'reset_before', 'reset_mid', 'cut_stream', 'stream_error', 'slow_stream', "
            "'content_filter', 'context_length', got '503'",
        ),
        (
            {"kind": "status", "route": "openia"},
            "Fault.route must be one of 'openai', 'anthropic', '*', got 'openia'",
        ),
        ({"kind": "hang", "model": ""}, "Fault.model must be a non-empty string, got ''"),
        ({"kind": "hang", "model": 3}, "Fault.model must be a non-empty string, got 3"),
        ({"kind": "status", "body": b"x"}, "Fault.body must be a string, got b'x'"),
        ({"kind": "cut_stream", "clean": "no"}, "Fault.clean must be true or false, got 'no'"),
        (
            {"kind": "latency", "seconds": float("nan")},
            "Fault.seconds must be a finite number of seconds >= 0, got nan",
        ),
        (
            {"kind": "latency", "seconds": True},
            "Fault.seconds must be a finite number of seconds >= 0, got True",
        ),
        ({"kind": "status", "times": -1}, "Fault.times must be an integer >= 0, got -1"),
        ({"kind": "status", "times": 1.0}, "Fault.times must be an integer >= 0, got 1.0"),
        ({"kind": "cut_stream", "after": None}, "Fault.after must be an integer >= 0, got None"),
        (
            {"kind": "status", "headers": [("a", "b")]},
            "Fault.headers must be a table of header names to values, got [('a', 'b')]",
        ),
        (
            {"kind": "status", "headers": {"retry-after": 3}},
            "Fault.headers has 'retry-after': 3, not two strings",
        ),
    ],
    ids=[
        "kind-typo",
        "route-typo",
        "model-empty",
        "model-int",
        "body-bytes",
        "clean-str",
        "seconds-nan",
        "seconds-bool",
        "times-negative",
        "times-float",
        "after-none",
        "headers-list",
        "header-int",
    ],
)
def test_a_fault_the_server_could_not_play_is_refused_as_it_is_built(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ActorError) as caught:
        Fault(**fields)  # type: ignore[arg-type]
    assert caught.value.code is Code.CONFIG_INVALID
    assert caught.value.message == message


def test_every_kind_and_route_is_accepted_and_the_defaults_are_pinned() -> None:
    for kind in FAULT_KINDS:
        for route in ROUTES:
            assert Fault(kind=kind, route=route).route == route  # type: ignore[arg-type]
    fault = Fault(kind="status")
    assert (fault.route, fault.model, fault.status, fault.headers, fault.body) == (
        "*",
        None,
        500,
        {},
        None,
    )
    assert (fault.seconds, fault.after, fault.clean, fault.times) == (0.0, 2, True, 1)
    assert len(FAULT_KINDS) == 12 and ROUTES == ("openai", "anthropic", "*")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"faults": [{"kind": "status"}]},
            "FaultScript.faults[0] must be a Fault, got dict",
        ),
        ({"faults": (Fault(kind="hang"),)}, "FaultScript.faults must be a list of Fault, got"),
        (
            {"probabilities": {"503": 0.5}},
            "FaultScript.probabilities has a key that must be one of 'status',",
        ),
        (
            {"probabilities": {"html": "0.5"}},
            "FaultScript.probabilities.html must be a number from 0 to 1, got '0.5'",
        ),
        (
            {"probabilities": {"html": float("nan")}},
            "FaultScript.probabilities.html must be a number from 0 to 1, got nan",
        ),
        ({"seed": -1}, "FaultScript.seed must be an integer >= 0, got -1"),
        ({"seed": "1"}, "FaultScript.seed must be an integer >= 0, got '1'"),
    ],
    ids=[
        "fault-dict",
        "faults-tuple",
        "kind-key",
        "probability-str",
        "probability-nan",
        "seed",
        "seed-str",
    ],
)
def test_a_script_the_server_could_not_play_is_refused_as_it_is_built(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ActorError) as caught:
        FaultScript(**fields)  # type: ignore[arg-type]
    assert caught.value.code is Code.CONFIG_INVALID
    assert caught.value.message.startswith(message)


def test_load_script_refuses_an_unknown_route_and_probability_kind() -> None:
    with pytest.raises(ActorError) as caught:
        load_script('[[faults]]\nkind = "status"\nroute = "openia"\n')
    assert caught.value.code is Code.CONFIG_INVALID
    assert "@ $.faults[0].route" in caught.value.message
    with pytest.raises(ActorError) as caught:
        load_script("[probabilities]\nstatuss = 0.5\n")
    assert caught.value.code is Code.CONFIG_INVALID
    assert "probabilities" in caught.value.message
