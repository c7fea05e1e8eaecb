"""Helpers for the journal tests: a store that fails on demand, a crash copy of a store,
and runs over a journal under a real tree."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from actors.journal import Batch, MemoryStore
from supervisors import SupervisorSpec, Tree, open_tree
from supervisors.runs import Journal, Runs, open_journal, open_runs


class FlakyStore(MemoryStore):
    """A memory store whose next ``fail`` writes raise ``OSError`` (``fail = -1``: all)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = 0
        self.failed = 0

    def write(self, batch: Batch) -> None:
        if self.fail:
            if self.fail > 0:
                self.fail -= 1
            self.failed += 1
            raise OSError("disk full")
        super().write(batch)


def crashed(store: MemoryStore) -> MemoryStore:
    """What a process killed now would leave: a copy of what is durable."""
    copied = MemoryStore()
    copied.events = copy.deepcopy(store.events)
    copied.rows = copy.deepcopy(store.rows)
    copied.checkpoints = dict(store.checkpoints)
    return copied


def cut(store: MemoryStore, run_id: str, last: int) -> MemoryStore:
    """A crash right after ``run_id``'s record ``last`` was durable (its later records,
    its ending and any checkpoint past it dropped)."""
    copied = crashed(store)
    copied.events[run_id] = {s: e for s, e in copied.events[run_id].items() if s <= last}
    copied.rows[run_id].update(status="running", code=None, ended=None, duration=None)
    point = copied.checkpoints.get(run_id)
    if point is not None and point.seq > last:
        del copied.checkpoints[run_id]
    return copied


@asynccontextmanager
async def journalled(
    store: Any = None, **options: Any
) -> AsyncIterator[tuple[Tree, Runs, Journal]]:
    """A tree with runs over a journal on ``store`` (a new :class:`MemoryStore` by
    default); ``options`` go to :func:`open_runs`."""
    async with (
        open_journal(store if store is not None else MemoryStore()) as journal,
        open_tree(SupervisorSpec(), name="journal-test") as tree,
        open_runs(tree, journal=journal, **options) as runs,
    ):
        yield tree, runs, journal


def copy_file(live: Any, image: Any) -> None:
    """Copy a SQLite journal as it is on disk now (what a crash would leave)."""
    import sqlite3

    source, target = sqlite3.connect(live), sqlite3.connect(image)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
