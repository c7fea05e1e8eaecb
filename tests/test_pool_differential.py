"""The pool's fast path is the general walk specialised: a differential test.

Each generated scenario (a seeded ``random.Random``) runs twice, on a fresh runtime and
fresh breaker / limiter: with ``deadline=None`` (``complete()`` takes the fast path) and
with a deadline far away (the general walk, same rules otherwise). The targets have
*different* models (2 or 3 targets, some providers with downgrade models), their
breakers are closed, counting, open, half-open (with or without the probe lease taken),
open for good or with their model gone; their limiters have room or not; every attempt
answers by a script (ok, a retryable or a fatal code, junk, slow); some requests are
streamed; some pools have an attempt timeout or an escalation hook. Both runs must give
the same answers or errors (code), at the same virtual times, the same ledger rows, the
same events (attempts, breaker transitions, retries, escalations), the same breaker and
limiter states afterwards, and the same requests to each target — model included.

A scripted target plays a real provider on the model: a request for a model its
provider does not serve is answered ``model_not_found``.
"""

from __future__ import annotations

import functools
import math
import random
from typing import Any

import attrs
import trio
from trio.testing import MockClock

from actors import Actor, ActorError, Code, Usage, fail, open_runtime
from actors.providers import Complete, LlmResponse, Stream, StreamEvent
from actors.testing import capture_events
from supervisors import (
    Breaker,
    BreakerConfig,
    ProviderPool,
    RateLimit,
    RateLimiter,
    Resilience,
    RetryLater,
    Target,
)
from tests.pool_helpers import request, rules

SCENARIOS = 520
RETRYABLE = ["unavailable", "rate_limited", "timeout", "network", "malformed_response"]
FATAL = [
    "bad_request",
    "auth",
    "model_not_found",
    "context_window_exceeded",
    "content_filter",
    "capability_missing",
]
BREAKER_STATES = [
    "closed",
    "closed",
    "counting",
    "open",
    "half_open",
    "half_open_leased",
    "permanent",
    "model_gone",
]
EVENTS = ("pool.attempt", "pool.attempt_failed", "breaker.transition", "retry.scheduled")


class Scripted(Actor):
    """A provider serving ``models``: each request is answered by the next step of the
    script (the last one repeats) — ``"ok"``, an error code, ``"junk"`` (not an
    LlmResponse), ``("slow", s)`` (ok after ``s`` seconds); a request for a model it
    does not serve is ``model_not_found``. Every request it receives is recorded."""

    def __init__(
        self, name: str, models: set[str], script: list[Any], seen: list[tuple[Any, ...]]
    ) -> None:
        self.name, self.models, self.script, self.seen = name, models, script, seen

    async def handle(self, message: Any) -> Any:
        assert isinstance(message, Complete | Stream)
        asked = message.request
        self.seen.append((self.name, type(message).__name__, asked))
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if asked.model not in self.models:
            step = "model_not_found"
        if isinstance(step, tuple):
            await trio.sleep(step[1])
            step = "ok"
        if step == "junk":
            return {"not": "a response"}
        if step != "ok":
            code = Code(step)
            return fail(
                code, f"{self.name} says {step}", retryable=ActorError.from_code(code).retryable
            )
        if isinstance(message, Stream):
            await message.sink.send(StreamEvent(kind="text", text=self.name))
        return LlmResponse(
            content=self.name,
            usage=Usage(input_tokens=3, output_tokens=2),
            provider=self.name,
            model=asked.model,
        )


def _step(rng: random.Random) -> Any:
    kind = rng.random()
    if kind < 0.45:
        return "ok"
    if kind < 0.7:
        return rng.choice(RETRYABLE)
    if kind < 0.85:
        return rng.choice(FATAL)
    if kind < 0.92:
        return "junk"
    return ("slow", rng.choice([0.5, 1.5, 3.0]))


