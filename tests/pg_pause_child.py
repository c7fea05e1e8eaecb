"""The replica the pause test (tests/test_journal_pg_pause.py) stops and resumes: a
``PostgresStore`` with short bounds, holder ``A``, driven one command per line of its
standard input; every answer one JSON line on its standard output.

``python -m tests.pg_pause_child DSN`` prints ``{"ready": PID}`` (PID: its session's
backend on the server), then for each command:

* ``take RUN TTL`` — ``{"sending": PID}``, then ``{"token": N}`` (``null``: not taken);
* ``write RUN SEQ TOKEN`` — one entry of body ``{"by":"A"}`` fenced with ``(A, TOKEN)``:
  ``{"sending": PID}``, then ``{"fenced": [RUN...]}``;
* ``hold_share`` — what a write's first round trip was before issue 27 (its transaction
  begun, the epoch share-locked), then nothing: ``{"held": PID}``;
* ``hold_take RUN TTL`` — a take-over in several round trips (the lease row, the epoch
  bumped), left uncommitted: ``{"held": PID}``;
* ``quit``.

An ``ActorError`` is answered ``{"error": CODE, "message": ...}``. The parent stops the
process (SIGSTOP) at a boundary it sees on the server or in these lines, and resumes it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from actors import ActorError
from actors.journal import Batch, Entry, PostgresStore, PostgresTimeouts

TIMEOUTS = PostgresTimeouts(
    lock_timeout=1.0, idle_in_transaction_session_timeout=1.0, statement_timeout=5.0
)
HOLDER = "A"
#: A take as it was before issue 27: the first of several statements in a transaction.
OLD_TAKE = (
    "INSERT INTO journal_leases (run_id, holder, token, expires)"
    " VALUES (%s, %s, 1, clock_timestamp() + %s * interval '1 second')"
    " ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder,"
    " token = journal_leases.token + 1, expires = excluded.expires"
    " WHERE journal_leases.expires < clock_timestamp()"
    " OR journal_leases.holder = excluded.holder RETURNING token"
)


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def run(store: PostgresStore, command: str, args: list[str]) -> bool:
    """Carry out one command; ``False`` for ``quit``."""
    if command == "take":
        run_id, ttl = args
        say(sending=store.db.info.backend_pid)
        say(token=store.take_lease(run_id, HOLDER, float(ttl)))
    elif command == "write":
        run_id, seq, token = args
        entry = Entry(run_id, int(seq), "node:completed", float(seq), '{"by":"A"}', "a")
        batch = Batch(entries=[entry], fences={run_id: (HOLDER, int(token))})
        say(sending=store.db.info.backend_pid)
        say(fenced=sorted(store.write(batch)))
    elif command == "hold_share":
        db = store.db
        db.execute("BEGIN")
        db.execute("SELECT epoch FROM journal_epoch WHERE id = 1 FOR SHARE")
        say(held=db.info.backend_pid)
    elif command == "hold_take":
        run_id, ttl = args
        db = store.db
        db.execute("BEGIN")
        db.execute(OLD_TAKE, (run_id, HOLDER, float(ttl)))
        db.execute("UPDATE journal_epoch SET epoch = epoch + 1 WHERE id = 1")
        say(held=db.info.backend_pid)
    else:
        return command != "quit"
    return True


def main() -> None:
    store = PostgresStore(sys.argv[1], timeouts=TIMEOUTS)
    say(ready=store.db.info.backend_pid)
    try:
        for line in sys.stdin:
            command, *args = line.split()
            try:
                if not run(store, command, args):
                    break
            except ActorError as exc:
                say(error=exc.code, message=str(exc))
    finally:
        store.close()


if __name__ == "__main__":
    main()
