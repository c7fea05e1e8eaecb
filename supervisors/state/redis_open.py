"""Opening the Redis state: :func:`open_redis_state` (see :mod:`supervisors.state.redis`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from actors import ActorError, Code
from actors.lowlevel import open_nursery_unwrapped
from supervisors.state.redis import (
    DEFAULT_RETRY_INTERVAL,
    DEFAULT_TIMEOUT,
    DEFAULT_USAGE_TTL,
    RedisState,
)
from supervisors.state.redis_checks import positive


@asynccontextmanager
async def open_redis_state(
    url: str = "redis://127.0.0.1:6379/0",
    *,
    replicas: int,
    namespace: str = "ra",
    timeout: float = DEFAULT_TIMEOUT,
    retry_interval: float = DEFAULT_RETRY_INTERVAL,
    usage_ttl: float = DEFAULT_USAGE_TTL,
) -> AsyncIterator[RedisState]:
    """A :class:`RedisState` on the server at ``url``, with its recovery task running.

    ``replicas``: how many daemons share the limits (each takes ``1/replicas`` of them
    while Redis is unreachable). Redis need not be up when this opens: the first
    operation that cannot reach it starts in degraded mode. Bad arguments raise
    ``config_invalid`` naming the argument; nothing is left open.

    Leaving the block ends the recovery task, then adds the budget usage still counted
    locally to Redis (one try, even when the block is left by a cancel); what cannot be
    added is reported as ``state.usage_unmerged`` — never dropped silently.
    """
    try:
        import coredis
    except ImportError as exc:  # pragma: no cover - the extra is a dev dependency
        raise ActorError.from_code(
            Code.CONFIG_INVALID, "redis state: install the 'redis' extra (coredis)"
        ) from exc
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        raise ActorError.from_code(
            Code.CONFIG_INVALID, "redis state: url must be a redis://, rediss:// or unix:// URL"
        )
    positive("timeout", timeout)
    client = coredis.Redis.from_url(url, decode_responses=True, connect_timeout=timeout)
    state = RedisState(
        client,
        replicas=replicas,
        namespace=namespace,
        timeout=timeout,
        retry_interval=retry_interval,
        usage_ttl=usage_ttl,
    )
    closing = trio.Event()
    async with open_nursery_unwrapped() as holder:
        await holder.start(_hold, client, closing)
        try:
            # The recovery ends before the client closes: a round trip it has in flight
            # (shielded, bounded by the timeout) must not find the connection pool gone.
            async with open_nursery_unwrapped() as recovery:
                recovery.start_soon(state.recover_forever)
                try:
                    yield state
                finally:
                    recovery.cancel_scope.cancel(reason="redis state closed")
        finally:
            try:
                await state.merge_on_close()  # usage still counted here: tried once more
            finally:
                closing.set()


async def _hold(
    client: Any, closing: trio.Event, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Keep coredis's connection pool open (its task group lives in this task, so the
    errors of the block that uses the state are not wrapped by it) until ``closing`` is
    set — also when a scope around the block is cancelled: the pool closes only after
    the last round trip (the recovery's, the close's merge) has ended."""
    with trio.CancelScope(shield=True):
        async with client:
            task_status.started()
            await closing.wait()
