"""One round trip to Redis for :class:`~supervisors.state.RedisState`: a script of
:mod:`supervisors.state.redis_scripts` run with ``EVALSHA`` (loaded on the first
``NOSCRIPT`` — a new or restarted server, a flushed script cache), shielded and bounded
by the state's ``timeout``; a failure comes back as a value, for the state to degrade
on — never raised into a request."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

import trio

from supervisors.state import redis_scripts as lua

#: The limiter's bucket suffixes: one reservation's buckets share a hash slot.
SUFFIXES: Final = (":requests", ":tokens")
#: Errors of a connection that may come back (besides coredis's own).
TRANSIENT: Final = (OSError, EOFError)


class Keys:
    """The Redis keys of a namespace: ``<namespace>:{<tag>}:<kind>``, the tag keeping
    what one script touches in one hash slot (Redis Cluster)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def breaker(self, key: str) -> str:
        """A breaker's hash (``key``: a provider, or one model of it)."""
        return f"{self.namespace}:{{{key}}}:breaker"

    def bucket(self, bucket: str) -> str:
        """A token bucket's string (``alpha:requests`` and ``alpha:tokens`` share the
        tag ``alpha``)."""
        for suffix in SUFFIXES:
            if bucket.endswith(suffix):
                return f"{self.namespace}:{{{bucket[: -len(suffix)]}}}:{suffix[1:]}"
        return f"{self.namespace}:{{{bucket}}}:bucket"

    def usage(self, run_id: str) -> list[str]:
        """A run's budget usage hash and its set of applied increment ids."""
        tag = f"{self.namespace}:{{run:{run_id}}}"
        return [f"{tag}:usage", f"{tag}:applied"]


def totals(reply: Sequence[Any]) -> tuple[int, float, int]:
    """A usage script's reply as (tokens, cost, turns)."""
    return int(reply[0]), float(reply[1]), int(reply[2])


class ScriptCalls:
    """Runs the state's scripts on ``client`` (a coredis client), each call bounded by
    ``timeout`` seconds."""

    def __init__(self, client: Any, timeout: float) -> None:
        self.client = client
        self.timeout = timeout
        # name -> (source, SHA1)
        self._scripts = {
            name: (getattr(lua, name), hashlib.sha1(getattr(lua, name).encode()).hexdigest())
            for name in lua.NAMES
        }

    async def bounded(self, fn: Any, *args: Any) -> tuple[bool, Any]:
        """``fn(*args)`` shielded and bounded by ``timeout``: ``(True, its result)``, or
        ``(False, what went wrong)`` — the exception's type and text, or ``"timeout"``.
        A caller's cancel takes effect after it (a reservation or a probe lease is never
        taken on the server without the caller knowing)."""
        with trio.CancelScope(shield=True, deadline=trio.current_time() + self.timeout):
            try:
                return True, await fn(*args)
            except _redis_errors() as exc:
                return False, f"{type(exc).__name__}: {exc}"
        return False, "timeout"

    async def run(self, script: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """``EVALSHA``; on ``NOSCRIPT``, load the script and run it again (once)."""
        source, sha = self._scripts[script]
        try:
            return await self.client.evalsha(sha, keys=keys, args=args)
        except _no_script() as exc:
            loaded = await self.client.script_load(source)
            if loaded != sha:  # pragma: no cover - a server hashing otherwise
                raise RuntimeError(f"Redis loaded {script} as {loaded}, not {sha}") from exc
            return await self.client.evalsha(sha, keys=keys, args=args)


def _no_script() -> type[BaseException]:
    import coredis.exceptions

    return coredis.exceptions.NoScriptError


def _redis_errors() -> tuple[type[BaseException], ...]:
    import coredis.exceptions

    return (coredis.exceptions.RedisError, *TRANSIENT)
