"""The PostgreSQL store's session (issue 27): the bounds that keep a paused or lost
replica from stalling the fleet (:class:`PostgresTimeouts`), the store's connection
opened with them (:func:`connect`), and the driver errors that mean the database cannot
be used now (:func:`unavailable`).

PostgreSQL, by default, waits for a lock, for a client idle inside a transaction and
for a statement as long as they take: a replica paused (SIGSTOP, a frozen VM) between
two round trips of a transaction held its row lock until it woke, and another replica's
take-over waited 134 s for it. The store sends each write and each take as **one
statement** in its own transaction, so a replica paused anywhere in them holds nothing
(:mod:`actors.journal.postgres_write`). These settings bound everything else, on every
connection the store opens:

* ``lock_timeout``: a statement waits at most this long for a lock, then fails —
  ``persistence_unavailable``: the journal's writer retries the batch, a take-over is
  tried again at the next look for orphans.
* ``idle_in_transaction_session_timeout``: a session of the store idle this long inside
  a transaction (between two round trips of one: only the store's transactions of
  several statements have any — :meth:`prune <actors.journal.postgres.PostgresStore.prune>`,
  its first opening — never a write or a take) is ended by the server, and its locks
  released; the store reconnects on its next call.
* ``statement_timeout``: a statement runs at most this long.
* TCP keepalives and ``tcp_user_timeout``, on both ends of a TCP connection (the libpq
  parameters and the server's settings of the same names): a peer that vanished — its
  host down, the network cut — is given up after ``keepalives_idle + keepalives_interval
  * keepalives_count`` seconds of silence, or ``tcp_user_timeout`` seconds of data it did
  not acknowledge. A Unix-socket connection has none of this (nor needs it).

The defaults bound any stall to well within the default lease TTL (30 s,
``supervisors.runs.journal.policy.LEASE_TTL``): a lock wait 10 s, a paused session's
locks 10 s, a statement 30 s, a vanished peer 25 s. The server's settings are ``SET`` on
the connection once it is open (so a DSN's ``options`` and ``PGOPTIONS`` are kept).
"""

from __future__ import annotations

import math
from typing import Any, Final

import attrs

from actors.checks import int_at_least, seconds, validator
from actors.errors import ActorError, Code

#: The most seconds a setting may have: PostgreSQL's timeouts are whole milliseconds in
#: a 32-bit integer.
MAX_SECONDS: Final = 2_147_483
_MAX_COUNT: Final = 2_147_483_647


_seconds = validator(seconds(at_most=MAX_SECONDS))
_count = validator(int_at_least(1, at_most=_MAX_COUNT))


def _ms(seconds: float) -> int:
    """Whole milliseconds, rounded up: a tiny bound never becomes 0 (PostgreSQL's "no
    bound")."""
    return max(1, math.ceil(seconds * 1000))


def _whole(seconds: float) -> int:
    """Whole seconds, rounded up (keepalive settings have no finer unit)."""
    return max(1, math.ceil(seconds))


@attrs.frozen(kw_only=True)
class PostgresTimeouts:
    """The bounds of a :class:`~actors.journal.postgres.PostgresStore`'s session (see the
    module docstring), in seconds; ``config_invalid`` naming the field (the checks of
    :mod:`actors.checks`) for a bool, NaN, an infinite, zero, negative or too large
    value, or not a number.
    ``keepalives_idle`` and ``keepalives_interval`` are applied in whole seconds,
    rounded up; the others in milliseconds, rounded up."""

    lock_timeout: float = attrs.field(default=10.0, validator=_seconds)
    idle_in_transaction_session_timeout: float = attrs.field(default=10.0, validator=_seconds)
    statement_timeout: float = attrs.field(default=30.0, validator=_seconds)
    keepalives_idle: float = attrs.field(default=10.0, validator=_seconds)
    keepalives_interval: float = attrs.field(default=5.0, validator=_seconds)
    #: Unanswered keepalive probes before the peer is given up.
    keepalives_count: int = attrs.field(default=3, validator=_count)
    tcp_user_timeout: float = attrs.field(default=25.0, validator=_seconds)

    def libpq(self) -> dict[str, int]:
        """The client's side: libpq connection parameters (they override the DSN's)."""
        return {
            "keepalives": 1,
            "keepalives_idle": _whole(self.keepalives_idle),
            "keepalives_interval": _whole(self.keepalives_interval),
            "keepalives_count": self.keepalives_count,
            "tcp_user_timeout": _ms(self.tcp_user_timeout),
        }

    def settings(self) -> dict[str, int]:
        """The server's side: its settings for the session (milliseconds, except the
        keepalives' seconds and count)."""
        return {
            "lock_timeout": _ms(self.lock_timeout),
            "idle_in_transaction_session_timeout": _ms(self.idle_in_transaction_session_timeout),
            "statement_timeout": _ms(self.statement_timeout),
            "tcp_keepalives_idle": _whole(self.keepalives_idle),
            "tcp_keepalives_interval": _whole(self.keepalives_interval),
            "tcp_keepalives_count": self.keepalives_count,
            "tcp_user_timeout": _ms(self.tcp_user_timeout),
        }


def connect(dsn: str, timeouts: PostgresTimeouts) -> Any:
    """A psycopg connection to ``dsn`` in autocommit mode, with ``timeouts`` on both
    ends; ``persistence_unavailable`` naming only the error's type when it cannot be
    opened (a DSN's password never appears in it; the driver's error is its cause)."""
    import psycopg

    try:
        conninfo = psycopg.conninfo.make_conninfo(dsn, **timeouts.libpq())
        db = psycopg.connect(conninfo, autocommit=True)
    except psycopg.Error as exc:
        raise ActorError.from_code(
            Code.PERSISTENCE_UNAVAILABLE,
            f"cannot connect to the journal database ({type(exc).__name__})",
            cause=exc,
        ) from exc
    # Whole numbers, made here: nothing of a caller's text goes into this SQL.
    sql = "; ".join(f"SET {name} = {value}" for name, value in timeouts.settings().items())
    try:
        db.execute(sql)  # one simple query: one round trip
    except psycopg.Error as exc:
        db.close()
        raise ActorError.from_code(
            Code.PERSISTENCE_UNAVAILABLE,
            f"cannot set the journal database session's timeouts ({type(exc).__name__})",
            cause=exc,
        ) from exc
    return db


def unavailable(exc: Exception, db: Any) -> ActorError | None:
    """``persistence_unavailable`` (``exc`` its cause) when ``exc``, raised by the driver
    on ``db``, means the database cannot be used now — a lock or statement timeout, a
    session ended by the server (its idle-in-transaction timeout, a shutdown, an
    administrator), a lost connection, a serialization failure or deadlock; else
    ``None`` (a constraint violated, a bad statement: the caller's error, raised as it
    is). Names the error's type and SQLSTATE only."""
    import psycopg
    from psycopg import errors

    if not isinstance(exc, psycopg.Error):
        return None
    lost = db is None or db.closed
    if not (
        lost or isinstance(exc, psycopg.OperationalError | errors.IdleInTransactionSessionTimeout)
    ):
        return None
    state = f" {exc.sqlstate}" if exc.sqlstate else ""
    return ActorError.from_code(
        Code.PERSISTENCE_UNAVAILABLE,
        f"the journal database cannot be used now ({type(exc).__name__}{state}"
        f"{'; connection lost' if lost else ''})",
        cause=exc,
    )
