"""``python -m actors runs …``: look inside a run journal (docs/journal.md, "The CLI").

* ``runs list [--status S]`` — a table of runs: id, workflow, status (a failed run's
  code after a slash), started (UTC), duration, tokens, cost, events;
* ``runs show RUN`` — the run's summary, then one line per record (``seq``, seconds
  since ``run:started``, the record's name and its facts: node, execution/attempt,
  code, duration …), then a failed run's user-safe message and correlation id;
* ``runs tail RUN [-f] [--interval S]`` — as ``show``; with ``-f`` it keeps reading new
  records until the run's terminal record;
* ``runs resume RUN --app MODULE:CALLABLE`` — resumes the run through the daemon's own
  entry point, ``async def resume(journal_path, run_id) -> str`` (the workflows are code:
  the journal cannot run them by itself); prints ``RUN: STATUS``;
* ``runs prune --older-than AGE`` — deletes runs that ended more than ``AGE`` ago
  (``30s``, ``15m``, ``12h``, ``7d``);
* ``runs verify`` — checks every run's stored data (:func:`actors.journal.sound`: the
  record chain, the checksums, the row against its records, the checkpoint) and prints
  one line per damaged run: ``RUN  seq N  what``; then ``N runs, M damaged``.

Every command takes ``--journal PATH`` (default ``runs.journal``). Exit codes: 0; 1 for
a record that fails its checks (``show``/``tail`` print it as ``CORRUPT`` and go on),
for a damaged run (``verify``) and for a resumed run that did not complete; 2 with one
line on stderr for a missing file, a file that is not a journal, a file too damaged to
read, an unknown run, or bad arguments. Text that the terminal cannot show (a garbled
byte) is printed escaped. Output is plain text in
aligned columns — stable for scripts and ``grep`` — so no terminal library is needed.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn, TextIO

from actors.errors import ActorError
from actors.journal.integrity import damaged
from actors.journal.records import Entry, corrupt_seq, ends_run, record_of
from actors.journal.sqlite import SqliteStore
from actors.journal.store import RunRow
from actors.journal.writer import DEFAULT_PATH

PROG = "python -m actors"
_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class CliError(Exception):
    """A one-line error: printed, exit code 2."""


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code."""
    if out is None:
        for stream in (sys.stdout, sys.stderr):  # a garbled id prints escaped, not a traceback
            if hasattr(stream, "reconfigure"):
                stream.reconfigure(errors="backslashreplace")
        out = sys.stdout
    args = _parser().parse_args(argv)
    try:
        return int(args.handler(args, out))
    except CliError as error:
        print(f"{PROG} runs: error: {error}", file=sys.stderr)
        return 2
    except ActorError as error:
        print(f"{PROG} runs: error: {error.message}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - the last resort: one line, never a traceback
        print(f"{PROG} runs: error: {type(error).__name__}: {error}"[:500], file=sys.stderr)
        return 2


class _Parser(argparse.ArgumentParser):
    """argparse, its errors in one line on stderr (exit 2) like the CLI's own."""

    def error(self, message: str) -> NoReturn:
        print(f"{PROG} runs: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Tools of resilient-actors.")
    groups = parser.add_subparsers(dest="group", required=True)
    runs = groups.add_parser("runs", help="look inside a run journal")
    commands = runs.add_subparsers(dest="command", required=True)
    journal = _Parser(add_help=False)
    journal.add_argument(
        "--journal", default=DEFAULT_PATH, help=f"the journal file (default {DEFAULT_PATH})"
    )
    listing = commands.add_parser("list", parents=[journal], help="the runs, as a table")
    listing.add_argument("--status", choices=("running", "completed", "failed", "cancelled"))
    listing.set_defaults(handler=_list)
    show = commands.add_parser("show", parents=[journal], help="one run's records")
    show.add_argument("run")
    show.set_defaults(handler=_show)
    tail = commands.add_parser("tail", parents=[journal], help="a run's records, live")
    tail.add_argument("run")
    tail.add_argument("-f", "--follow", action="store_true", help="wait for new records")
    tail.add_argument("--interval", type=float, default=0.5, help="seconds between reads")
    tail.set_defaults(handler=_tail)
    resume = commands.add_parser("resume", parents=[journal], help="resume an unfinished run")
    resume.add_argument("run")
    resume.add_argument("--app", help="MODULE:CALLABLE, the daemon's resume entry point")
    resume.set_defaults(handler=_resume)
    prune = commands.add_parser("prune", parents=[journal], help="delete old finished runs")
    prune.add_argument("--older-than", required=True, help="30s, 15m, 12h or 7d")
    prune.set_defaults(handler=_prune)
    verify = commands.add_parser("verify", parents=[journal], help="list the damaged runs")
    verify.set_defaults(handler=_verify)
    return parser


def _open(path: str, *, writing: bool = False) -> SqliteStore:
    """The journal at ``path``, read-only unless ``writing`` (``prune``)."""
    return SqliteStore(path, create=False, read_only=not writing)


def _run_row(store: SqliteStore, run_id: str, path: str) -> RunRow:
    row = store.run(run_id)
    if row is None:
        raise CliError(f"no run {run_id!r} in {path}")
    return row


# -- list -------------------------------------------------------------------------------


def _list(args: argparse.Namespace, out: TextIO) -> int:
    store = _open(args.journal)
    try:
        rows = [row for row in store.runs() if args.status in (None, row.status)]
    finally:
        store.close()
    table: list[tuple[str, ...]] = [
        ("RUN", "WORKFLOW", "STATUS", "STARTED", "DURATION", "TOKENS", "COST", "EVENTS")
    ]
    table.extend(_cells(row) for row in rows)
    _print_table(table, out, right=(4, 5, 6, 7))
    print(f"{len(rows)} run{'' if len(rows) == 1 else 's'}", file=out)
    return 0


def _print_table(table: Sequence[Sequence[str]], out: TextIO, right: tuple[int, ...]) -> None:
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for line in table:
        cells = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        ]
        print("  ".join(cells).rstrip(), file=out)


