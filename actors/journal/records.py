"""Journal entries: one run record as it is stored — JSON, keyed, checksummed.

An :class:`Entry` is one record of a run's event stream (:mod:`actors.events.runs`):
``run_id``, ``seq``, ``name``, ``at`` and the record's other fields as a JSON ``body``,
with a ``checksum`` over all of them. :func:`entry_of` makes one from a record (a value
that JSON cannot carry is ``output_validation``); :func:`record_of` reads one back (a
checksum that does not match, a name no record has, or a body that does not fit the
record is ``event_log_corrupt`` naming the run and the ``seq``).

What JSON carries (at most 1,000,000 items and 200 levels in one value): ``dict``
with string keys, ``list``/``tuple`` (read back as ``list``; record fields typed as
tuples are tuples again), ``str``, ``int``, finite ``float``, ``bool``, ``None``. A
key that is not a string, a NaN or an infinity, a set or any other object is refused:
the journal keeps nothing it could not give back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

import attrs
import cattrs

from actors.errors import ActorError, Code
from actors.events import RECORDS, RunEvent

#: Run record classes by name (only these are journalled).
RUN_RECORDS: Final[Mapping[str, type[RunEvent]]] = {
    cls.name: cls for cls in RECORDS if issubclass(cls, RunEvent)
}
TERMINAL: Final = frozenset({"run:completed", "run:failed", "run:cancelled"})
#: The ``status`` a run's row takes from the record that ends it for good.
STATUS_OF: Final[Mapping[str, str]] = {
    "run:completed": "completed",
    "run:failed": "failed",
    "run:cancelled": "cancelled",
}


def ends_run(record: RunEvent) -> bool:
    """``record`` ends its run for good: a terminal record, except a ``run:cancelled``
    that is ``resumable`` (a daemon shutting down interrupted the run: the journal keeps
    it unfinished, and it is resumed after it)."""
    return record.name in TERMINAL and not getattr(record, "resumable", False)


_CONVERTER: Final = cattrs.Converter(forbid_extra_keys=True)
#: The fields an entry keeps in columns of its own, not in its body (``name`` is a
#: class constant of each record, not a field).
_COMMON: Final = ("run_id", "seq", "at")


@attrs.frozen(slots=True)
class Entry:
    """One stored record (see the module docstring)."""

    run_id: str
    seq: int
    name: str
    at: float
    #: The record's other fields, as compact JSON.
    body: str
    checksum: str


def checksum(run_id: str, seq: int, name: str, at: float, body: str) -> str:
    """The checksum of an entry's content (BLAKE2b, 16 bytes, hex)."""
    text = f"{run_id}\x1f{seq}\x1f{name}\x1f{at!r}\x1f{body}"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def header_checksum(
    run_id: str, workflow: str, definition: str, limits: str, started: float
) -> str:
    """The checksum of a run's header — what its row keeps besides its ending: the
    workflow's name and definition, the budget limits, the wall-clock start."""
    return checksum(run_id, -1, workflow, started, f"{definition}\x1e{limits}")


def checkpoint_checksum(run_id: str, seq: int, progress: str) -> str:
    """The checksum of a checkpoint taken after the record ``seq``."""
    return checksum(run_id, seq, "", 0.0, progress)


def _refuse(value: object) -> Any:
    if isinstance(value, Mapping):  # a read-only mapping: written as the object it shows
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")


#: The most containers and items one journalled value may hold (a value shared many
#: times over counts each time: JSON writes it out each time).
MAX_ITEMS: Final = 1_000_000
#: How deep one journalled value may nest.
MAX_DEPTH: Final = 200


def dumps(value: Any) -> str:
    """``value`` as compact JSON, or ``TypeError``/``ValueError`` when JSON cannot carry
    it exactly (see the module docstring) or it is larger than :data:`MAX_ITEMS` items
    or deeper than :data:`MAX_DEPTH` levels."""
    _check(value)
    return json.dumps(value, separators=(",", ":"), allow_nan=False, default=_refuse)


def _check(value: Any) -> None:
    """Refuse what json.dumps would accept wrongly (an int key becomes a string) or walk
    for ever (a value shared along 2**60 paths), before it runs."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    items = 0
    while stack:
        current, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(current, Mapping):
            children: Any = current.values()
            for key in current:
                if type(key) is not str:
                    raise TypeError(f"a key of type {type(key).__name__} is not JSON data")
        elif isinstance(current, list | tuple):
            children = current
        else:
            continue
        items += len(current)
        if items > MAX_ITEMS:
            raise ValueError(f"more than {MAX_ITEMS} items")
        stack.extend((child, depth + 1) for child in children if not _is_leaf(child))


def _is_leaf(value: Any) -> bool:
    kind = type(value)
    return kind is str or kind is int or kind is float or kind is bool or value is None


def entry_of(record: RunEvent, *, checked: bool = False) -> Entry:
    """``record`` as an entry; ``output_validation`` naming the run, ``seq`` and field
    when one of its values is not JSON data. ``checked``: its values were each checked
    by :func:`dumps` already (a run's final state holds every node's updates: it is not
    held to the per-value size limit again)."""
    fields = {
        field.name: getattr(record, field.name)
        for field in attrs.fields(type(record))
        if field.name not in _COMMON
    }
    try:
        body = (
            json.dumps(fields, separators=(",", ":"), allow_nan=False, default=_refuse)
            if checked
            else dumps(fields)
        )
    except (TypeError, ValueError, RecursionError) as exc:
        raise ActorError.from_code(
            Code.OUTPUT_VALIDATION,
            f"run {record.run_id!r} seq {record.seq} ({record.name}): not JSON data: {exc}",
            run_id=record.run_id,
            cause=exc,
        ) from exc
    return Entry(
        record.run_id,
        record.seq,
        record.name,
        record.at,
        body,
        checksum(record.run_id, record.seq, record.name, record.at, body),
    )


def corrupt(run_id: str, seq: int | None, what: str) -> ActorError:
    """``event_log_corrupt`` naming the run and the first bad ``seq``."""
    where = "" if seq is None else f" at seq {seq}"
    return ActorError.from_code(
        Code.EVENT_LOG_CORRUPT, f"run {run_id!r}: journal corrupt{where}: {what}", run_id=run_id
    )


def corrupt_seq(error: ActorError) -> int | None:
    """The first bad ``seq`` an ``event_log_corrupt`` of :func:`corrupt` names (``None``
    for another error, or one naming no ``seq``)."""
    if error.code is not Code.EVENT_LOG_CORRUPT:
        return None
    marker = " at seq "
    text = error.message
    if marker not in text:
        return None
    digits = text.split(marker, 1)[1].split(":", 1)[0]
    return int(digits) if digits.isdigit() else None


def record_of(entry: Entry) -> RunEvent:
    """The record an entry stores (``event_log_corrupt`` when it cannot be trusted)."""
    if entry.checksum != checksum(entry.run_id, entry.seq, entry.name, entry.at, entry.body):
        raise corrupt(entry.run_id, entry.seq, "checksum mismatch")
    cls = RUN_RECORDS.get(entry.name)
    if cls is None:
        raise corrupt(entry.run_id, entry.seq, f"unknown record {entry.name[:64]!r}")
    try:
        fields = json.loads(entry.body)
        if not isinstance(fields, dict):
            raise TypeError("the body is not an object")
        fields.update(run_id=entry.run_id, seq=entry.seq, at=entry.at)
        return _CONVERTER.structure(fields, cls)
    except Exception as exc:
        error = corrupt(entry.run_id, entry.seq, f"{entry.name} does not fit its record")
        raise error from exc
