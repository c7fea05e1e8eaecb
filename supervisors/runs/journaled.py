"""A run with a journal: its records written before anyone sees them, its checkpoints,
its halt, and what recovery reads back (:func:`recovered`).

:class:`RunJournal` sits between a :class:`~supervisors.runs.run.Run` and the
:class:`~supervisors.runs.Journal`: each record the run publishes is folded into the run's
:class:`~supervisors.runs.progress.Progress`, submitted, and delivered to the run's
stream, hooks and log only once it is durable — in ``seq`` order. A ``node:completed``
carries a checkpoint (the progress after it); ``run:started`` the run's header (its
workflow's definition and its limits); a terminal record the run's summary.

When the journal halts the run (``persistence_unavailable``) the records not yet durable
are dropped from the stream (its ``seq`` goes on from the first of them), nothing more
is submitted, and the run ends ``run:failed`` — even one whose terminal record was
waiting. That ``run:failed`` is not journalled, so the journal keeps the run unfinished
and a later start resumes it from its last durable record.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any, Protocol

import attrs
import cattrs
import trio

from actors import ActorError, Code
from actors.events import RunEvent
from actors.journal import (
    STATUS_OF,
    TERMINAL,
    Checkpoint,
    RunEnding,
    RunHeader,
    RunRow,
    checkpoint_checksum,
    corrupt,
    dumps,
    ends_run,
    entry_of,
)
from supervisors.resilience.budget import BudgetLimits
from supervisors.runs.conditions import Condition
from supervisors.runs.graph import Workflow
from supervisors.runs.journal.journal import Journal
from supervisors.runs.progress import Progress


class RecordSink(Protocol):
    """What a journal delivers a run's records to (a :class:`~supervisors.runs.Run`)."""

    run_id: str

    def deliver(self, record: RunEvent) -> None: ...

    def rewind(self, seq: int) -> None: ...

    def end_again(self, error: ActorError, ended: Any) -> None: ...


_LIMITS = cattrs.Converter()


class RunJournal:
    """The journal side of one run (see the module docstring)."""

    def __init__(
        self, run: RecordSink, journal: Journal, progress: Progress, header: RunHeader | None
    ) -> None:
        self.run = run
        self.journal = journal
        self.progress = progress
        self.header = header
        self.budget: Callable[[], list[float]] = lambda: [0, 0.0, 0]
        #: Records submitted and not yet delivered, oldest first.
        self.waiting: list[RunEvent] = []
        self.halt: ActorError | None = None
        self.on_halt: Callable[[ActorError], None] | None = None
        self._settled: trio.Event | None = None
        # Set once the run's first record (run:started, or a resume's run:resumed) is
        # durable, or the journal halted the run.
        self._begun = trio.Event()

    def record(self, record: RunEvent) -> None:
        """Journal ``record``; it reaches the run's readers once durable."""
        if self.halt is None and self.journal.closed:  # its block was left under the run
            self.halted(ActorError.from_code(Code.PERSISTENCE_UNAVAILABLE, "the journal is closed"))
        if self.halt is not None:
            self.run.deliver(record)
            return
        progress = self.progress
        progress.apply(record)
        name = record.name
        header = ending = point = None
        if name == "run:started":
            header, self.header = self.header, None
        elif name == "node:completed":
            progress.budget = self.budget()
            # Every value in it was checked when it came in (the inputs, each node's
            # updates): the whole state is not held to the per-value size limit.
            body = json.dumps(progress.snapshot(), separators=(",", ":"), allow_nan=False)
            point = Checkpoint(
                self.run.run_id,
                record.seq,
                body,
                checkpoint_checksum(record.run_id, record.seq, body),
            )
        elif ends_run(record):
            ending = _ending(record)
        self.waiting.append(record)
        self.journal.submit(
            entry_of(record, checked=True), self, header=header, ending=ending, checkpoint=point
        )

    def check(self, node_id: str, updates: Any) -> None:
        """``output_validation`` when ``updates`` cannot be journalled exactly."""
        try:
            dumps(updates)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ActorError.from_code(
                Code.OUTPUT_VALIDATION,
                f"node {node_id!r}: its updates are not JSON data, which a run with a journal "
                f"needs ({exc})",
                node_id=node_id,
                cause=exc,
            ) from exc

    # -- the JournalOwner protocol ----------------------------------------------------

    def durable(self, seq: int) -> None:
        waiting = self.waiting
        count = 0
        for record in waiting:
            if record.seq > seq:
                break
            count += 1
            self.run.deliver(record)
        del waiting[:count]
        if count:
            self._begun.set()
        if not waiting:
            self._settle()

    def halted(self, error: ActorError) -> None:
        if self.halt is not None:
            return
        lost = self._stop(error)
        ended = next((record for record in lost if record.name in TERMINAL), None)
        if ended is not None:  # the run had ended, but its end never became durable
            self.run.end_again(error, ended)
        elif self.on_halt is not None:
            self.on_halt(error)

    def detach(self) -> None:
        """Journal nothing more of this run (a resume whose caller was cancelled): what
        follows is delivered to its readers only, and the journal keeps the run
        unfinished — resumable — as a crash would."""
        if self.halt is None:
            self._stop(ActorError.from_code(Code.CANCELLED, "detached from the journal"))

    def _stop(self, reason: ActorError) -> list[RunEvent]:
        """Journal nothing more; returns the records that were not durable. They are not
        shown — readers only ever see what the journal has — and the stream goes on
        from the first of them."""
        self.halt = reason
        self._begun.set()
        lost, self.waiting = self.waiting, []
        if lost:
            self.run.rewind(lost[0].seq)
        self._settle()
        return lost

    # -- waits ----------------------------------------------------------------------

    async def begun(self) -> None:
        """Wait until the run's first record is durable — the run is in the journal, and a
        crash from now on leaves it resumable — or the journal halted the run. The engine
        publishes that record in its first step, before any checkpoint."""
        await self._begun.wait()

    async def settled(self) -> None:
        """Wait until every record submitted so far is durable (or the run is halted)."""
        while self.waiting and self.halt is None:
            if self._settled is None:
                self._settled = trio.Event()
            await self._settled.wait()

    def _settle(self) -> None:
        event, self._settled = self._settled, None
        if event is not None:
            event.set()