def scenario(seed: int) -> dict[str, Any]:
    """One generated scenario: plain data, printed when the paths disagree."""
    rng = random.Random(seed)
    providers = ["A", "B", "C"][: rng.choice([2, 3])]
    targets = [(p, f"{p.lower()}-{rng.choice(['large', 'pro', 'fast'])}") for p in providers]
    if len(targets) == 2 and rng.random() < 0.3:  # a second model of one provider
        provider = rng.choice(providers)
        targets.insert(rng.randrange(3), (provider, f"{provider.lower()}-extra"))
    downgrades = {p: [f"{p.lower()}-mini"] for p in providers if rng.random() < 0.35}
    models = [model for _, model in targets] + ["caller-model"]
    return {
        "seed": seed,
        "targets": targets,
        "downgrades": downgrades,
        "scripts": {p: [_step(rng) for _ in range(rng.randint(1, 4))] for p in providers},
        "threshold": rng.choice([1, 2, 3]),
        "breakers": {p: rng.choice(BREAKER_STATES) for p in providers},
        "limits": {
            p: (rng.choice([1, 6, 60]), rng.random() < 0.5)  # per minute, room now
            for p in providers
            if rng.random() < 0.3
        },
        "attempt_timeout": rng.choice([None, None, None, 2.0]),
        "hook": rng.random() < 0.15,
        "far": rng.choice([10_000.0, 1e6]),
        "requests": [
            (rng.choice(models), "stream" if rng.random() < 0.2 else "complete")
            for _ in range(rng.randint(1, 3))
        ],
    }


async def _prepare(s: dict[str, Any], breaker: Breaker, limiter: RateLimiter | None) -> None:
    """Put each provider's breaker and limiter in the scenario's state."""
    first_model: dict[str, str] = {}
    for provider, model in s["targets"]:
        first_model.setdefault(provider, model)
    failure = ActorError.from_code(Code.UNAVAILABLE, "down")
    states = s["breakers"]

    async def fail_times(provider: str, times: int) -> None:
        for _ in range(times):
            await breaker.record(await breaker.admit(provider, first_model[provider]), failure)

    for provider, state in states.items():
        if state.startswith("half_open"):
            await fail_times(provider, s["threshold"])
    await trio.sleep(31)  # past the early probe of those opened above
    for provider, state in states.items():
        if state == "half_open_leased":
            assert (await breaker.admit(provider, first_model[provider])).probe  # never ended
        elif state == "open":
            await fail_times(provider, s["threshold"])
        elif state == "counting" and s["threshold"] > 1:
            await fail_times(provider, 1)
        elif state == "permanent":
            await breaker.record(
                await breaker.admit(provider), ActorError.from_code(Code.AUTH, "revoked")
            )
        elif state == "model_gone":
            gone = ActorError.from_code(Code.MODEL_NOT_FOUND, "gone")
            await breaker.record(await breaker.admit(provider, first_model[provider]), gone)
    if limiter is not None:
        for provider, (_, room) in s["limits"].items():
            if not room:
                assert limiter.acquire_fast(provider) is not None


def _plain(value: Any) -> Any:
    """An event field comparable across runs (an error by its facts)."""
    if isinstance(value, ActorError):
        return (value.code, value.provider, value.model, value.retry_after, value.retryable)
    return value


