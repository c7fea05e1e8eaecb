"""The ledger's arithmetic and its events, pinned on a :class:`Ledger` of its own: every
total by outcome and by target, the recent entries, the price lookup, each event field."""

from __future__ import annotations

import logging
from typing import Any

from actors import Code, Usage
from actors.testing import capture_events
from supervisors import Price
from supervisors.pool import Attempt, Ledger, Totals


def entry(
    number: int,
    provider: str = "A",
    model: str = "m",
    outcome: str = "ok",
    usage: Usage | None = None,
    cost: float | None = None,
    **fields: Any,
) -> Attempt:
    return Attempt(
        request_id=fields.pop("request_id", "r"),
        number=number,
        provider=provider,
        model=model,
        outcome=outcome,  # type: ignore[arg-type]
        code=fields.pop("code", None if outcome == "ok" else Code.UNAVAILABLE),
        started_at=fields.pop("started_at", 1.0),
        latency=fields.pop("latency", 0.5),
        usage=usage,
        cost=cost,
        **fields,
    )


def sums(totals: Totals) -> tuple[int, int, int, float]:
    return (totals.attempts, totals.input_tokens, totals.output_tokens, totals.cost)


def test_an_attempts_tokens_are_its_usages_total_or_zero() -> None:
    assert entry(1, usage=Usage(input_tokens=3, output_tokens=4)).tokens == 7
    assert entry(1).tokens == 0
    assert (entry(1).usage_estimated, entry(1).hedge) == (False, False)


def test_totals_add_and_merge_field_by_field() -> None:
    totals = Totals()
    assert sums(totals) == (0, 0, 0, 0.0)
    totals.add(entry(1, usage=Usage(input_tokens=3, output_tokens=5), cost=0.25))
    totals.add(entry(2))  # no usage, no cost: counted, nothing added
    totals.add(entry(3, usage=Usage(input_tokens=7, output_tokens=11), cost=None))
    assert sums(totals) == (3, 10, 16, 0.25)
    assert totals.tokens == 26
    totals.add(entry(4, cost=0.125))  # a cost without a usage: added
    assert sums(totals) == (4, 10, 16, 0.375)
    other = Totals(attempts=2, input_tokens=100, output_tokens=1000, cost=0.5)
    totals.merge(other)
    assert sums(totals) == (6, 110, 1016, 0.875)
    assert sums(other) == (2, 100, 1000, 0.5)  # merged from, not changed


def test_totals_by_key_outcome_and_target_over_interleaved_runs() -> None:
    ledger = Ledger()
    recorded = [
        entry(1, "A", "m", "ok", Usage(input_tokens=1, output_tokens=2), 0.5),
        entry(2, "A", "m", "ok", Usage(input_tokens=10, output_tokens=20), None),
        entry(3, "B", "n", "failed", None, None),
        entry(4, "A", "m", "failed", Usage(input_tokens=100, output_tokens=0), 0.0),
        entry(5, "A", "m", "ok", Usage(input_tokens=1000, output_tokens=2000), 0.25),
        entry(6, "B", "n", "partial", Usage(input_tokens=4, output_tokens=5), 0.125),
        entry(7, "B", "n", "cancelled", None, None),
    ]
    for one in recorded:
        ledger.record(one)
    assert sums(ledger.total) == (7, 1115, 2027, 0.875)
    by_outcome = ledger.by_outcome
    assert list(by_outcome) == ["ok", "failed", "partial", "cancelled"]
    assert {k: sums(v) for k, v in by_outcome.items()} == {
        "ok": (3, 1011, 2022, 0.75),
        "failed": (2, 100, 0, 0.0),
        "partial": (1, 4, 5, 0.125),
        "cancelled": (1, 0, 0, 0.0),
    }
    by_target = ledger.by_target
    assert list(by_target) == [("A", "m"), ("B", "n")]
    assert {k: sums(v) for k, v in by_target.items()} == {
        ("A", "m"): (4, 1111, 2022, 0.75),
        ("B", "n"): (3, 4, 5, 0.125),
    }
    # Read twice, recorded more in between: the totals go on from where they were.
    ledger.record(entry(8, "A", "m", "ok", Usage(input_tokens=2, output_tokens=3), 1.0))
    assert sums(ledger.total) == (8, 1117, 2030, 1.875)
    assert sums(ledger.by_outcome["ok"]) == (4, 1013, 2025, 1.75)
    assert [e.number for e in ledger] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert list(ledger) == [*recorded, ledger.entries[-1]]


def test_a_run_without_usage_or_cost_adds_no_tokens() -> None:
    ledger = Ledger()
    for number in range(1, 4):
        ledger.record(entry(number, "A", "m", "failed"))
    assert sums(ledger.total) == (3, 0, 0, 0.0)
    assert {k: sums(v) for k, v in ledger.by_target.items()} == {("A", "m"): (3, 0, 0, 0.0)}


