"""Four daemon processes share one real redis-server (tests/fleet_worker.py): a bucket
raced by all admits exactly its limit, a breaker opened by one replica refuses on every
other, half-open admits one probe across the fleet; Redis killed → each replica admits
at most limit/N, Redis back → shared again."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from actors import ActorError, Code
from supervisors import Breaker, BreakerConfig
from supervisors.state import open_redis_state
from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent
REPLICAS = 4
TASKS = 8
pytestmark = pytest.mark.timeout(120)


class Fleet:
    def __init__(self, url: str) -> None:
        self.workers = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.fleet_worker", url, str(REPLICAS)],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(REPLICAS)
        ]
        try:
            assert self.answers() == ["ready"] * REPLICAS
        except BaseException:
            for worker in self.workers:  # a fleet that did not start leaves no process
                worker.kill()
                worker.wait()
                worker.stdout.close()  # type: ignore[union-attr]
                worker.stdin.close()  # type: ignore[union-attr]
            raise

    def answers(self) -> list[Any]:
        return [json.loads(worker.stdout.readline()) for worker in self.workers]  # type: ignore[union-attr]

    def send(self, command: str) -> None:
        for worker in self.workers:
            worker.stdin.write(command + "\n")  # type: ignore[union-attr]
            worker.stdin.flush()  # type: ignore[union-attr]

    def one(self, index: int, command: str) -> Any:
        """Send ``command`` to replica ``index`` alone; its answer."""
        worker = self.workers[index]
        worker.stdin.write(command + "\n")  # type: ignore[union-attr]
        worker.stdin.flush()  # type: ignore[union-attr]
        return json.loads(worker.stdout.readline())  # type: ignore[union-attr]

    def all(self, command: str) -> list[Any]:
        """Send ``command`` to every replica; their answers, in replica order."""
        self.send(command)
        return self.answers()

    def together(self, command: str, redis: RedisServer) -> tuple[list[Any], float]:
        """``command`` started by every replica at the same moment — each counts itself
        waiting, then waits for a key the test sets once all are — and the seconds from
        then to the last answer (a bucket refills meanwhile)."""
        redis.command("DEL", "go", "waiting")
        self.send(f"await go {command}")
        deadline = time.monotonic() + 60
        while (
            redis.command("GET", "waiting") != f"${len(str(REPLICAS))}\r\n{REPLICAS}\r\n".encode()
        ):
            assert time.monotonic() < deadline, "the replicas never all waited"
            time.sleep(0.005)
        started = time.monotonic()
        redis.command("SET", "go", "1")
        answers = self.answers()
        return answers, time.monotonic() - started

    def close(self) -> None:
        for worker in self.workers:
            try:
                worker.stdin.write("quit\n")  # type: ignore[union-attr]
                worker.stdin.close()  # type: ignore[union-attr]
            except OSError:  # BrokenPipeError: the worker is gone; make sure of it
                worker.kill()
        for worker in self.workers:
            try:
                assert worker.wait(timeout=10) == 0
            finally:
                worker.kill()
                worker.stdout.close()  # type: ignore[union-attr]


def _refilled(per_minute: int, seconds: float, cost: int) -> int:
    """Tokens of whole requests of ``cost`` that a bucket of ``per_minute`` refills in
    ``seconds``."""
    return cost * int(per_minute / 60 * seconds / cost)


@pytest.fixture
def fleet(redis: RedisServer) -> Iterator[Fleet]:
    running = Fleet(redis.url)
    try:
        yield running
    finally:
        running.close()


def test_a_token_bucket_raced_by_four_replicas_admits_exactly_its_limit(
    fleet: Fleet, redis: RedisServer
) -> None:
    # 1,000 tokens a minute, 10 tokens a request, 8 callers in each of 4 processes, each
    # caller until its first refusal.
    admitted, took = fleet.together("tokens", redis)
    # The full bucket, plus what refilled while they raced (1000 / 60 tokens a second:
    # nothing on a quick machine, a request or two on a loaded one).
    assert 1000 <= sum(admitted) <= 1000 + _refilled(1000, took, 10), (admitted, took)
    assert sum(share > 0 for share in admitted) >= 2, admitted  # they did race
    started = time.monotonic()
    again = fleet.all("tokens")  # and nothing more in the window but what refilled
    took += time.monotonic() - started
    assert sum(admitted) + sum(again) <= 1000 + _refilled(1000, took, 10), (again, took)


async def test_a_breaker_opened_by_one_replica_is_seen_by_all_on_their_next_request(
    fleet: Fleet, redis: RedisServer
) -> None:
    assert fleet.all("probe") == [["admitted"] * TASKS] * REPLICAS
    config = BreakerConfig(cooldowns={Code.UNAVAILABLE: 60.0})
    async with open_redis_state(redis.url, replicas=REPLICAS) as state:
        breaker = Breaker(config, state=state)
        await breaker.record(
            await breaker.admit("alpha"), ActorError.from_code(Code.UNAVAILABLE, "down")
        )
    assert fleet.all("probe") == [["refused"] * TASKS] * REPLICAS


async def test_half_open_admits_exactly_one_probe_across_the_fleet(
    fleet: Fleet, redis: RedisServer
) -> None:
    # The cooldown is long enough that the fleet asks while the breaker is still open,
    # even on a loaded machine (each replica answers within milliseconds when idle).
    config = BreakerConfig(cooldowns={Code.UNAVAILABLE: 2.0})
    async with open_redis_state(redis.url, replicas=REPLICAS) as state:
        breaker = Breaker(config, state=state)
        await breaker.record(
            await breaker.admit("alpha"), ActorError.from_code(Code.UNAVAILABLE, "down")
        )
        opened = time.monotonic()
        assert fleet.all("probe") == [["refused"] * TASKS] * REPLICAS
        assert time.monotonic() - opened < 2.0  # or the check above proved nothing
        await trio.sleep(2.05 - (time.monotonic() - opened))
        outcomes = [o for answer in fleet.together("probe", redis)[0] for o in answer]
        assert sorted(outcomes) == ["probe"] + ["refused"] * (REPLICAS * TASKS - 1)


def test_redis_killed_each_replica_admits_its_share_then_shared_again(
    fleet: Fleet, redis: RedisServer
) -> None:
    # 400 requests a minute. 40 taken while shared (10 each), then Redis dies.
    assert fleet.all("requests 10") == [10] * REPLICAS
    redis.kill()
    degraded = fleet.all("requests")
    # Each replica on its own: its quarter of what it last saw left in Redis (at most
    # 400 / 4 = 100), never the full limit; the fleet stays within its limit plus one
    # share.
    assert all(80 <= share <= 400 / REPLICAS for share in degraded), degraded
    assert 40 + sum(degraded) <= 400 + 400 / REPLICAS
    assert fleet.all("events") == [["state.degraded"]] * REPLICAS
    redis.start()
    assert fleet.all("wait_recovered") == [True] * REPLICAS
    assert fleet.all("events") == [["state.recovered"]] * REPLICAS
    # Shared again: the restarted server starts full, and the fleet gets exactly 400.
    shared, took = fleet.together("requests", redis)
    assert 400 <= sum(shared) <= 400 + _refilled(400, took, 1), (shared, took)


def test_uneven_traffic_then_redis_killed_stays_within_the_stated_bound(
    fleet: Fleet, redis: RedisServer
) -> None:
    """docs/fleet.md's bound for any traffic: in a window of W seconds the fleet admits
    at most 2C + R(W + D) — C through Redis plus what refills, and the local shares, at
    most C together, plus what they refill while degraded. Here three replicas last saw
    a nearly full bucket and one drained it: the three start at their share of what
    they saw, the fourth at its share of nothing."""
    started = time.monotonic()
    assert fleet.all("requests 1") == [1] * REPLICAS
    drained = fleet.one(REPLICAS - 1, "requests")
    assert 396 <= drained <= 396 + _refilled(400, time.monotonic() - started, 1), drained
    redis.kill()
    degraded = fleet.all("requests")
    window = time.monotonic() - started
    assert fleet.all("events") == [["state.degraded"]] * REPLICAS
    # The drained replica's share starts empty: only what refilled since.
    assert degraded[-1] <= _refilled(400 // REPLICAS, window, 1), degraded
    assert all(share <= 400 / REPLICAS for share in degraded[:-1]), degraded
    admitted = REPLICAS + drained + sum(degraded)
    assert admitted <= 2 * 400 + 2 * _refilled(400, window, 1), (admitted, window)


def test_a_fleet_beside_busy_loops_stays_shared(fleet: Fleet, redis: RedisServer) -> None:
    """Two CPU-bound processes on the same host: Redis answers late but answers, and no
    replica degrades (a slow reply is waited for up to ``timeout``, 2 s; only a refused
    or failed connection degrades at once)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        for _ in range(3):
            admitted, took = fleet.together("tokens", redis)
            assert 1000 <= sum(admitted) <= 1000 + _refilled(1000, took, 10), (admitted, took)
            assert fleet.all("probe") == [["admitted"] * TASKS] * REPLICAS
            redis.command("FLUSHALL")  # a full bucket for the next round
            time.sleep(0.1)
        assert fleet.all("events") == [[]] * REPLICAS  # never degraded
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
