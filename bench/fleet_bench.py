"""Fleet benchmarks: the shared state on a real Redis, the journal on a real PostgreSQL.
Each starts its server from the binaries on 127.0.0.1 (as the tests do:
tests/redis_server.py, tests/pg_server.py).

* ``redis_limiter``: round trips per second through the Redis state backend — one
  ``RateLimiter.acquire`` (the reserve script) then one ``settle`` (the refund script)
  per request, 2 round trips, from 8 concurrent tasks — vs a raw coredis ``EVALSHA`` of
  a trivial script (``return 1``) from 8 tasks on one client, in the same run. Ratio =
  our round trips/s ÷ raw round trips/s, target ``>= 0.7``: the median of the per-round
  ratios over 15 rounds (each round measures both back to back), Redis sharing the
  machine's cores with the benchmark; the garbage collector paused during each
  measurement, as everywhere in ``bench/``. 15 rounds, as for PostgreSQL: on a 2-core
  machine one round's ratio ranges from 0.55 to 0.95 (the client, the server and the
  kernel share two cores), and the median of 9 moved by ±0.04 from run to run.
* ``pg_journal_append``: 100 concurrent runs, each leased (so every write checks the
  fencing tokens) and appending its own 100 records with ``await journal.append`` —
  which returns once the transaction holding the record is committed — into a
  PostgreSQL journal (``fsync=on``, ``synchronous_commit=on``). Baseline, same run, same
  server, a fresh database of the same tables: raw psycopg ``executemany`` batches of
  100 rows, one transaction each (the same ``INSERT … ON CONFLICT DO NOTHING``). Ratio =
  our appends/s ÷ raw rows/s, target ``>= 0.7``: the median of the ratios of 15 rounds,
  each measuring both back to back (more rounds than elsewhere: commit times on a shared
  disk vary by tens of percent from round to round, and drift weighs on both sides
  alike within a round).
"""

from __future__ import annotations

import statistics
import time
import uuid

import trio

from actors.journal import Entry, PostgresStore
from bench.common import Row, logs_to_null, without_gc
from bench.journal_bench import _entries, append_all
from supervisors import RateLimit, RateLimiter
from supervisors.runs import open_journal
from supervisors.state import open_redis_state
from supervisors.state.redis_scripts import TRIVIAL

ROUNDS = 15
#: PostgreSQL rounds: commit times on a shared disk vary by tens of percent, so more
#: rounds than elsewhere. (Longer rounds do not help: past about 10,000 rows a round
#: the server's checkpoints start to land inside the measurements.)
PG_ROUNDS = 15
TASKS = 8
REQUESTS = 500  # per task and round: 2 round trips each for ours


async def _limiter(url: str) -> float:
    limits = {"bench": RateLimit(requests_per_minute=1e12, tokens_per_minute=1e12)}
    async with open_redis_state(url, replicas=1) as state:
        limiter = RateLimiter(limits, state=state)
        permit = await limiter.acquire("bench", tokens=100)  # scripts loaded, pool warm
        await limiter.settle(permit, 50)

        async def worker() -> None:
            for _ in range(REQUESTS):
                permit = await limiter.acquire("bench", tokens=100)
                await limiter.settle(permit, 50)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(TASKS):
                nursery.start_soon(worker)
        elapsed = time.perf_counter() - start
        assert not state.degraded, "Redis failed during the benchmark"
    return 2 * TASKS * REQUESTS / elapsed


async def _evalsha(url: str) -> float:
    import coredis

    client = coredis.Redis.from_url(url, decode_responses=True)
    async with client:
        sha = await client.script_load(TRIVIAL)
        keys = ["ra:{bench}:tokens"]

        async def worker() -> None:
            for _ in range(2 * REQUESTS):
                await client.evalsha(sha, keys=keys, args=["1"])

        await client.evalsha(sha, keys=keys, args=["1"])
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(TASKS):
                nursery.start_soon(worker)
        elapsed = time.perf_counter() - start
    return 2 * TASKS * REQUESTS / elapsed


def redis_limiter() -> list[Row]:
    from tests.redis_server import redis_server

    ours: list[float] = []
    raw: list[float] = []
    with logs_to_null(), redis_server() as server:
        for _ in range(ROUNDS):
            raw.append(without_gc(trio.run, _evalsha, server.url))
            ours.append(without_gc(trio.run, _limiter, server.url))
    ratio = statistics.median(o / r for o, r in zip(ours, raw, strict=True))
    median_ours, median_raw = statistics.median(ours), statistics.median(raw)
    return [Row("redis_limiter", median_ours, "trips/s", median_raw, ratio, ">= 0.7")]


def _database(admin_dsn: str) -> str:
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return admin_dsn.replace("dbname=postgres", f"dbname={name}")


async def _journal(dsn: str, entries: list[list[Entry]]) -> float:
    store = await trio.to_thread.run_sync(PostgresStore, dsn)
    async with open_journal(store) as journal:
        for mine in entries:
            await journal.acquire(mine[0].run_id)
        return await append_all(journal, entries)


def _raw_inserts(dsn: str, entries: list[list[Entry]]) -> float:
    import psycopg

    PostgresStore(dsn).close()  # the same tables
    batches = [[mine[i] for mine in entries] for i in range(len(entries[0]))]
    with psycopg.connect(dsn, autocommit=False) as db:
        start = time.perf_counter()
        for batch in batches:
            with db.transaction(), db.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO journal_events VALUES (%s, %s, %s, %s, %s, %s)"
                    " ON CONFLICT (run_id, seq) DO NOTHING",
                    [(e.run_id, e.seq, e.name, e.at, e.body, e.checksum) for e in batch],
                )
        elapsed = time.perf_counter() - start
    return sum(map(len, entries)) / elapsed


def pg_journal_append() -> list[Row]:
    from tests.pg_server import postgres_server

    entries = _entries()
    ours: list[float] = []
    raw: list[float] = []
    with logs_to_null(), postgres_server() as admin:
        for _ in range(PG_ROUNDS):
            raw.append(without_gc(_raw_inserts, _database(admin), entries))
            ours.append(without_gc(trio.run, _journal, _database(admin), entries))
    return [_paired("pg_journal_append", "appends/s", ours, raw)]


def _paired(name: str, unit: str, ours: list[float], raw: list[float]) -> Row:
    """The median rates, and the median of the per-round ratios (rates: higher is
    better)."""
    ratio = statistics.median(o / r for o, r in zip(ours, raw, strict=True))
    return Row(name, statistics.median(ours), unit, statistics.median(raw), ratio, ">= 0.7")