def test_plain_tuples_are_read_back_as_attempts() -> None:
    ledger = Ledger(keep=3)
    for number in range(1, 6):
        ledger.record(tuple(entry(number, request_id=f"r{number % 2}")))
    entries = ledger.entries
    assert entries.maxlen == 3
    assert all(type(e) is Attempt for e in entries)
    assert [(e.request_id, e.number) for e in entries] == [("r1", 3), ("r0", 4), ("r1", 5)]
    assert [e.number for e in ledger.of("r1")] == [3, 5]
    assert ledger.of("r2") == []
    assert len(ledger) == 3
    entries.append(entry(99))  # a copy: the ledger is not changed
    assert [e.number for e in ledger] == [3, 4, 5]
    assert ledger.total.attempts == 5


def test_the_default_keep_is_a_thousand_entries() -> None:
    ledger = Ledger()
    for number in range(1, 1002):
        ledger.record(entry(number, outcome="failed"))
    assert len(ledger) == 1000
    assert ledger.entries.maxlen == 1000
    assert (ledger.entries[0].number, ledger.entries[-1].number) == (2, 1001)
    assert ledger.total.attempts == 1001
    assert ledger.by_outcome["failed"].attempts == 1001


def test_a_ledger_that_keeps_nothing_still_counts() -> None:
    ledger = Ledger(keep=0)
    ledger.record(entry(1, usage=Usage(input_tokens=2, output_tokens=3), cost=0.5))
    assert len(ledger) == 0
    assert sums(ledger.total) == (1, 2, 3, 0.5)


def test_many_attempts_between_reads_are_all_counted() -> None:
    ledger = Ledger(keep=10)
    for number in range(1, 601):
        provider = "A" if number % 3 else "B"
        ledger.record(entry(number, provider, usage=Usage(input_tokens=1, output_tokens=2)))
    assert sums(ledger.total) == (600, 600, 1200, 0.0)
    assert {k: v.attempts for k, v in ledger.by_target.items()} == {
        ("A", "m"): 400,
        ("B", "m"): 200,
    }
    assert [e.number for e in ledger] == list(range(591, 601))


def test_the_cost_of_a_usage() -> None:
    usage = Usage(input_tokens=2, output_tokens=3)
    priced = Usage(input_tokens=2, output_tokens=3, cost=0.75)
    bare = Ledger()
    assert bare.prices == {}
    assert bare.cost(None, "A", "m") is None
    assert bare.cost(usage, "A", "m") is None  # no price table, nothing reported
    assert bare.cost(priced, "A", "m") == 0.75  # as reported
    prices = {
        ("A", "m"): Price(input_per_mtok=1_000_000, output_per_mtok=2_000_000),
        ("B", "*"): Price(input_per_mtok=3_000_000, output_per_mtok=0),
    }
    table = Ledger(prices=prices)
    assert table.prices == prices
    assert table.prices is not prices  # a copy
    assert table.cost(None, "A", "m") is None
    assert table.cost(usage, "A", "m") == 8.0
    assert table.cost(usage, "B", "any") == 6.0
    assert table.cost(usage, "C", "m") is None
    assert table.cost(priced, "A", "m") == 0.75  # a reported cost wins


def test_each_entry_is_one_event_with_every_field() -> None:
    ledger = Ledger()
    usage = Usage(input_tokens=3, output_tokens=4)
    with capture_events("pool.attempt", "pool.attempt_failed", "pool.attempt_cancelled") as records:
        ledger.record(entry(1, "A", "m", "ok", usage, 0.5, request_id="q", latency=1.5))
        ledger.record(
            tuple(
                entry(
                    2,
                    "B",
                    "n",
                    "partial",
                    Usage(input_tokens=5, output_tokens=6),
                    None,
                    request_id="q",
                    code=Code.NETWORK,
                    latency=2.25,
                    usage_estimated=True,
                    hedge=True,
                )
            )
        )
        ledger.record(entry(3, "C", "o", "cancelled", None, None, request_id="q", code=None))
    ok, partial, cancelled = records
    assert (ok.name, ok.level) == ("pool.attempt", logging.DEBUG)
    assert (partial.name, partial.level) == ("pool.attempt_failed", logging.INFO)
    assert (cancelled.name, cancelled.level) == ("pool.attempt_cancelled", logging.INFO)

    def facts(record: Any) -> tuple[Any, ...]:
        return (
            record.request_id,
            record.number,
            record.provider,
            record.model,
            record.outcome,
            record.code,
            record.latency,
            record.input_tokens,
            record.output_tokens,
            record.cost,
            record.usage_estimated,
            record.hedge,
        )

    assert facts(ok) == ("q", 1, "A", "m", "ok", None, 1.5, 3, 4, 0.5, False, False)
    assert facts(partial) == ("q", 2, "B", "n", "partial", "network", 2.25, 5, 6, None, True, True)
    assert facts(cancelled) == (
        "q",
        3,
        "C",
        "o",
        "cancelled",
        None,
        0.5,
        None,
        None,
        None,
        False,
        False,
    )
