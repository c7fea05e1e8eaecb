"""A journal store in memory: for tests, and for a daemon that wants the journal's
ordering and halting without a file. Nothing survives the process.

Its calls are plain dict operations, so the journal calls them inline (``inline =
True``) rather than in a worker thread: under ``trio.testing.MockClock`` a write takes
no time and the writer's retry times are exact.
"""

from __future__ import annotations

from typing import Any, ClassVar

from actors.journal.integrity import unfinished_of
from actors.journal.records import Entry
from actors.journal.store import Batch, Checkpoint, JournalStore, RunRow, RunTail


class MemoryStore(JournalStore):
    """A :class:`~actors.journal.store.JournalStore` in memory (see the module docstring)."""

    inline: ClassVar[bool] = True

    def __init__(self) -> None:
        self.events: dict[str, dict[int, Entry]] = {}
        self.rows: dict[str, dict[str, Any]] = {}
        self.checkpoints: dict[str, Checkpoint] = {}
        #: Transactions written (a test reads it to see the group commit).
        self.writes = 0

    def write(self, batch: Batch) -> None:
        for header in batch.headers:
            self.rows.setdefault(
                header.run_id,
                {
                    "run_id": header.run_id,
                    "workflow": header.workflow,
                    "status": "running",
                    "code": None,
                    "started": header.started,
                    "ended": None,
                    "duration": None,
                    "tokens": 0,
                    "cost": 0.0,
                    "definition": header.definition,
                    "limits": header.limits,
                    "checksum": header.checksum,
                },
            )
        for entry in batch.entries:
            self.events.setdefault(entry.run_id, {}).setdefault(entry.seq, entry)
        for ending in batch.endings:
            row = self.rows.get(ending.run_id)
            if row is not None:
                row.update(
                    status=ending.status,
                    code=ending.code,
                    ended=ending.ended,
                    duration=ending.duration,
                    tokens=ending.tokens,
                    cost=ending.cost,
                )
        for point in batch.checkpoints:
            known = self.checkpoints.get(point.run_id)
            if known is None or point.seq > known.seq:
                self.checkpoints[point.run_id] = point
        self.writes += 1

    def entries(self, run_id: str, after: int = -1) -> list[Entry]:
        stored = self.events.get(run_id, {})
        return [stored[seq] for seq in sorted(stored) if seq > after]

    def checkpoint(self, run_id: str) -> Checkpoint | None:
        return self.checkpoints.get(run_id)

    def stored(self, run_id: str) -> tuple[RunRow | None, list[Entry], Checkpoint | None]:
        return self.run(run_id), self.entries(run_id), self.checkpoint(run_id)

    def runs(self) -> list[RunRow]:
        rows = sorted(self.rows.values(), key=lambda r: (r["started"], r["run_id"]))
        return [self._row(r) for r in rows]

    def run(self, run_id: str) -> RunRow | None:
        row = self.rows.get(run_id)
        return None if row is None else self._row(row)

    def tails(self) -> list[RunTail]:
        tails = []
        for run_id in [row.run_id for row in self.runs()] + sorted(
            self.events.keys() - self.rows.keys()
        ):
            row = self.rows.get(run_id)
            stored = self.events.get(run_id, {})
            last = stored[max(stored)] if stored else None
            tails.append(
                RunTail(
                    run_id,
                    None if row is None else row["status"],
                    None if last is None else last.name,
                    last if last is not None and last.name == "run:cancelled" else None,
                )
            )
        return tails

    def unfinished(self) -> list[str]:
        return unfinished_of(self.tails())

    def prune(self, ended_before: float) -> int:
        gone = [
            r["run_id"]
            for r in self.rows.values()
            if r["status"] != "running" and r["ended"] is not None and r["ended"] < ended_before
        ]
        for run_id in gone:
            self.rows.pop(run_id, None)
            self.events.pop(run_id, None)
            self.checkpoints.pop(run_id, None)
        return len(gone)

    def close(self) -> None:
        return None

    def _row(self, row: dict[str, Any]) -> RunRow:
        return RunRow(**row, events=len(self.events.get(row["run_id"], {})))
