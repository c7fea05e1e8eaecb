"""Every public name has a docstring and is in the API reference, which is current."""

from __future__ import annotations

import inspect
from pathlib import Path

from tests.reference import MODULES, doc_of, members, needs_doc, page, public_names

ROOT = Path(__file__).resolve().parent.parent


def test_every_public_class_and_function_has_a_docstring() -> None:
    missing = [
        f"{module}.{name}"
        for module in MODULES
        for name, obj in public_names(module)
        if needs_doc(obj) and not doc_of(obj).strip()
    ]
    assert missing == []


def test_every_public_method_and_property_has_a_docstring() -> None:
    missing = [
        f"{module}.{name}.{member}"
        for module in MODULES
        for name, obj in public_names(module)
        if inspect.isclass(obj)
        for member, value in members(obj)
        if not doc_of(value).strip()
    ]
    assert missing == []


def test_the_reference_page_is_current() -> None:
    written = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    assert written == page(), "regenerate: python -m tests.reference > docs/reference.md"


def test_every_public_name_is_on_the_reference_page() -> None:
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    absent = [
        f"{module}.{name}"
        for module in MODULES
        for name, _ in public_names(module)
        if f"`{name}" not in text and f"**`{name}" not in text
    ]
    assert absent == []


def test_internals_are_not_in_the_top_level_namespaces() -> None:
    import actors
    import supervisors

    for internal in ("ActorCell", "CellState", "AfterCrash", "Registry", "Supervision"):
        assert internal not in actors.__all__ and not hasattr(actors, internal), internal
    for internal in ("MemoryState", "StateBackend"):
        assert internal not in supervisors.__all__, internal