async def _run(s: dict[str, Any], walk: bool) -> dict[str, Any]:
    seen: list[tuple[Any, ...]] = []
    limiter = (
        RateLimiter(
            {
                p: RateLimit(requests_per_minute=rpm, request_burst=1)
                for p, (rpm, _) in s["limits"].items()
            }
        )
        if s["limits"]
        else None
    )
    breaker = Breaker(BreakerConfig(failure_threshold=s["threshold"]))
    resilience = Resilience(retry=rules(), breaker=breaker, limiter=limiter)
    escalations: list[str] = []

    async def hook(error: Any) -> RetryLater | None:
        escalations.append(str(error.category))
        return RetryLater(seconds=5) if len(escalations) == 1 else None

    async with open_runtime() as runtime:
        served: dict[str, set[str]] = {}
        for provider, model in s["targets"]:
            served.setdefault(provider, set()).add(model)
        for provider, models in s["downgrades"].items():
            served[provider].update(models)
        refs = {}
        for provider, models in served.items():
            script = list(s["scripts"][provider])
            refs[provider] = await runtime.spawn(
                functools.partial(Scripted, provider, models, script, seen)
            )
        pool = ProviderPool(
            [Target(ref=refs[p], provider=p, model=m) for p, m in s["targets"]],
            downgrades=s["downgrades"],
            resilience=resilience,
            deadline=s["far"] if walk else None,
            attempt_timeout=s["attempt_timeout"],
            on_exhausted=hook if s["hook"] else None,
        )
        await _prepare(s, breaker, limiter)
        start = trio.current_time()
        outcomes: list[Any] = []
        with capture_events(*EVENTS) as events:
            for model, kind in s["requests"]:
                asked = request(model=model)
                try:
                    if kind == "stream":
                        async with pool.stream(asked) as stream:
                            texts = [event.text async for event in stream]
                        assert stream.response is not None
                        answer: Any = (texts, stream.response.content, stream.response.model)
                    else:
                        reply = await pool.complete(asked)
                        answer = (reply.content, reply.model)
                except ActorError as error:
                    answer = (error.code, getattr(error, "category", None), error.retry_after)
                outcomes.append((answer, trio.current_time() - start))
        ids: dict[str, int] = {}
        entries = [
            (ids.setdefault(e.request_id, len(ids)), e.started_at - start, *e[1:6], *e[7:])
            for e in pool.ledger
        ]
        records = []
        for event in events:
            fields = attrs.asdict(event, recurse=False)
            if "request_id" in fields:
                fields["request_id"] = ids.setdefault(fields["request_id"], len(ids))
            records.append((event.name, {k: _plain(v) for k, v in fields.items()}))
        keys = [(p, None) for p in served] + [(p, m) for p in served for m in sorted(served[p])]
        states = {key: await breaker.state_of(*key) for key in keys}
        room = (
            {} if limiter is None else {p: limiter.acquire_fast(p) is not None for p in s["limits"]}
        )
        return {
            "outcomes": outcomes,
            "entries": entries,
            "events": records,
            "seen": seen,
            "states": states,
            "room": room,
            "escalations": escalations,
        }


async def test_the_fast_path_and_the_walk_agree_on_generated_scenarios(
    autojump_clock: MockClock,
) -> None:
    models_sent = 0
    for seed in range(SCENARIOS):
        s = scenario(seed)
        fast = await _run(s, walk=False)
        walk = await _run(s, walk=True)
        for key in fast:
            assert fast[key] == walk[key], f"{key} differ in scenario {s}"
        # Every target received its own model, whatever the caller asked for.
        chain = dict.fromkeys(m for _, m in s["targets"]) | {
            m: None for ms in s["downgrades"].values() for m in ms
        }
        for _, _, asked in fast["seen"]:
            assert asked.model in chain, f"a target was sent {asked.model!r} in {s}"
            models_sent += 1
    assert models_sent > SCENARIOS  # the scenarios did send requests


def test_the_generator_covers_every_dimension() -> None:
    """The scenarios mix what the issue lists: models unlike the caller's, downgrades,
    every breaker state, limiters with and without room, every kind of step, streams,
    attempt timeouts and hooks."""
    all_ = [scenario(seed) for seed in range(SCENARIOS)]
    assert len(all_) >= 500
    assert all(len({m for _, m in s["targets"]}) == len(s["targets"]) for s in all_)
    assert sum(1 for s in all_ if s["downgrades"]) > 100
    assert {state for s in all_ for state in s["breakers"].values()} == set(BREAKER_STATES)
    assert {room for s in all_ for _, room in s["limits"].values()} == {True, False}
    steps = {
        step if isinstance(step, str) else "slow"
        for s in all_
        for script in s["scripts"].values()
        for step in script
    }
    assert steps == {"ok", "junk", "slow", *RETRYABLE, *FATAL}
    kinds = {kind for s in all_ for _, kind in s["requests"]}
    assert kinds == {"complete", "stream"}
    differs = sum(1 for s in all_ if any(m != s["targets"][0][1] for m, _ in s["requests"]))
    assert differs > 400  # most ask for a model other than the first target's
    assert any(s["attempt_timeout"] for s in all_) and any(s["hook"] for s in all_)
    assert not math.isinf(max(s["far"] for s in all_))
