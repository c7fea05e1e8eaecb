"""docs/errors.md must agree with the code table and the default directives."""

from __future__ import annotations

import re
from pathlib import Path

from actors import CODE_TABLE, Code, http_status
from supervisors import default_directive

DOC = Path(__file__).resolve().parent.parent / "docs" / "errors.md"
ROW = re.compile(
    r"^\| `(?P<code>[a-z_]+)` \| (?P<cls>[a-z_]+) \| (?P<retry>yes|no) \| (?P<dir>[^|]+) \| (?P<msg>[^|]+) \|$"
)


def _doc_rows() -> dict[str, tuple[str, str, str, str]]:
    section = DOC.read_text().split("## The code table", 1)[1]
    rows: dict[str, tuple[str, str, str, str]] = {}
    for line in section.splitlines():
        match = ROW.match(line.strip())
        if match:
            assert match["code"] not in rows, f"duplicate row for {match['code']}"
            rows[match["code"]] = (
                match["cls"],
                match["retry"],
                match["dir"].strip(),
                match["msg"].strip(),
            )
    return rows


def _expected() -> dict[str, tuple[str, str, str, str]]:
    expected = {}
    for code, row in CODE_TABLE.items():
        directive = default_directive(code)
        expected[str(code)] = (
            str(row.error_class),
            "yes" if row.retryable else "no",
            str(directive) if directive else "— (cancellation path)",
            row.user_message,
        )
    return expected


def test_docs_table_matches_code_table() -> None:
    assert _doc_rows() == _expected()


def test_every_code_has_exactly_one_row() -> None:
    assert set(_doc_rows()) == {str(c) for c in Code}


def test_every_marker_phrase_is_documented() -> None:
    """The classification table names every phrase that picks a code (http_status)."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "errors.md").read_text()
    phrases = [
        *http_status.CONTEXT_MARKERS,
        *http_status.CONTENT_MARKERS,
        *http_status.CONTENT_WORDS,
    ]
    assert [p for p in phrases if f'"{p}"' not in text] == []
