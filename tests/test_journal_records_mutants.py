"""`actors.journal` entries pinned on what the mutants of `actors/journal/records.py`
changed: the terminal record names and which records end a run, the exact limits of a
journalled value (items and depth, each at its boundary, every kind of leaf), the keys
JSON may carry, read-only mappings, the exact ``output_validation`` and
``event_log_corrupt`` errors (message, run, cause), the fields an entry's body holds, a
record read back strictly (no extra key), and an entry's shape."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import pytest

from actors import ActorError, Code
from actors.events import NodeCompleted, RunCancelled, RunCompleted, RunFailed, RunStarted
from actors.journal import TERMINAL, Entry, checksum, corrupt, dumps, ends_run, entry_of, record_of
from tests.test_journal_store import completed


def nested(levels: int, leaf: Any = 0) -> Any:
    value: Any = leaf
    for _ in range(levels):
        value = [value]
    return value


def sealed(run_id: str, seq: int, name: str, at: float, body: str) -> Entry:
    return Entry(run_id, seq, name, at, body, checksum(run_id, seq, name, at, body))


# -- which records end a run ------------------------------------------------------------


def test_the_terminal_names() -> None:
    assert frozenset({"run:completed", "run:failed", "run:cancelled"}) == TERMINAL


def test_a_terminal_record_ends_its_run_unless_it_is_a_resumable_cancel() -> None:
    done = RunCompleted(run_id="r", seq=3, at=1.0, state={}, duration=1.0, tokens=0, cost=0.0)
    failed = RunFailed(
        run_id="r",
        seq=3,
        at=1.0,
        code="timeout",
        message="m",
        correlation_id="c",
        node_id=None,
        duration=1.0,
        tokens=0,
        cost=0.0,
    )

    def cancelled(resumable: bool) -> RunCancelled:
        return RunCancelled(
            run_id="r",
            seq=3,
            at=1.0,
            reason="x",
            in_flight=(),
            duration=1.0,
            tokens=0,
            cost=0.0,
            resumable=resumable,
        )

    assert ends_run(done) is True
    assert ends_run(failed) is True
    assert ends_run(cancelled(False)) is True
    assert ends_run(cancelled(True)) is False
    assert ends_run(completed()) is False
    started = RunStarted(run_id="r", seq=0, at=1.0, workflow="w", inputs={}, wall_time=1.0)
    assert ends_run(started) is False


# -- what JSON carries ------------------------------------------------------------------


def test_dumps_is_compact_and_keeps_key_order() -> None:
    assert dumps({"b": [1, 2.5], "a": None, "c": True, "d": "é"}) == (
        '{"b":[1,2.5],"a":null,"c":true,"d":"\\u00e9"}'
    )
    assert dumps(MappingProxyType({"k": MappingProxyType({"j": 1})})) == '{"k":{"j":1}}'
    assert dumps([]) == "[]" and dumps("s") == '"s"' and dumps(None) == "null"


@pytest.mark.parametrize("leaf", ["s", 1, 1.5, True, None])
def test_a_leaf_of_any_kind_may_sit_at_the_deepest_level(leaf: Any) -> None:
    # 201 lists: the innermost at depth 200, its leaf at 201 (a leaf is not walked).
    assert dumps(nested(201, leaf)) == "[" * 201 + json.dumps(leaf) + "]" * 201


def test_a_value_one_level_deeper_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^nested deeper than 200 levels$"):
        dumps(nested(202))
    with pytest.raises(ValueError, match=r"^nested deeper than 200 levels$"):
        dumps(nested(201, []))  # an empty container is walked: it is no leaf
    with pytest.raises(ValueError, match=r"^nested deeper than 200 levels$"):
        dumps(nested(200, {"k": []}))


def test_the_item_limit_is_exact() -> None:
    assert dumps([0] * 1_000_000).count(",") == 999_999
    with pytest.raises(ValueError, match=r"^more than 1000000 items$"):
        dumps([0] * 1_000_001)
    # Containers count their items, summed over the whole value: 2 + 499_998 + 500_000.
    assert dumps([[0] * 499_998, [0] * 500_000]).count("0") == 999_998
    with pytest.raises(ValueError, match=r"^more than 1000000 items$"):
        dumps([[0] * 500_000, [0] * 499_999])
    assert dumps({"a": [0] * 999_999}).count("0") == 999_999  # 1 + 999_999
    with pytest.raises(ValueError, match=r"^more than 1000000 items$"):
        dumps({"a": [0] * 1_000_000})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({1: "a"}, "a key of type int is not JSON data"),
        ({True: "a"}, "a key of type bool is not JSON data"),
        ({None: "a"}, "a key of type NoneType is not JSON data"),
        ([{"ok": 1}, {2.5: "a"}], "a key of type float is not JSON data"),
        ([[{"k": {3: 0}}]], "a key of type int is not JSON data"),
        ((("t", {4: 0}),), "a key of type int is not JSON data"),
        ({"s": {"a", "b"}}, "set is not JSON data"),
        ([b"x"], "bytes is not JSON data"),
    ],
)
def test_what_json_cannot_carry_is_refused_with_its_reason(value: Any, message: str) -> None:
    with pytest.raises(TypeError, match=rf"^{message}$"):
        dumps(value)


def test_a_str_subclass_key_is_refused() -> None:
    class Name(str):
        pass

    with pytest.raises(TypeError, match=r"^a key of type Name is not JSON data$"):
        dumps({Name("a"): 1})


def test_nan_and_infinity_are_refused() -> None:
    for value in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match=r"^Out of range float values are not JSON"):
            dumps([value])


# -- entries ----------------------------------------------------------------------------


def test_an_entry_body_holds_the_record_fields_but_the_common_four() -> None:
    entry = entry_of(completed("r", 7, x=1))
    assert (entry.run_id, entry.seq, entry.name, entry.at) == ("r", 7, "node:completed", 2.0)
    body = json.loads(entry.body)
    assert list(body) == ["node_id", "execution", "attempt", "updates", "next", "duration"]
    assert entry.checksum == checksum("r", 7, "node:completed", 2.0, entry.body)
    assert entry == entry_of(completed("r", 7, x=1), checked=True)


def test_an_entry_is_a_frozen_slotted_value() -> None:
    entry = entry_of(completed())
    assert not hasattr(entry, "__dict__")
    with pytest.raises(AttributeError):
        entry.seq = 3  # type: ignore[misc]
    assert entry == sealed(entry.run_id, entry.seq, entry.name, entry.at, entry.body)
    assert hash(entry) == hash(sealed(entry.run_id, entry.seq, entry.name, entry.at, entry.body))


def test_a_value_json_cannot_carry_is_output_validation_naming_the_record() -> None:
    with pytest.raises(ActorError) as info:
        entry_of(completed("run-9", 4, x={1: "a"}))
    error = info.value
    assert error.code is Code.OUTPUT_VALIDATION
    assert error.message == (
        "run 'run-9' seq 4 (node:completed): not JSON data: a key of type int is not JSON data"
    )
    assert error.run_id == "run-9"
    assert isinstance(error.__cause__, TypeError)
    assert str(error.__cause__) == "a key of type int is not JSON data"


def test_a_checked_record_is_still_refused_when_json_cannot_carry_it() -> None:
    with pytest.raises(ActorError) as info:
        entry_of(completed("r", 5, x=float("nan")), checked=True)
    assert info.value.code is Code.OUTPUT_VALIDATION
    assert info.value.message.startswith(
        "run 'r' seq 5 (node:completed): not JSON data: "
        "Out of range float values are not JSON compliant"
    )
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(ActorError) as deep:
        entry_of(completed("r", 6, x=nested(100_000)), checked=True)
    assert deep.value.code is Code.OUTPUT_VALIDATION
    assert isinstance(deep.value.__cause__, RecursionError)
    assert deep.value.message.startswith("run 'r' seq 6 (node:completed): not JSON data: ")
    with pytest.raises(ActorError, match=r"not JSON data: object is not JSON data$"):
        entry_of(completed("r", 7, x=object()), checked=True)
    proxy = entry_of(completed("r", 8, x=MappingProxyType({"a": 1})), checked=True)
    assert json.loads(proxy.body)["updates"] == {"x": {"a": 1}}


# -- reading back -----------------------------------------------------------------------


def test_corrupt_names_the_run_and_the_seq_when_known() -> None:
    error = corrupt("r", 3, "bad")
    assert (error.code, error.message, error.run_id) == (
        Code.EVENT_LOG_CORRUPT,
        "run 'r': journal corrupt at seq 3: bad",
        "r",
    )
    assert corrupt("r", 0, "bad").message == "run 'r': journal corrupt at seq 0: bad"
    assert corrupt("s", None, "gone").message == "run 's': journal corrupt: gone"


def test_an_unknown_name_is_cut_to_64_characters() -> None:
    name = "n" * 64 + "TAIL"
    with pytest.raises(ActorError) as info:
        record_of(sealed("r", 2, name, 1.0, "{}"))
    assert info.value.message == f"run 'r': journal corrupt at seq 2: unknown record {'n' * 64!r}"
    assert info.value.run_id == "r"


@pytest.mark.parametrize(
    "body",
    [
        '{"node_id":"a","execution":1,"attempt":1,"updates":{},"next":[],"duration":0.5,"extra":1}',
        "[]",
        '"text"',
        "null",
    ],
)
def test_a_body_that_is_not_exactly_the_record_is_corrupt(body: str) -> None:
    with pytest.raises(ActorError) as info:
        record_of(sealed("r", 1, "node:completed", 2.0, body))
    assert info.value.code is Code.EVENT_LOG_CORRUPT
    assert (
        info.value.message
        == "run 'r': journal corrupt at seq 1: node:completed does not fit its record"
    )
    assert info.value.__cause__ is not None


def test_a_record_is_read_back_with_its_common_fields_from_the_entry() -> None:
    body = '{"node_id":"a","execution":1,"attempt":1,"updates":{"x":1},"next":["b"],"duration":0.5}'
    record = record_of(sealed("r", 9, "node:completed", 4.25, body))
    assert record == NodeCompleted(
        run_id="r",
        seq=9,
        at=4.25,
        node_id="a",
        execution=1,
        attempt=1,
        updates={"x": 1},
        next=("b",),
        duration=0.5,
    )


def test_a_checksum_mismatch_is_caught_before_anything_else() -> None:
    entry = Entry("r", 1, "not-a-record", 2.0, "not json", "0" * 32)
    with pytest.raises(ActorError) as info:
        record_of(entry)
    assert info.value.message == "run 'r': journal corrupt at seq 1: checksum mismatch"
