"""Pins of supervisors.tree.backoff: its defaults, the exact schedule arithmetic, validation.

Each test fails if one default, one step of the formula or one refusal message changes
(``make mutate MODULE=supervisors/tree/backoff.py`` measures how well they do).
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from actors import ActorError, Code
from supervisors import Backoff
from supervisors.tree.backoff import IMMEDIATE

# Every field validator, once per kind of refusal. The validators are built when
# supervisors.tree.backoff is imported (in the class body), so this table is checked in a
# fresh interpreter: the module as a new process imports it, not this process's copy
# (mutmut can only see a changed validator factory that way). Keep this test first in
# the file: mutmut credits import-time calls to the first test that runs.
FRESH_CASES: list[tuple[str, str]] = [
    ("initial", "0"),  # the lower bound itself is allowed
    ("initial", "-1"),
    ("initial", "-0.5"),
    ("initial", "True"),
    ("initial", "'1'"),
    ("initial", "None"),
    ("initial", "math.nan"),
    ("initial", "math.inf"),
    ("initial", "10 ** 400"),  # too large for a float
    ("factor", "False"),
    ("step", "-1"),
    ("max", "-math.inf"),
    ("reset_after", "-0.001"),
    ("jitter", "1"),  # the upper bound itself is allowed
    ("jitter", "0"),
    ("jitter", "1.5"),
    ("jitter", "-0.1"),
    ("jitter", "'half'"),
    ("kind", "'random'"),
    ("kind", "'x' * 60"),
]
FRESH_EXPECTED = [
    "ok",
    "Backoff.initial must be a finite number >= 0, got -1",
    "Backoff.initial must be a finite number >= 0, got -0.5",
    "Backoff.initial must be a finite number >= 0, got True",
    "Backoff.initial must be a finite number >= 0, got str",
    "Backoff.initial must be a finite number >= 0, got NoneType",
    "Backoff.initial must be a finite number >= 0, got nan",
    "Backoff.initial must be a finite number >= 0, got inf",
    "Backoff.initial must be a finite number >= 0, got " + "1" + "0" * 39,
    "Backoff.factor must be a finite number >= 0, got False",
    "Backoff.step must be a finite number >= 0, got -1",
    "Backoff.max must be a finite number >= 0, got -inf",
    "Backoff.reset_after must be a finite number >= 0, got -0.001",
    "ok",
    "ok",
    "Backoff.jitter must be a finite number within [0, 1], got 1.5",
    "Backoff.jitter must be a finite number within [0, 1], got -0.1",
    "Backoff.jitter must be a finite number within [0, 1], got str",
    "Backoff.kind must be fixed, linear or exponential, got 'random'",
    "Backoff.kind must be fixed, linear or exponential, got '" + "x" * 39,
]
_FRESH_SCRIPT = """
import json, math, sys
from actors import ActorError
from supervisors import Backoff
out = []
for field, value in json.loads(sys.argv[1]):
    try:
        Backoff(**{field: eval(value)})
        out.append("ok")
    except ActorError as error:
        out.append(f"{error.code}: {error.message}")
