"""How :class:`~actors.journal.postgres.PostgresStore` writes a batch and takes a lease:
**each is one statement** (:data:`WRITE`, :data:`TAKE`), run in its own transaction
(the connection is in autocommit mode) and sent with its ``Sync`` in one go — one round
trip. So the server never waits for the replica in the middle of a write or a take: a
replica paused anywhere (before sending, or after, its answer unread) holds no lock,
and what it sent runs to its end without it (issue 27).

Why one statement and not a transaction of several: PostgreSQL stops its statement and
idle-in-transaction timers between the messages of a pipeline (until its ``Sync``), so
a replica paused in the middle of a pipelined transaction would hold its locks, bounded
by nothing, until it woke.

**Fencing in one statement.** :data:`WRITE` share-locks the one-row epoch (every
take-over of an existing lease bumps it under its row lock, :data:`TAKE`), finds the
fenced runs — those of ``batch.fences`` whose lease row no longer has the writer's
holder and token — and writes the batch's rows except theirs, returning
``(locked, seen, fenced)``. The lease rows are read with the statement's snapshot,
taken *before* the epoch's lock was granted: a take-over committed while the write
waited for that lock would be missed. So the write compares the epoch it locked (the
row's latest version) with the epoch of its snapshot (``seen``): equal, no take-over
committed since the snapshot, and none can until the write commits — the fences are
exact; different, nothing is written and the store sends the statement again (a new
snapshot). A take-over and a write never interleave: a write is entirely before a
take-over, or sees it.

A run's header and its ending in one batch are one row inserted (the ending's fields in
it): one statement's parts do not see each other's rows, so an update of that new row
would find nothing. Within a batch, the last ending of a run wins and the checkpoint
with the highest ``seq`` (the first of equals) — what writing them one after another
gave; entries and headers already stored are kept as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from actors.journal.store import Batch, Checkpoint, RunEnding, RunHeader

#: The write (see the module docstring); parameters :func:`write_params`.
WRITE: Final = """WITH
locked AS (SELECT epoch FROM journal_epoch WHERE id = 1 FOR SHARE),
seen AS (SELECT epoch FROM journal_epoch WHERE id = 1),
go AS (SELECT COALESCE((SELECT epoch FROM locked) = (SELECT epoch FROM seen), false) AS go),
fenced AS (
  SELECT f.run_id
  FROM unnest(%(f_run)s::text[], %(f_holder)s::text[], %(f_token)s::bigint[])
    AS f(run_id, holder, token)
  WHERE NOT EXISTS (SELECT 1 FROM journal_leases l WHERE l.run_id = f.run_id
    AND l.holder = f.holder AND l.token = f.token)
),
ending AS (
  SELECT * FROM unnest(%(e_run)s::text[], %(e_status)s::text[], %(e_code)s::text[],
    %(e_ended)s::float8[], %(e_duration)s::float8[], %(e_tokens)s::bigint[],
    %(e_cost)s::float8[]) AS e(run_id, status, code, ended, duration, tokens, cost)
  WHERE (SELECT go FROM go) AND e.run_id NOT IN (SELECT run_id FROM fenced)
),
headers AS (
  INSERT INTO journal_runs (run_id, workflow, definition, limits, started, checksum,
    status, code, ended, duration, tokens, cost)
  SELECT h.run_id, h.workflow, h.definition, h.limits, h.started, h.checksum,
    COALESCE(e.status, 'running'), e.code, e.ended, e.duration, COALESCE(e.tokens, 0),
    COALESCE(e.cost, 0)
  FROM unnest(%(h_run)s::text[], %(h_workflow)s::text[], %(h_definition)s::text[],
    %(h_limits)s::text[], %(h_started)s::float8[], %(h_checksum)s::text[])
    AS h(run_id, workflow, definition, limits, started, checksum)
  LEFT JOIN ending e ON e.run_id = h.run_id
  WHERE (SELECT go FROM go) AND h.run_id NOT IN (SELECT run_id FROM fenced)
  ON CONFLICT (run_id) DO NOTHING
),
events AS (
  INSERT INTO journal_events (run_id, seq, name, at, body, checksum)
  SELECT v.run_id, v.seq, v.name, v.at, v.body, v.checksum
  FROM unnest(%(v_run)s::text[], %(v_seq)s::bigint[], %(v_name)s::text[],
    %(v_at)s::float8[], %(v_body)s::text[], %(v_checksum)s::text[])
    AS v(run_id, seq, name, at, body, checksum)
  WHERE (SELECT go FROM go) AND v.run_id NOT IN (SELECT run_id FROM fenced)
  ON CONFLICT (run_id, seq) DO NOTHING
),
endings AS (
  UPDATE journal_runs AS r SET status = e.status, code = e.code, ended = e.ended,
    duration = e.duration, tokens = e.tokens, cost = e.cost
  FROM ending e WHERE r.run_id = e.run_id
),
checkpoints AS (
  INSERT INTO journal_checkpoints (run_id, seq, progress, checksum)
  SELECT c.run_id, c.seq, c.progress, c.checksum
  FROM unnest(%(c_run)s::text[], %(c_seq)s::bigint[], %(c_progress)s::text[],
    %(c_checksum)s::text[]) AS c(run_id, seq, progress, checksum)
  WHERE (SELECT go FROM go) AND c.run_id NOT IN (SELECT run_id FROM fenced)
  ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, progress = excluded.progress,
    checksum = excluded.checksum WHERE excluded.seq > journal_checkpoints.seq
)
SELECT (SELECT epoch FROM locked), (SELECT epoch FROM seen), ARRAY(SELECT run_id FROM fenced)"""

#: A take (see :meth:`~actors.journal.postgres.PostgresStore.take_lease`): the lease
#: row, then — a take-over of an existing lease, token > 1 — the epoch bumped, in that
#: order (the bump reads the take's result), in one statement.
TAKE: Final = (
    "WITH taken AS (INSERT INTO journal_leases (run_id, holder, token, expires)"
    " VALUES (%s, %s, 1, clock_timestamp() + %s * interval '1 second')"
    " ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder,"
    " token = journal_leases.token + 1, expires = excluded.expires"
    " WHERE journal_leases.expires < clock_timestamp()"
    " OR journal_leases.holder = excluded.holder"
    " RETURNING token),"
    " bumped AS (UPDATE journal_epoch SET epoch = epoch + 1"
    " WHERE id = 1 AND (SELECT token FROM taken) > 1)"
    " SELECT token FROM taken"
)


def _texts(values: Iterable[str | None]) -> str:
    """The text form of a ``text[]``: each element double-quoted with ``\\`` and ``"``
    escaped, ``None`` as ``NULL``. Sent as a parameter, never spliced into SQL; built
    here because the driver's adaptation of a list costs more than the whole write."""
    return (
        "{"
        + ",".join(
            [
                "NULL" if v is None else '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
                for v in values
            ]
        )
        + "}"
    )


