"""A shared Condition evaluated many times keeps its limits per evaluation; one-step
string amplifiers (``%`` formatting, f-string format specs) are refused."""

from __future__ import annotations

import pytest

from actors import ActorError, Code
from supervisors.runs import Condition

COMPREHENSION = "len([i for i in items if i > 0]) == 100"
RUNAWAY = "max([i * j for i in [1] * 80 for j in [1] * 80]) > 0"


def test_a_comprehension_condition_answers_the_same_on_every_evaluation() -> None:
    condition = Condition(COMPREHENSION)
    state = {"items": list(range(1, 101))}
    assert [condition(state) for _ in range(250)] == [True] * 250


def test_a_runaway_stays_retryable_however_often_it_is_evaluated() -> None:
    condition = Condition(RUNAWAY, time_limit=60.0)  # the operations are what is tested
    retryable = []
    for _ in range(8):
        with pytest.raises(ActorError, match=r"time limit \(over 10000 operations\)") as info:
            condition({})
        assert info.value.code is Code.SANDBOX_ERROR
        retryable.append(info.value.retryable)
    assert retryable == [True] * 8


@pytest.mark.parametrize(
    "source",
    [
        "'%0100000000d' % 1 == ''",
        "'%s' % 1 == '1'",
        "f'{1:>100000000}' == ''",
        "f'{score:.2f}' == '0.70'",
    ],
)
def test_string_amplifiers_are_fatal_before_they_build_anything(source: str) -> None:
    with pytest.raises(
        ActorError,
        match=r"^\[sandbox_error\] condition failed: not allowed \(FeatureNotAvailable\)$",
    ) as info:
        Condition(source)({"score": 0.7})
    assert (info.value.code, info.value.retryable) == (Code.SANDBOX_ERROR, False)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("7 % 3 == 1", True),
        ("score % 1 > 0.5", True),
        ("f'{status}!' == 'ok!'", True),
        ("list(pair) == [1, 2] and tuple(pair) == (1, 2)", True),
        ("set(pair) == {2, 1} and dict(a=1) == {'a': 1}", True),
    ],
)
def test_numeric_modulo_plain_fstrings_and_the_compound_constructors_still_work(
    source: str, expected: bool
) -> None:
    state = {"score": 0.7, "status": "ok", "pair": (1, 2)}
    assert Condition(source)(state) is expected