print(json.dumps(out))
"""


def test_every_field_is_validated_in_a_fresh_interpreter() -> None:
    root = Path(__file__).resolve().parent.parent
    ran = subprocess.run(
        [sys.executable, "-c", _FRESH_SCRIPT, json.dumps(FRESH_CASES)],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == [
        e if e == "ok" else f"config_invalid: {e}" for e in FRESH_EXPECTED
    ]


def test_the_same_refusals_in_this_interpreter() -> None:
    for (field, value), expected in zip(FRESH_CASES, FRESH_EXPECTED, strict=True):
        built = eval(value, {"math": math})
        if expected == "ok":
            assert getattr(Backoff(**{field: built}), field) == built
            continue
        with pytest.raises(ActorError) as caught:
            Backoff(**{field: built})
        assert (caught.value.code, caught.value.message) == (Code.CONFIG_INVALID, expected)


def test_defaults() -> None:
    backoff = Backoff()
    assert attrs.asdict(backoff, filter=lambda a, _: a.name != "random") == {
        "kind": "exponential",
        "initial": 0.1,
        "factor": 2.0,
        "step": 0.0,
        "max": 30.0,
        "jitter": 0.0,
        "reset_after": 60.0,
    }
    assert backoff.random is random.random
    assert Backoff(random=lambda: 0.5) == backoff  # the random source is not compared


def test_default_schedule_doubles_from_a_tenth_up_to_thirty_seconds() -> None:
    assert [Backoff().delay(n) for n in range(10)] == [
        0.1,
        0.2,
        0.4,
        0.8,
        1.6,
        3.2,
        6.4,
        12.8,
        25.6,
        30.0,
    ]


def test_immediate_never_waits() -> None:
    assert (IMMEDIATE.kind, IMMEDIATE.initial, IMMEDIATE.max) == ("fixed", 0.0, 0.0)
    assert [IMMEDIATE.delay(n) for n in (0, 1, 50)] == [0.0, 0.0, 0.0]
    assert IMMEDIATE.delay(3, retry_after=2.5) == 2.5


def test_a_float_overflow_is_capped_at_max() -> None:
    assert Backoff().base(5000) == 30.0  # 0.1 * 2.0 ** 5000 overflows a float
    assert Backoff().delay(5000) == 30.0
    assert Backoff(initial=1, factor=2, max=7).delay(5000) == 7  # ints never overflow


def test_base_is_before_jitter_and_capped() -> None:
    jittery = Backoff(initial=4, factor=3, max=50, jitter=1.0, random=lambda: 0.0)
    assert [jittery.base(n) for n in range(4)] == [4, 12, 36, 50]
    assert [Backoff(kind="linear", initial=1, step=3, max=8).base(n) for n in range(4)] == [
        1,
        4,
        7,
        8,
    ]
    assert Backoff(kind="fixed", initial=50, max=30, factor=9, step=9).base(3) == 30


@pytest.mark.parametrize(
    ("u", "delay"),
    [(0.0, 5.0), (0.25, 7.5), (0.5, 10.0), (0.75, 12.5)],
)
def test_jitter_is_a_symmetric_fraction_of_the_delay(u: float, delay: float) -> None:
    backoff = Backoff(initial=10, max=30, jitter=0.5, random=lambda: u)
    assert backoff.delay(0) == delay


def test_jitter_is_clamped_to_zero_and_to_max() -> None:
    assert Backoff(initial=10, max=30, jitter=1.0, random=lambda: 0.0).delay(0) == 0.0
    assert Backoff(initial=25, max=30, jitter=1.0, random=lambda: 0.999).delay(0) == 30


def test_without_jitter_the_random_source_is_never_drawn() -> None:
    def never() -> float:
        raise AssertionError("drawn")

    assert Backoff(initial=3, max=30, random=never).delay(1) == 6


@pytest.mark.parametrize(
    ("retry_after", "delay"),
    [(None, 4), (0.0, 4), (3.9, 4), (4.1, 4.1), (120.0, 120.0)],
)
def test_retry_after_is_a_floor_even_past_max(retry_after: float | None, delay: float) -> None:
    assert Backoff(initial=1, factor=2, max=60).delay(2, retry_after=retry_after) == delay


def test_jitter_and_retry_after_together() -> None:
    backoff = Backoff(initial=8, max=30, jitter=0.5, random=lambda: 0.0)
    assert backoff.delay(0, retry_after=3) == 4.0  # jittered 8 → 4, above 3
    assert backoff.delay(0, retry_after=5) == 5


def test_validation_errors_name_the_field() -> None:
    with pytest.raises(ActorError, match=r"^\[config_invalid\] Backoff\.step must be"):
        Backoff(step=math.nan)
