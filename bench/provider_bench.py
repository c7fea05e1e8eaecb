"""Provider overhead: requests through the provider actor vs raw httpx, same server.

2,000 non-streaming chat completions at concurrency 50 against the chaos provider (no
faults) on loopback, in the same process: ours through ``ProviderClient`` → the
``OpenAIProvider`` actor (deferred replies, classification, cattrs parsing); the baseline
posts the same JSON with one shared ``httpx.AsyncClient`` and decodes the body. Target:
throughput ratio >= 0.9.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import trio

from actors import open_runtime
from actors.providers import LlmRequest, Message, OpenAIProvider, ProviderClient, ProviderConfig
from actors.testing.chaos import chaos_server
from bench.common import Row, paired_median

REQUESTS = 2_000
CONCURRENCY = 50
REQUEST = LlmRequest(model="bench", messages=[Message(role="user", content="hello bench")])
BODY = {
    "model": "bench",
    "messages": [{"role": "user", "content": "hello bench"}],
    "max_tokens": 1024,
}


async def _workers(one: Any) -> float:
    per_worker = REQUESTS // CONCURRENCY
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(CONCURRENCY):

            async def worker() -> None:
                for _ in range(per_worker):
                    await one()

            nursery.start_soon(worker)
    return time.perf_counter() - start


async def _raw() -> float:
    async with (
        chaos_server() as server,
        httpx.AsyncClient(base_url=server.url, limits=httpx.Limits(max_connections=100)) as client,
    ):

        async def one() -> None:
            response = await client.post("/v1/chat/completions", json=BODY)
            response.raise_for_status()
            response.json()

        await one()
        return await _workers(one)


async def _ours() -> float:
    async with chaos_server() as server, open_runtime() as runtime:
        config = ProviderConfig(name="bench", base_url=server.url)
        client = ProviderClient(await runtime.spawn(lambda: OpenAIProvider(config)), "bench")

        async def one() -> None:
            await client.complete(REQUEST)

        await one()
        return await _workers(one)


def provider_overhead() -> list[Row]:
    raw, ours, ratio = paired_median(9, lambda: trio.run(_raw), lambda: trio.run(_ours))
    raw_rate, our_rate = REQUESTS / raw, REQUESTS / ours
    return [Row("provider_overhead", our_rate, "requests/s", raw_rate, ratio, ">= 0.9")]
