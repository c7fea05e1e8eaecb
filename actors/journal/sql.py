"""The SQL a batch is written with, shared by the SQL stores (SQLite, PostgreSQL): the
statements and their rows, with the store's placeholder and table names."""

from __future__ import annotations

from typing import Any

from actors.journal.store import Batch


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
                f"INSERT INTO {runs} (run_id, workflow, definition, limits, started)"
                f" VALUES ({marks(5)}) ON CONFLICT (run_id) DO NOTHING",
                [(h.run_id, h.workflow, h.definition, h.limits, h.started) for h in batch.headers],
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
