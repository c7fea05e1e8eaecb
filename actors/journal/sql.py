"""SQL of the journal's SQL stores: the statements a batch is written with and their
rows (SQLite's; PostgreSQL writes a batch in one statement of its own,
:mod:`actors.journal.postgres_write`, so that a paused replica holds no lock), and the
listing of runs both stores use (:func:`tails_query`)."""

from __future__ import annotations

from typing import Any

from actors.journal.records import Entry
from actors.journal.store import Batch, RunTail


def write_statements(
    batch: Batch, mark: str, tables: tuple[str, str, str]
) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """``(sql, rows)`` pairs that make ``batch`` durable in one transaction, in order:
    headers (a run already there is kept), entries (a ``(run_id, seq)`` already there is
    kept), endings, checkpoints (only a later one replaces the stored one). ``mark`` is
    the driver's placeholder (``?``, ``%s``); ``tables`` the runs, events and checkpoints
    tables."""
    runs, events, checkpoints = tables

    def marks(count: int) -> str:
        return ", ".join([mark] * count)

    statements: list[tuple[str, list[tuple[Any, ...]]]] = []
    if batch.headers:
        statements.append(
            (
                f"INSERT INTO {runs} (run_id, workflow, definition, limits, started, checksum)"
                f" VALUES ({marks(6)}) ON CONFLICT (run_id) DO NOTHING",
                [
                    (h.run_id, h.workflow, h.definition, h.limits, h.started, h.checksum)
                    for h in batch.headers
                ],
            )
        )
    if batch.entries:
        statements.append(
            (
                f"INSERT INTO {events} VALUES ({marks(6)}) ON CONFLICT (run_id, seq) DO NOTHING",
                [(e.run_id, e.seq, e.name, e.at, e.body, e.checksum) for e in batch.entries],
            )
        )
    if batch.endings:
        statements.append(
            (
                f"UPDATE {runs} SET status = {mark}, code = {mark}, ended = {mark},"
                f" duration = {mark}, tokens = {mark}, cost = {mark} WHERE run_id = {mark}",
                [
                    (e.status, e.code, e.ended, e.duration, e.tokens, e.cost, e.run_id)
                    for e in batch.endings
                ],
            )
        )
    if batch.checkpoints:
        statements.append(
            (
                f"INSERT INTO {checkpoints} VALUES ({marks(4)}) ON CONFLICT (run_id) DO UPDATE"
                " SET seq = excluded.seq, progress = excluded.progress,"
                f" checksum = excluded.checksum WHERE excluded.seq > {checkpoints}.seq",
                [(c.run_id, c.seq, c.progress, c.checksum) for c in batch.checkpoints],
            )
        )
    return statements


def tails_query(runs: str, events: str) -> str:
    """The query behind :meth:`~actors.journal.store.JournalStore.tails`: every run id of
    either table, its row's status, its last record's name and — for a
    ``run:cancelled`` — that record in full; oldest first, runs without a row last."""
    last = "CASE WHEN e.name = 'run:cancelled' THEN e.{} END"
    return (
        f"WITH last AS (SELECT run_id, MAX(seq) AS seq FROM {events} GROUP BY run_id),"
        f" ids AS (SELECT run_id FROM {runs} UNION SELECT run_id FROM last)"
        f" SELECT ids.run_id, r.status, e.name, {last.format('seq')}, {last.format('at')},"
        f" {last.format('body')}, {last.format('checksum')}"
        f" FROM ids LEFT JOIN {runs} r ON r.run_id = ids.run_id"
        " LEFT JOIN last l ON l.run_id = ids.run_id"
        f" LEFT JOIN {events} e ON e.run_id = l.run_id AND e.seq = l.seq"
        " ORDER BY r.started IS NULL, r.started, ids.run_id"
    )


def tail_of(row: Any) -> RunTail:
    """One row of :func:`tails_query` as a :class:`~actors.journal.store.RunTail`."""
    run_id, status, name, seq, at, body, checksum = row
    cancel = None if seq is None else Entry(run_id, seq, name, at, body, checksum)
    return RunTail(run_id, status, name, cancel)