def _floats(values: Iterable[float | None]) -> str:
    """The text form of a ``float8[]`` (``repr``: the shortest exact decimal)."""
    return "{" + ",".join(["NULL" if v is None else repr(float(v)) for v in values]) + "}"


def _ints(values: Iterable[int]) -> str:
    """The text form of a ``bigint[]``."""
    return "{" + ",".join([str(int(v)) for v in values]) + "}"


def write_params(batch: Batch) -> dict[str, str]:
    """:data:`WRITE`'s parameters for ``batch``: one array per column (see the module
    docstring for what is kept of a run's several endings, checkpoints or headers)."""
    headers: dict[str, RunHeader] = {}
    for h in batch.headers:
        headers.setdefault(h.run_id, h)
    endings: dict[str, RunEnding] = {e.run_id: e for e in batch.endings}
    points: dict[str, Checkpoint] = {}
    for c in batch.checkpoints:
        kept = points.get(c.run_id)
        if kept is None or c.seq > kept.seq:
            points[c.run_id] = c
    fences = batch.fences
    hs, es, cs, vs = headers.values(), endings.values(), points.values(), batch.entries
    return {
        "f_run": _texts(fences),
        "f_holder": _texts([holder for holder, _ in fences.values()]),
        "f_token": _ints([token for _, token in fences.values()]),
        "e_run": _texts([e.run_id for e in es]),
        "e_status": _texts([e.status for e in es]),
        "e_code": _texts([e.code for e in es]),
        "e_ended": _floats([e.ended for e in es]),
        "e_duration": _floats([e.duration for e in es]),
        "e_tokens": _ints([e.tokens for e in es]),
        "e_cost": _floats([e.cost for e in es]),
        "h_run": _texts([h.run_id for h in hs]),
        "h_workflow": _texts([h.workflow for h in hs]),
        "h_definition": _texts([h.definition for h in hs]),
        "h_limits": _texts([h.limits for h in hs]),
        "h_started": _floats([h.started for h in hs]),
        "h_checksum": _texts([h.checksum for h in hs]),
        "v_run": _texts([v.run_id for v in vs]),
        "v_seq": _ints([v.seq for v in vs]),
        "v_name": _texts([v.name for v in vs]),
        "v_at": _floats([v.at for v in vs]),
        "v_body": _texts([v.body for v in vs]),
        "v_checksum": _texts([v.checksum for v in vs]),
        "c_run": _texts([c.run_id for c in cs]),
        "c_seq": _ints([c.seq for c in cs]),
        "c_progress": _texts([c.progress for c in cs]),
        "c_checksum": _texts([c.checksum for c in cs]),
    }
