"""Whether a run's stored data can be trusted: one check, used when a run is recovered
(:func:`supervisors.runs.Runs.resume`, :func:`supervisors.runs.open_runs`) and by
``python -m actors runs verify``.

What recovery reads is covered by a checksum or derived from checksummed records:

* the records, each with its own checksum, form a complete chain: ``seq`` 0 is
  ``run:started``, then every ``seq`` without a gap;
* the row's header (workflow, definition, budget limits, start) matches its checksum;
* the checkpoint, if any, is at a ``node:completed`` record that exists — a checkpoint
  past the last record means records were lost (its own checksum matches too);
* the row's status agrees with the records: records that end the run for good have
  their ending in the row (status, and a failed run's code), and a row that says the
  run ended has records that end it. The status is never trusted alone: which runs are
  unfinished is read from both sides (:func:`unfinished_of`), so a damaged status, or a
  row deleted while its records stay, is reported rather than dropped.

Whether the records fit the workflow's graph is checked when they are replayed
(:class:`supervisors.runs.progress.Progress`): the journal alone does not know the graph.
Every finding is ``event_log_corrupt`` naming the run and the first bad ``seq``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from actors.errors import ActorError, Code
from actors.events import RunEvent
from actors.journal.records import (
    STATUS_OF,
    TERMINAL,
    Entry,
    checkpoint_checksum,
    corrupt,
    ends_run,
    header_checksum,
    record_of,
)
from actors.journal.store import Checkpoint, JournalStore, RunRow, RunTail


def ends_for_good(tail: RunTail) -> bool:
    """The run's last record ends it for good (a ``run:cancelled`` only when not
    resumable; one that cannot be read does not)."""
    if tail.last not in TERMINAL:
        return False
    if tail.last != "run:cancelled":
        return True
    if tail.cancel is None:
        return False
    try:
        return ends_run(record_of(tail.cancel))
    except ActorError:
        return False


def unfinished_of(tails: Iterable[RunTail]) -> list[str]:
    """The runs recovery must look at, in the order given: a row that says ``running``,
    or records that do not end the run for good — whatever the row says (a damaged
    status, a deleted row, a lost terminal record: recovery reports it)."""
    return [tail.run_id for tail in tails if tail.status == "running" or not ends_for_good(tail)]


def sound(
    run_id: str, row: RunRow | None, entries: Sequence[Entry], checkpoint: Checkpoint | None
) -> tuple[RunEvent, ...]:
    """The run's records when its stored data can be trusted (see the module
    docstring); ``event_log_corrupt`` naming the run and the first bad ``seq`` if not."""
    if not entries:
        raise corrupt(run_id, None, "no events")
    if entries[0].seq != 0 or entries[0].name != "run:started":
        raise corrupt(run_id, 0, "no run:started")
    records = []
    for index, entry in enumerate(entries):
        if entry.seq != index:
            raise corrupt(run_id, index, f"seq {index} is missing")
        records.append(record_of(entry))
    if row is None:
        raise corrupt(run_id, 0, "the run has records but no row")
    if row.checksum != header_checksum(
        run_id, row.workflow, row.definition, row.limits, row.started
    ):
        raise corrupt(run_id, 0, "the run's row does not match its checksum")
    if checkpoint is not None:
        _check_point(run_id, checkpoint, records)
    _check_ending(run_id, row, records[-1])
    return tuple(records)


def _check_point(run_id: str, point: Checkpoint, records: Sequence[RunEvent]) -> None:
    last = len(records) - 1
    if type(point.seq) is not int:
        raise corrupt(run_id, None, f"the checkpoint's seq is not a number ({point.seq!r:.32})")
    if not 0 <= point.seq <= last:
        raise corrupt(
            run_id, last + 1, f"the checkpoint is at seq {point.seq}, past the last record"
        )
    if point.checksum != checkpoint_checksum(run_id, point.seq, point.progress):
        raise corrupt(run_id, point.seq, "checkpoint checksum mismatch")
    if records[point.seq].name != "node:completed":
        raise corrupt(run_id, point.seq, "the checkpoint is not at a node:completed record")


def _check_ending(run_id: str, row: RunRow, last: RunEvent) -> None:
    if not ends_run(last):
        if row.status != "running":
            raise corrupt(
                run_id,
                last.seq + 1,
                f"the run's row says {row.status[:32]!r} but its records end at seq "
                f"{last.seq} without ending it",
            )
        return
    status = STATUS_OF[last.name]
    code = getattr(last, "code", None) if status == "failed" else None
    if row.status != status or row.code != code:
        said = row.status if row.code is None else f"{row.status}/{row.code}"
        raise corrupt(
            run_id,
            last.seq,
            f"the run's row says {said[:64]!r} but its records end with {last.name}",
        )


def damaged(store: JournalStore) -> list[ActorError]:
    """Every run of ``store`` whose stored data cannot be trusted, oldest first: one
    ``event_log_corrupt`` each (``runs verify``). A store that cannot be read at all
    raises its own typed error."""
    found = []
    for tail in store.tails():
        run_id = tail.run_id
        try:
            sound(readable_id(run_id), *store.stored(run_id))
        except ActorError as error:
            if error.code is not Code.EVENT_LOG_CORRUPT:
                raise
            found.append(damage_of(str(run_id), error))
        except Exception as exc:  # noqa: BLE001 - classified: a value of the wrong kind
            found.append(damage_of(str(run_id), exc))
    return found


def readable_id(run_id: object) -> str:
    """A run id a listing returned, when it is one (a non-empty string); else
    ``event_log_corrupt``: a damaged row or record left something else in its place."""
    if type(run_id) is not str or not run_id:
        raise corrupt(str(run_id), None, f"a run's id cannot be read ({run_id!r:.64})")
    return run_id


def damage_of(run_id: str, failure: BaseException) -> ActorError:
    """``failure`` met while ``run_id``'s stored data was read or checked, as that run's
    ``event_log_corrupt``: itself when it names the run; a read of the file that failed,
    or a stored value of the wrong kind (a garbled type byte: text where a number
    belongs), named after the run, ``failure`` kept as the cause."""
    if isinstance(failure, ActorError):
        if failure.run_id == run_id:
            return failure
        what = failure.message[:200]
    else:
        what = f"{type(failure).__name__}: {str(failure)[:160]}"
    error = corrupt(run_id, None, f"cannot be read ({what})")
    error.__cause__ = failure
    return error