def _cells(row: RunRow) -> tuple[str, ...]:
    """One line of ``list``."""
    return (
        str(row.run_id),
        str(row.workflow),
        str(row.status) if row.code is None else f"{row.status}/{row.code}",
        _cell(lambda: _when(row.started)),
        "" if row.duration is None else _cell(lambda: f"{row.duration:.2f}s"),
        str(row.tokens),
        _cell(lambda: f"${row.cost:.6f}"),
        str(row.events),
    )


def _cell(render: Callable[[], str]) -> str:
    """A cell, or ``?`` for a stored value of the wrong kind (a damaged row)."""
    try:
        return render()
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def _when(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- show and tail ----------------------------------------------------------------------


def _show(args: argparse.Namespace, out: TextIO) -> int:
    return _records(args.journal, args.run, out, follow=None)


def _tail(args: argparse.Namespace, out: TextIO) -> int:
    if not args.interval > 0:
        raise CliError("--interval must be seconds > 0")
    return _records(args.journal, args.run, out, follow=args.interval if args.follow else None)


def _records(path: str, run_id: str, out: TextIO, *, follow: float | None) -> int:
    """The run's summary and records; with ``follow``, new records every ``follow``
    seconds until the terminal one."""
    store = _open(path)
    try:
        row = _run_row(store, run_id, path)
        _summary(row, out)
        printer = _Printer(out)
        printer.print(store.entries(row.run_id))
        while follow is not None and not printer.ended:
            out.flush()
            time.sleep(follow)
            printer.print(store.entries(row.run_id, after=printer.last))
    finally:
        store.close()
    printer.failure()
    return 1 if printer.corrupt else 0


def _summary(row: RunRow, out: TextIO) -> None:
    status = row.status if row.code is None else f"{row.status} ({row.code})"
    duration = "" if row.duration is None else _cell(lambda: f"  duration {row.duration:.2f}s")
    print(
        f"run {row.run_id}  workflow {row.workflow}  status {status}  started "
        f"{_cell(lambda: _when(row.started))}{duration}  tokens {row.tokens}  cost "
        f"{_cell(lambda: f'${row.cost:.6f}')}",
        file=out,
    )


class _Printer:
    """Prints records one per line, remembering where it is."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.last = -1
        self.origin: float | None = None
        self.ended = False
        self.corrupt = False
        self.failed: Any = None

    def print(self, entries: list[Entry]) -> None:
        for entry in entries:
            self.last = entry.seq
            try:
                record = record_of(entry)
            except ActorError as error:
                self.corrupt = True
                print(f"{entry.seq:>5}  CORRUPT  {error.message}", file=self.out)
                continue
            if self.origin is None:
                self.origin = record.at
            facts = _DETAILS.get(record.name, _nothing)(record)
            line = f"{record.seq:>5}  {record.at - self.origin:>9.3f}  {record.name:<19} {facts}"
            print(line.rstrip(), file=self.out)
            if record.name == "run:failed":
                self.failed = record
            if ends_run(record):
                self.ended = True

    def failure(self) -> None:
        if self.failed is not None:
            print(
                f"failure: {self.failed.code}: {self.failed.message} "
                f"(correlation id {self.failed.correlation_id})",
                file=self.out,
            )


def _nothing(record: Any) -> str:
    return ""


def _attempt(record: Any) -> str:
    return f"{record.node_id} #{record.execution}.{record.attempt}"


_DETAILS: dict[str, Callable[[Any], str]] = {
    "run:started": lambda r: f"workflow={r.workflow} inputs={','.join(r.inputs) or '-'}",
    "run:resumed": lambda r: (
        f"in_flight={','.join(r.in_flight) or '-'} ready={','.join(r.ready) or '-'} "
        f"pending={','.join(r.pending) or '-'}"
    ),
    "node:started": lambda r: f"{_attempt(r)} {r.kind}",
    "node:retrying": lambda r: f"{_attempt(r)} {r.code} retry in {r.delay:g}s",
    "node:completed": lambda r: (
        f"{_attempt(r)} {r.duration:.3f}s wrote={','.join(r.updates) or '-'} "
        f"next={','.join(r.next) or '-'}"
    ),
    "node:failed": lambda r: (
        f"{_attempt(r)} {r.code} {'handled' if r.handled else 'unhandled'} "
        f"next={','.join(r.next) or '-'}"
    ),
    "node:skipped": lambda r: f"{r.node_id} {r.code} next={','.join(r.next) or '-'}",
    "tool:called": lambda r: f"{r.node_id} {r.tool} key={r.key} {r.code}",
    "budget:warning": lambda r: f"{r.dimension} {r.used:g}/{r.limit:g}",
    "budget:paused": lambda r: f"{r.dimension} {r.used:g}/{r.limit:g}",
    "approval:requested": lambda r: f"{r.node_id or 'budget'} {r.prompt!r}",
    "approval:decided": lambda r: f"{r.node_id or 'budget'} {r.decision} by {r.by}",
    "run:completed": lambda r: f"{r.duration:.3f}s tokens={r.tokens} cost=${r.cost:.6f}",
    "run:failed": lambda r: f"{r.code} node={r.node_id or '-'} {r.duration:.3f}s",
    "run:cancelled": lambda r: (
        f"reason={r.reason!r} in_flight={','.join(r.in_flight) or '-'}"
        + (" resumable" if r.resumable else "")
    ),
}


# -- resume and prune -------------------------------------------------------------------


def _resume(args: argparse.Namespace, out: TextIO) -> int:
    if not args.app:
        raise CliError(
            "resume needs the daemon's entry point: --app MODULE:CALLABLE "
            "(the workflows are code, not in the journal)"
        )
    store = _open(args.journal)
    try:
        row = _run_row(store, args.run, args.journal)
    finally:
        store.close()
    if row.status != "running":
        raise CliError(f"run {row.run_id!r} has ended ({row.status})")
    entry = _entry_point(args.app)
    import trio

    status = trio.run(entry, args.journal, row.run_id)
    print(f"{row.run_id}: {status}", file=out)
    return 0 if status == "completed" else 1


def _entry_point(app: str) -> Callable[..., Any]:
    module_name, _, name = app.partition(":")
    if not module_name or not name:
        raise CliError(f"--app must be MODULE:CALLABLE, got {app!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise CliError(f"cannot import {module_name!r}: {error}") from error
    entry: Any = getattr(module, name, None)
    if not callable(entry):
        raise CliError(f"{app!r} is not a callable")
    return entry  # type: ignore[no-any-return]


def _prune(args: argparse.Namespace, out: TextIO) -> int:
    match = _AGE.match(args.older_than)
    seconds = float(match[1]) * _UNIT[match[2]] if match else 0.0
    if not seconds > 0:
        raise CliError(
            f"--older-than must be an age like 30s, 15m, 12h or 7d, got {args.older_than!r}"
        )
    store = _open(args.journal, writing=True)
    try:
        pruned = store.prune(time.time() - seconds)
    finally:
        store.close()
    print(f"pruned {pruned} run{'' if pruned == 1 else 's'}", file=out)
    return 0


# -- verify -----------------------------------------------------------------------------


def _verify(args: argparse.Namespace, out: TextIO) -> int:
    store = _open(args.journal)
    try:
        count = len(store.tails())
        found = damaged(store)
    finally:
        store.close()
    for error in found:
        seq = corrupt_seq(error)
        where = "-" if seq is None else f"seq {seq}"
        what = error.message.split("journal corrupt", 1)[-1].split(": ", 1)[-1]
        print(f"{error.run_id}  {where}  {what}", file=out)
    print(f"{count} run{'' if count == 1 else 's'}, {len(found)} damaged", file=out)
    return 1 if found else 0
