"""Actors and specs the supervisor tests share."""

from __future__ import annotations

from typing import Any

import attrs
import trio

from actors import Actor, ActorError
from supervisors import Backoff, ChildSpec, Directive, Policy, SupervisorSpec

NO_BACKOFF = Backoff(kind="fixed", initial=0.0, max=0.0)


@attrs.frozen(kw_only=True)
class SpyPolicy(Policy):
    """Records every error it is asked about."""

    asked: list[ActorError] = attrs.field(factory=list, eq=False)

    def lookup(self, error: ActorError) -> Directive | None:
        self.asked.append(error)
        return super().lookup(error)


class Worker(Actor):
    """Records its lifecycle in a shared journal.

    Messages: ``("crash", code)`` raises that typed error; ``"value_error"`` raises a
    ValueError; ``"exit"`` ends the instance normally; ``("sleep", s)`` sleeps; anything
    else is echoed with the worker's name.
    """

    def __init__(self, name: str, journal: list[tuple[Any, ...]]) -> None:
        self.name = name
        self.journal = journal
        self.handled = 0

    async def on_start(self) -> None:
        self.journal.append(("start", self.name, trio.current_time()))

    async def on_stop(self, reason: str) -> None:
        self.journal.append(("stop", self.name, reason))

    async def handle(self, message: Any) -> Any:
        self.handled += 1
        if isinstance(message, tuple) and message[0] == "crash":
            raise ActorError.from_code(message[1], f"{self.name} told to crash")
        if message == "value_error":
            raise ValueError("worker bug")
        if message == "exit":
            self.stop_self("done")
            return "exiting"
        if isinstance(message, tuple) and message[0] == "sleep":
            await trio.sleep(message[1])
        return (self.name, message, self.handled)


def worker(name: str, journal: list[tuple[Any, ...]], **options: Any) -> ChildSpec:
    return ChildSpec(id=name, actor=Worker, args=(name, journal), **options)


def tree_spec(*children: ChildSpec, **options: Any) -> SupervisorSpec:
    options.setdefault("backoff", NO_BACKOFF)
    return SupervisorSpec(children=children, **options)


def starts(journal: list[tuple[Any, ...]], name: str | None = None) -> list[float]:
    return [e[2] for e in journal if e[0] == "start" and (name is None or e[1] == name)]


class SleepyTool(Actor):
    """Sleeps 100 s on every call; ``"misbehave"`` raises ValueError from its Cancelled."""

    async def handle(self, message: Any) -> Any:
        try:
            await trio.sleep(100)
        except trio.Cancelled as cancelled:
            if message == "misbehave":
                raise ValueError("cleanup failed while cancelled") from cancelled
            raise
        return message
