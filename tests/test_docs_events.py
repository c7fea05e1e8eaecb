"""docs/events.md must list every event record — name, class, level, fields and their
types — and nothing else."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import attrs

from actors.events import RECORDS

DOC = Path(__file__).resolve().parent.parent / "docs" / "events.md"
HEADING = re.compile(r"^### `(?P<name>[a-z_.:]+)` — `(?P<cls>[A-Za-z]+)`$")
LEVEL = re.compile(r"^Level: `(?P<level>[a-z]+)`\.")
ROW = re.compile(r"^\| `(?P<field>[a-z_]+)` \| `(?P<type>(?:[^`])+)` \| (?P<meaning>.+) \|$")

Entry = tuple[str, str, tuple[tuple[str, str], ...]]


def _documented() -> dict[str, Entry]:
    """name -> (class, level, ((field, type), ...)) as docs/events.md lists them."""
    entries: dict[str, Entry] = {}
    current: str | None = None
    cls = level = ""
    fields: list[tuple[str, str]] = []

    def close() -> None:
        if current is not None:
            assert current not in entries, f"{current} is listed twice"
            entries[current] = (cls, level, tuple(fields))

    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            close()
            current = None
            heading = HEADING.match(line)
            if heading:
                current, cls, level, fields = heading["name"], heading["cls"], "", []
        elif current is not None:
            if (match := LEVEL.match(line)) and not level:
                level = match["level"]
            elif match := ROW.match(line):
                fields.append((match["field"], match["type"].replace("\\|", "|")))
    close()
    return entries


def _type_text(annotation: object) -> str:
    """A field's type as written in its class — also once something (cattrs, when a
    record is read back) has resolved the annotations to the types themselves."""
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type) and not getattr(annotation, "__args__", None):
        return annotation.__name__
    text = str(annotation)
    for module in ("collections.abc.", "typing."):
        text = text.replace(module, "")
    return text


def _expected() -> dict[str, Entry]:
    return {
        record.name: (
            record.__name__,
            logging.getLevelName(record.level).lower(),
            tuple((field.name, _type_text(field.type)) for field in attrs.fields(record)),
        )
        for record in RECORDS
    }


def test_every_record_is_listed_and_no_other() -> None:
    assert sorted(_documented()) == sorted(_expected())


def test_each_listing_matches_its_record() -> None:
    documented = _documented()
    for name, expected in _expected().items():
        assert documented.get(name) == expected, name
