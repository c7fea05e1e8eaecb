"""The API reference (docs/reference.md), generated from the public names and their
docstrings: ``python -m tests.reference > docs/reference.md``.

The public API is every name in the ``__all__`` of the modules in :data:`MODULES`. For
each: its kind, its signature, and the first paragraph of its docstring; for a class,
its public methods and properties the same way. ``tests/test_reference.py`` checks that
every one of them has a docstring and that the page is up to date.
"""

from __future__ import annotations

import enum
import importlib
import inspect
from collections.abc import Iterator
from typing import Any

#: The modules whose ``__all__`` is the public API, in the order of the page.
MODULES = (
    "actors",
    "actors.errors",
    "actors.events",
    "actors.providers",
    "actors.tools",
    "actors.journal",
    "actors.testing",
    "actors.testing.chaos",
    "actors.lowlevel",
    "supervisors",
    "supervisors.runs",
    "supervisors.state",
)


def public_names(module_name: str) -> list[tuple[str, Any]]:
    """``(name, object)`` for each name of the module's ``__all__``, in order."""
    module = importlib.import_module(module_name)
    return [(name, getattr(module, name)) for name in module.__all__]


def members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties ``cls`` defines itself (not inherited ones,
    not enum members, not attrs' generated dunders)."""
    if issubclass(cls, enum.Enum):
        return
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, staticmethod | classmethod):
            value = value.__func__
        if inspect.isfunction(value) or isinstance(value, property):
            yield name, getattr(cls, name) if isinstance(value, property) else value


def needs_doc(obj: Any) -> bool:
    """Classes and functions carry docstrings; constants and aliases are described on
    the page by their value."""
    return inspect.isclass(obj) or inspect.isfunction(obj)


def doc_of(obj: Any) -> str:
    """The docstring, inherited through the class hierarchy (``inspect.getdoc``)."""
    return inspect.getdoc(obj) or ""


def summary(obj: Any) -> str:
    """The first paragraph of the docstring, on one line."""
    return " ".join(doc_of(obj).split("\n\n")[0].split())


def _signature(obj: Any) -> str:
    """The parameters, with defaults shown only when their text is stable (numbers,
    strings, ``None``, flat tuples of them): others read ``…`` — an object's repr may
    hold an address or a set's order, which change from run to run."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = []
    for param in signature.parameters.values():
        if param.default is inspect.Parameter.empty:
            params.append(param.replace(annotation=inspect.Parameter.empty))
        else:
            shown = param.default if _stable(param.default) else _Elided()
            params.append(param.replace(annotation=inspect.Parameter.empty, default=shown))
    return str(signature.replace(parameters=params, return_annotation=inspect.Signature.empty))


class _Elided:
    def __repr__(self) -> str:
        return "…"


def _stable(value: Any) -> bool:
    if value is None or isinstance(value, bool | int | float | str):
        return True
    return isinstance(value, tuple) and all(_stable(item) for item in value)


def _kind(obj: Any) -> str:
    if inspect.isclass(obj):
        if issubclass(obj, enum.Enum):
            return "enum"
        if issubclass(obj, BaseException):
            return "exception"
        return "class"
    if inspect.iscoroutinefunction(obj):
        return "async function"
    if inspect.isfunction(obj):
        return "function"
    return "value"


def _value(obj: Any) -> str:
    if isinstance(obj, set | frozenset):  # in a stable order (string hashes vary by run)
        text = f"{type(obj).__name__}({sorted(obj, key=repr)!r})"
    else:
        text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."


def page() -> str:
    """The whole reference page, Markdown."""
    lines = [
        "# API reference",
        "",
        "Generated from the code (`python -m tests.reference > docs/reference.md`; the",
        "test suite checks it is current). Every public name — the `__all__` of each",
        "module below — with its signature and the first paragraph of its docstring;",
        "the docstrings say the rest (`help(name)`), the other pages how the pieces fit.",
        "",
    ]
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        lines += [f"## `{module_name}`", "", summary(module), ""]
        for name, obj in public_names(module_name):
            kind = _kind(obj)
            if kind == "value":
                lines.append(f"- `{name}` = `{_value(obj)}`")
                continue
            signature = "" if kind in ("enum",) else _signature(obj)
            lines.append(f"- **`{name}{signature}`** ({kind}) — {summary(obj)}")
            if inspect.isclass(obj):
                for member, value in members(obj):
                    if isinstance(value, property):
                        lines.append(f"  - `.{member}` (property) — {summary(value)}")
                    else:
                        async_ = "async " if inspect.iscoroutinefunction(value) else ""
                        lines.append(
                            f"  - `{async_}.{member}{_signature(value)}` — {summary(value)}"
                        )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(page(), end="")
