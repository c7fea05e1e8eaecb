"""An incremental Server-Sent Events parser (the WHATWG event-stream rules).

Feed it bytes as they arrive, in any chunking; it returns the events completed so far.
The result does not depend on how the stream was cut into chunks.

* Lines end with CRLF, LF or CR — a CR at the end of one chunk and an LF at the start of
  the next are one line break.
* A line starting with ``:`` is a comment (keep-alive pings) and is ignored.
* ``field: value`` — one space after the colon is dropped; a line without a colon is a
  field with an empty value. Fields: ``event``, ``data`` (several ``data:`` lines join
  with ``\\n``), ``id``, ``retry``; others are ignored. ``retry`` is read only when its
  value is ASCII digits (``0``-``9``; not ``²``, not a sign), at most
  :data:`MAX_RETRY_DIGITS` of them — anything else is ignored, as the rules say for a
  value that is not digits (a longer one would be an absurd delay anyway).
* A blank line dispatches the event; an event with no ``data`` is not dispatched.
* An ``id`` holding a NUL is ignored, as the rules say.
* Invalid UTF-8 or an event larger than ``max_event_bytes`` raises
  ``malformed_response`` — never an uncaught exception. The events a chunk completes
  before an invalid byte are returned first, and the error is raised by the next
  :meth:`SseParser.feed` or :meth:`SseParser.close` — so a stream's terminator followed
  by junk in the same chunk still arrives (the reader stops there). :meth:`SseParser.close` tells
  whether the stream ended in the middle of an event.
"""

from __future__ import annotations

import codecs

import attrs

from actors.errors import ActorError, Code

DEFAULT_MAX_EVENT_BYTES = 1 << 20
#: The longest ``retry`` value read (milliseconds; 18 digits is over 31 million years).
MAX_RETRY_DIGITS = 18


@attrs.frozen
class SseEvent:
    """One dispatched event."""

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


class SseParser:
    """Incremental SSE parsing; see the module docstring."""

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._max = max_event_bytes
        self._line = ""  # the unfinished line
        self._skip_lf = False  # the previous chunk ended with CR
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None
        self._size = 0
        self._dirty = False  # a field of an unfinished event was seen
        self._failure: ActorError | None = None  # invalid UTF-8, raised by the next call

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Parse ``chunk``; return the events it completed (see the module docstring for
        invalid UTF-8)."""
        if self._failure is not None:
            raise self._failure
        try:
            text = self._decoder.decode(chunk)
        except UnicodeDecodeError as exc:
            failure = ActorError.from_code(
                Code.MALFORMED_RESPONSE, f"event stream is not UTF-8: {exc.reason}", cause=exc
            )
            # exc.object is what the decoder held from earlier chunks plus this one.
            events = self._text(bytes(exc.object[: exc.start]).decode("utf-8"))
            if not events:
                raise failure from exc
            self._failure = failure
            return events
        return self._text(text)

    def close(self) -> bool:
        """End of input: ``True`` if the stream stopped in the middle of an event or line
        (the unfinished event is dropped, as the rules say)."""
        if self._failure is not None:
            raise self._failure
        try:
            rest = self._decoder.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise ActorError.from_code(
                Code.MALFORMED_RESPONSE, "event stream ends inside a UTF-8 sequence"
            ) from exc
        return bool(rest or self._line or self._dirty)

    def _text(self, text: str) -> list[SseEvent]:
        events: list[SseEvent] = []
        start = 0
        if self._skip_lf and text.startswith("\n"):
            start = 1
        self._skip_lf = False
        length = len(text)
        while start < length:
            cr = text.find("\r", start)
            lf = text.find("\n", start)
            if cr == -1 and lf == -1:
                self._append(text[start:])
                break
            if cr == -1 or (lf != -1 and lf < cr):
                end, next_start = lf, lf + 1
            else:
                end = cr
                if cr + 1 < length:
                    next_start = cr + 2 if text[cr + 1] == "\n" else cr + 1
                else:
                    next_start = cr + 1
                    self._skip_lf = True
            self._append(text[start:end])
            line, self._line = self._line, ""
            event = self._process(line)
            if event is not None:
                events.append(event)
            start = next_start
        return events

    def _append(self, piece: str) -> None:
        self._line += piece
        if len(self._line) + self._size > self._max:
            raise ActorError.from_code(
                Code.MALFORMED_RESPONSE, f"event larger than {self._max} bytes"
            )

    def _process(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        self._size += len(line)
        self._dirty = True
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\x00" not in value:
                self._id = value
        elif field == "retry" and _ascii_digits(value):
            self._retry = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        data, event = self._data, self._event
        self._data, self._event, self._size, self._dirty = [], "", 0, False
        if not data:
            return None
        return SseEvent(
            event=event or "message", data="\n".join(data), id=self._id, retry=self._retry
        )


def _ascii_digits(value: str) -> bool:
    """Whether ``value`` is 1 to :data:`MAX_RETRY_DIGITS` ASCII digits (``str.isdigit``
    alone also accepts ``²`` and other digits ``int()`` refuses)."""
    return 0 < len(value) <= MAX_RETRY_DIGITS and value.isascii() and value.isdigit()
