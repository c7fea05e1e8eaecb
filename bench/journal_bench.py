"""Run journal benchmarks: append throughput with group commit, and resume time.

* ``journal_append``: 100 concurrent "runs" (trio tasks), each appending its own 100
  records one after the other with ``await journal.append(entry)`` — which returns once
  the transaction holding the entry is durable — into a SQLite journal (WAL,
  ``synchronous=FULL``) on disk (under ``bench/out``). Baseline, measured in the same run
  on a fresh file of the same layout and pragmas: raw ``sqlite3`` ``executemany``
  batches of 100 rows (``BEGIN IMMEDIATE`` … ``COMMIT``, the same ``INSERT … ON
  CONFLICT DO NOTHING``, the rows made from the entries as the batch is written) — what
  the writer would do with no trio, no queue and no waiters. Ratio = our appends/s ÷
  raw rows/s, target ``>= 0.7``: the median of the per-round ratios (each round
  measures both back to back), the garbage collector paused during each
  (``without_gc``). The note gives
  the mean batch the writer actually committed.
* ``run_resume``: the time ``runs.resume`` takes for a run of ~1,000 journalled records
  (a loop of 500 steps, then paused on an approval; its checkpoint is the last
  ``node:completed``): read, checks, decode, replay, and the run going again until its
  ``run:resumed`` record is durable. Reported (median of 5), no target.
"""

from __future__ import annotations

import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from actors.events import NodeCompleted
from actors.journal import Batch, Entry, SqliteStore, entry_of
from bench.common import Row, logs_to_null, without_gc
from supervisors import SupervisorSpec, open_tree
from supervisors.runs import (
    Approval,
    Edge,
    Journal,
    NodeContext,
    Step,
    Workflow,
    open_journal,
    open_runs,
)

RUNS = 100
PER_RUN = 100
ROUNDS = 5
OUT = Path(__file__).resolve().parent / "out"


def _entries(per_run: int = PER_RUN) -> list[list[Entry]]:
    """``RUNS`` runs of ``per_run`` records each (a node's completion, 120 bytes of
    updates)."""
    return [
        [
            entry_of(
                NodeCompleted(
                    run_id=f"bench-{run}",
                    seq=seq,
                    at=float(seq),
                    node_id="summarize",
                    execution=1,
                    attempt=1,
                    updates={"summary": "x" * 120},
                    next=("review",),
                    duration=0.25,
                )
            )
            for seq in range(per_run)
        ]
        for run in range(RUNS)
    ]


class _Counting(SqliteStore):
    """Counts the transactions and entries the writer commits."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.batches = 0
        self.written = 0

    def write(self, batch: Batch) -> None:
        super().write(batch)
        self.batches += 1
        self.written += len(batch.entries)


async def append_all(journal: Journal, entries: list[list[Entry]]) -> float:
    """Appends per second: one task per run, each appending its entries one by one."""

    async def appender(mine: list[Entry]) -> None:
        for entry in mine:
            await journal.append(entry)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for mine in entries:
            nursery.start_soon(appender, mine)
    return sum(map(len, entries)) / (time.perf_counter() - start)


async def _ours(folder: Path, entries: list[list[Entry]]) -> tuple[float, float]:
    store = _Counting(folder / f"ours-{time.monotonic_ns()}.journal")
    async with open_journal(store) as journal:
        rate = await append_all(journal, entries)
    return rate, store.written / max(store.batches, 1)


def _raw(folder: Path, entries: list[list[Entry]]) -> float:
    path = folder / f"raw-{time.monotonic_ns()}.journal"
    SqliteStore(path).close()  # the same tables
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    batches = [[mine[i] for mine in entries] for i in range(PER_RUN)]
    start = time.perf_counter()
    for batch in batches:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, seq) DO NOTHING",
            [(e.run_id, e.seq, e.name, e.at, e.body, e.checksum) for e in batch],
        )
        db.execute("COMMIT")
    elapsed = time.perf_counter() - start
    db.close()
    return RUNS * PER_RUN / elapsed


def journal_append() -> list[Row]:
    OUT.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="journal-", dir=OUT))
    entries = _entries()
    ours: list[float] = []
    raw: list[float] = []
    batch = 0.0
    try:
        with logs_to_null():
            for _ in range(ROUNDS):
                raw.append(without_gc(_raw, folder, entries))
                rate, batch = without_gc(trio.run, _ours, folder, entries)
                ours.append(rate)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ratio = statistics.median(o / r for o, r in zip(ours, raw, strict=True))
    median_ours, median_raw = statistics.median(ours), statistics.median(raw)
    print(f"  journal_append: mean batch {batch:.0f} entries per transaction (raw: {RUNS})")
    return [Row("journal_append", median_ours, "appends/s", median_raw, ratio, ">= 0.7")]


# -- resume -------------------------------------------------------------------------------

LOOPS = 500


async def _count(ctx: NodeContext) -> dict[str, Any]:
    return {"n": ctx.state.get("n", 0) + 1}


_LOOP = Workflow(
    name="loop",
    nodes=[Step(id="count", fn=_count, writes=["n"]), Approval(id="wait")],
    edges=[
        Edge(source="count", target="count", when=f"n < {LOOPS}"),
        Edge(source="count", target="wait", when=f"n >= {LOOPS}"),
    ],
)


async def _image(live: Path, image: Path) -> int:
    """A journal whose run ``long`` waits on its approval after ~1,000 records, copied
    as a crash would leave it; returns the records count."""
    async with (
        open_journal(live) as journal,
        open_tree(SupervisorSpec()) as tree,
        open_runs(tree, journal=journal) as runs,
    ):
        run = await runs.start(_LOOP, run_id="long")
        async for record in run.events():
            if record.name == "approval:requested":
                break
        await journal.flush()
        source, target = sqlite3.connect(live), sqlite3.connect(image)
        source.backup(target)
        source.close()
        target.close()
        run.cancel("bench over")
        return len(run.history)


async def _resume(path: Path) -> float:
    async with (
        open_journal(path) as journal,
        open_tree(SupervisorSpec()) as tree,
        open_runs(tree, journal=journal, workflows=[_LOOP], resume=False) as runs,
    ):
        start = time.perf_counter()
        run = await runs.resume("long")
        async for record in run.events():  # the journal's records, then the live ones
            if record.name == "run:resumed":  # delivered once durable
                break
        elapsed = time.perf_counter() - start
        run.cancel("bench over")
        return elapsed


def run_resume() -> list[Row]:
    OUT.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="resume-", dir=OUT))
    try:
        with logs_to_null():
            image = folder / "image.journal"
            records = trio.run(_image, folder / "live.journal", image)
            times = []
            for i in range(5):
                copy = folder / f"copy-{i}.journal"
                shutil.copy(image, copy)
                times.append(trio.run(_resume, copy))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    median = statistics.median(times)
    print(f"  run_resume: {records} records, checkpoint at the last node:completed")
    return [Row("run_resume", median * 1e3, "ms", 0.0, 0.0, f"report ({records} records)")]
