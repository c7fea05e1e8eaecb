"""What we ship: a typed wheel (PEP 561) whose imports are all declared (issue #9, 18-19).

The wheel test builds the real wheel with the project's build backend, installs it into a
fresh virtual environment and type-checks a user's daemon against it with ``mypy
--strict``, as a user's CI would. Nothing touches the network: the wheel is built without
build isolation (hatchling comes with the ``dev`` extra) and installed with ``--no-index``;
the dependencies are this environment's, reached through a ``.pth`` file.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("actors", "supervisors")

USER_DAEMON = """\
from __future__ import annotations

from typing import Any

import trio

from actors import Actor, ActorError, Code
from supervisors import ChildSpec, SupervisorSpec, open_tree


class Echo(Actor):
    async def handle(self, message: Any) -> Any:
        if message == "fail":
            raise ActorError.from_code(Code.TOOL_FAILED, "asked to")
        return message


async def main() -> None:
    spec = SupervisorSpec(children=[ChildSpec(id="echo", actor=Echo, capacity=10)])
    async with open_tree(spec) as tree:
        print(await tree.ref("echo").call("hi"))


if __name__ == "__main__":
    trio.run(main)
"""

# Proves the types are real, not Any: this must be reported.
USER_MISTAKE = """\
from supervisors import SupervisorSpec

restarts: str = SupervisorSpec().max_restarts
"""


def _run(args: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "MYPYPATH"}}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PIP_NO_INDEX="1")
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False
    )


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"{result.args}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _build_wheel(out: Path) -> Path:
    try:
        import hatchling  # noqa: F401  (the build backend, for --no-build-isolation)
    except ImportError as exc:
        raise AssertionError(
            "hatchling is missing from this environment: pip install -e '.[dev]'"
        ) from exc
    out.mkdir()
    _ok(
        _run(
            [
                *(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"),
                *("--no-index", "--quiet", "--wheel-dir", str(out), str(ROOT)),
            ],
            cwd=out,
        )
    )
    (wheel,) = out.glob("resilient_actors-*.whl")
    return wheel


def test_the_wheel_is_typed_for_users(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "dist")
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in PACKAGES:
        assert f"{package}/py.typed" in names
    assert {"actors/testing/chaos/__init__.py", "actors/testing/chaos/__main__.py"} <= names

    venv = tmp_path / "venv"
    _ok(_run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path))
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _ok(
        _run(
            [
                *(sys.executable, "-m", "pip", "--python", str(python), "install"),
                *("--no-index", "--no-deps", "--quiet", str(wheel)),
            ],
            cwd=tmp_path,
        )
    )
    site = Path(
        _ok(
            _run(
                [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                cwd=tmp_path,
            )
        ).strip()
    )
    # The dependencies (trio, attrs, ...) are this environment's; a plain .pth line adds
    # the directory without processing its .pth files, so our editable install stays out.
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (site / "_deps_from_dev_env.pth").write_text("\n".join(sorted(ours)) + "\n")
    found = _ok(
        _run(
            [
                str(python),
                "-c",
                "import actors, supervisors; print(actors.__file__, supervisors.__file__)",
            ],
            cwd=tmp_path,
        )
    ).split()
    assert all(Path(path).is_relative_to(site) for path in found), found

    user = tmp_path / "user"
    user.mkdir()
    (user / "mypy.ini").write_text("[mypy]\n")  # no config of ours (or a parent's) applies
    (user / "daemon.py").write_text(USER_DAEMON)
    (user / "mistake.py").write_text(USER_MISTAKE)
    result = _run(
        [
            *(sys.executable, "-m", "mypy", "--strict", "--python-executable", str(python)),
            *("--cache-dir", str(tmp_path / "mypy_cache"), "--no-error-summary"),
            *("--hide-error-context", "--no-pretty", "daemon.py", "mistake.py"),
        ],
        cwd=user,
    )
    assert "py.typed" not in result.stdout
    assert 'has type "Any"' not in result.stdout
    assert result.stdout.splitlines() == [
        'mistake.py:3: error: Incompatible types in assignment (expression has type "int", '
        'variable has type "str")  [assignment]'
    ], result.stdout + result.stderr


# --- what we import, we declare -----------------------------------------------------------


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return _normalize(match.group(1))


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> the files importing it, for every absolute import we ship."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    top = module.partition(".")[0]
                    if top not in sys.stdlib_module_names and top not in PACKAGES:
                        found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {_requirement_name(r) for r in project["dependencies"]}
    for extra, requirements in project.get("optional-dependencies", {}).items():
        if extra != "dev":  # dev tools are never there for a user's import
            declared |= {_requirement_name(r) for r in requirements}
    providers = importlib.metadata.packages_distributions()

    imports = _third_party_imports()
    assert {"trio", "h11", "outcome"} <= set(imports)  # the scan sees what it should
    undeclared = []
    for module, files in sorted(imports.items()):
        distributions = {_normalize(d) for d in providers.get(module, [])}
        if not distributions & declared:
            undeclared.append(
                f"{module} ({', '.join(sorted(distributions)) or '?'}): {sorted(files)}"
            )
    assert undeclared == []