def _ending(record: Any) -> RunEnding:
    status = STATUS_OF[record.name]
    return RunEnding(
        record.run_id,
        status,
        getattr(record, "code", None) if status == "failed" else None,
        time.time(),
        record.duration,
        record.tokens,
        record.cost,
    )


# -- definitions ------------------------------------------------------------------------


def definition_of(workflow: Workflow) -> dict[str, Any]:
    """What a run records of its workflow: the graph's shape and a ``digest`` of it. A
    resumed run must be given a workflow with the same digest (functions are named by
    their qualified names; conditions by their text)."""
    shape = {
        "name": workflow.name,
        "start": list(workflow.start),
        "max_steps": workflow.max_steps,
        "nodes": [
            {"id": node.id, "kind": node.kind, "writes": sorted(node.writes), "join": node.join}
            for node in workflow.nodes
        ],
        "edges": [
            {
                "source": edge.source,
                "target": edge.target,
                "on": list(edge.on),
                "when": _named(edge.when),
            }
            for edge in workflow.edges
        ],
    }
    digest = hashlib.blake2b(dumps(shape).encode(), digest_size=16).hexdigest()
    return {**shape, "digest": digest}


def _named(when: Any) -> str | None:
    if when is None:
        return None
    if isinstance(when, Condition):
        return f"expr:{when.source}"
    return f"fn:{getattr(when, '__qualname__', type(when).__qualname__)}"


def limits_json(limits: BudgetLimits) -> str:
    return dumps(_LIMITS.unstructure(limits))


def limits_of(text: str, run_id: str) -> BudgetLimits:
    try:
        return _LIMITS.structure(json.loads(text), BudgetLimits)
    except Exception as exc:
        raise corrupt(run_id, 0, "its budget limits cannot be read") from exc


# -- recovery ---------------------------------------------------------------------------


@attrs.frozen
class Recovered:
    """A run read back from its journal: its records and its progress after them."""

    row: RunRow
    records: tuple[RunEvent, ...]
    progress: Progress
    limits: BudgetLimits


def recovered(
    run_id: str,
    row: RunRow,
    records: tuple[RunEvent, ...],
    checkpoint: Checkpoint | None,
    workflow: Workflow,
    start: tuple[str, ...],
    joins: Any,
) -> Recovered:
    """Replay a run's records — found sound (:func:`actors.journal.sound`) — from its
    checkpoint when it has one: ``event_log_corrupt`` with the first bad ``seq`` when
    they do not fit the graph, ``config_invalid`` when ``workflow`` is not the one the
    run started with, ``input_validation`` when the run has ended."""
    recorded = _recorded_digest(row, run_id)
    if recorded != definition_of(workflow)["digest"]:
        raise ActorError.from_code(
            Code.CONFIG_INVALID,
            f"run {run_id!r} started with another definition of workflow {row.workflow!r}",
            run_id=run_id,
        )
    progress = Progress(run_id, start, joins)
    if checkpoint is not None:
        try:
            progress.restore(json.loads(checkpoint.progress))
        except Exception as exc:
            raise corrupt(run_id, checkpoint.seq, "checkpoint cannot be read") from exc
        if progress.seq != checkpoint.seq + 1:
            raise corrupt(run_id, checkpoint.seq, "the checkpoint is not after its record")
    for record in records[progress.seq :]:
        progress.apply(record)
    if progress.terminal is not None:
        raise ActorError.from_code(
            Code.INPUT_VALIDATION,
            f"run {run_id!r} has ended ({progress.terminal}): nothing to resume",
            run_id=run_id,
        )
    return Recovered(row, tuple(records), progress, limits_of(row.limits, run_id))


def _recorded_digest(row: RunRow, run_id: str) -> str:
    try:
        digest = json.loads(row.definition)["digest"]
    except Exception as exc:
        raise corrupt(run_id, 0, "its workflow definition cannot be read") from exc
    if type(digest) is not str:
        raise corrupt(run_id, 0, "its workflow definition cannot be read")
    return digest
