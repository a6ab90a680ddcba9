"""The wheel ships only what runs: the package's modules that its entry points reach, and they
import nothing but the standard library, imagecheck and the declared runtime dependencies.

Test support (a registry launcher, an image pusher: ``tests/support``) and the demo
(``scripts/demo.py``) live outside the package; a module that only tests import (the old
``imagecheck.testing``) is caught here, whatever its name, because no entry point reaches it.
The wheel is built as a user would build it: ``pip wheel`` with the pyproject's backend.
"""

from __future__ import annotations

import ast
import configparser
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.tools import ROOT

PACKAGE = "imagecheck"
BUILD_TIMEOUT = 300.0
# A dotted name inside the package, as importlib.import_module takes it.
_MODULE_NAME = re.compile(rf"{PACKAGE}(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


class Wheel:
    """A built wheel's file names, module sources and metadata."""

    def __init__(self, path: Path) -> None:
        with zipfile.ZipFile(path) as archive:
            self.names = sorted(archive.namelist())
            self.sources = {
                _module_name(name): archive.read(name).decode()
                for name in self.names
                if name.startswith(f"{PACKAGE}/") and name.endswith(".py")
            }
            dist_info = next(n.split("/")[0] for n in self.names if ".dist-info/" in n)
            self.dist_info = dist_info
            self.metadata = Parser().parsestr(archive.read(f"{dist_info}/METADATA").decode())
            self.entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Wheel:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    [path] = out.glob(f"{PACKAGE}-*.whl")
    return Wheel(path)


def test_wheel_holds_only_package_modules_and_metadata(wheel: Wheel) -> None:
    unexpected = [
        name
        for name in wheel.names
        if not name.startswith(f"{wheel.dist_info}/")
        and not (name.startswith(f"{PACKAGE}/") and name.endswith(".py"))
        and name != f"{PACKAGE}/py.typed"
    ]
    assert unexpected == []


def test_wheel_is_typed(wheel: Wheel) -> None:
    """PEP 561: ``py.typed`` tells type checkers to read the package's own annotations."""
    assert f"{PACKAGE}/py.typed" in wheel.names


def test_every_shipped_module_is_reached_from_an_entry_point(wheel: Wheel) -> None:
    """Whatever no entry point imports is test support or dead code: neither belongs here."""
    roots = {PACKAGE, f"{PACKAGE}.__main__", *_console_script_modules(wheel.entry_points)}
    reached, missing = _closure(roots, wheel.sources)
    assert sorted(set(wheel.sources) - reached) == []
    assert missing == set()  # and every module they import is shipped


def test_shipped_code_imports_only_runtime_dependencies(wheel: Wheel) -> None:
    """No shipped module needs the test extra (pytest, respx, trustme, ...) or the test tree."""
    allowed = _runtime_distributions(wheel)
    owners = packages_distributions()
    outside: list[str] = []
    for module, source in sorted(wheel.sources.items()):
        for imported, _ in _imports(module, source):
            top = imported.split(".")[0]
            if top == PACKAGE or top in sys.stdlib_module_names:
                continue
            dists = {canonicalize_name(d) for d in owners.get(top, [])}
            if not dists & allowed:
                outside.append(f"{module} imports {imported} ({', '.join(sorted(dists)) or '?'})")
    assert outside == []


# --- helpers -------------------------------------------------------------------------


def _module_name(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _console_script_modules(entry_points: str) -> Iterator[str]:
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.read_string(entry_points)
    if parser.has_section("console_scripts"):
        yield from (v.split(":")[0].strip() for v in parser["console_scripts"].values())


def _imports(module: str, source: str) -> Iterator[tuple[str, bool]]:
    """Every module ``module`` imports, at any depth (imports inside functions count), each
    with whether it must be a module: ``from package import name`` may name a submodule or
    an attribute. The package uses absolute imports only (relative ones are refused).

    A string that is a module's whole dotted name counts too: ``importlib.import_module``
    reaches modules so (the cloud sources, by ``authn/cloud/_keychain.py``'s ``_SOURCES``)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((alias.name, True) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{module}: relative import of {node.module!r}"
            base = str(node.module)
            yield base, True
            yield from ((f"{base}.{alias.name}", False) for alias in node.names)
        elif isinstance(node, ast.Constant) and _MODULE_NAME.fullmatch(str(node.value)):
            yield str(node.value), False


def _closure(roots: set[str], sources: dict[str, str]) -> tuple[set[str], set[str]]:
    """The package's modules that ``roots`` import, directly or not, parents included; and
    the package's modules they import that are not in ``sources``."""
    reached: set[str] = set()
    missing: set[str] = set()
    todo = [(root, True) for root in roots]
    while todo:
        name, must_exist = todo.pop()
        if name in reached or not (name == PACKAGE or name.startswith(f"{PACKAGE}.")):
            continue
        if name not in sources:
            if must_exist:
                missing.add(name)
            continue
        reached.add(name)
        parts = name.split(".")
        todo += [(".".join(parts[:i]), True) for i in range(1, len(parts))]  # parents run too
        todo += _imports(name, sources[name])
    return reached, missing


def _runtime_distributions(wheel: Wheel) -> set[str]:
    """The wheel's dependencies and its optional extras' (``webhook``), not the test extra's."""
    extras = [e for e in wheel.metadata.get_all("Provides-Extra") or [] if e != "test"]
    allowed: set[str] = set()
    for text in wheel.metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": e}) for e in ["", *extras]):
            allowed.add(canonicalize_name(requirement.name))
    return allowed


# --- What PyPI shows, and the one version (issue #16) -------------------------------------------


def test_wheel_version_is_the_cli_version(wheel: Wheel) -> None:
    """pyproject.toml's version is dynamic, read from ``imagecheck.__version__`` (the string
    ``imagecheck --version`` prints): the built wheel carries that very string."""
    import imagecheck  # noqa: PLC0415

    assert wheel.metadata["Version"] == imagecheck.__version__
    assert wheel.dist_info == f"{PACKAGE}-{imagecheck.__version__}.dist-info"


def test_wheel_installs_the_cli_twice_as_itself_and_as_a_kubectl_plugin(wheel: Wheel) -> None:
    scripts = configparser.ConfigParser(delimiters=("=",))
    scripts.read_string(wheel.entry_points)
    assert dict(scripts["console_scripts"]) == {
        "imagecheck": "imagecheck.cli:main",
        "kubectl-imagecheck": "imagecheck.cli:main",
    }


def test_wheel_metadata_has_classifiers_and_project_urls(wheel: Wheel) -> None:
    classifiers = wheel.metadata.get_all("Classifier") or []
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Typing :: Typed" in classifiers  # py.typed ships (test_wheel_is_typed)
    urls = dict(u.split(", ", 1) for u in wheel.metadata.get_all("Project-URL") or [])
    assert set(urls) >= {"Homepage", "Source", "Issues", "Changelog", "Documentation"}
    # The documentation site is the repository's GitHub Pages (.github/workflows/docs.yml).
    assert urls.pop("Documentation") == "https://imagecheck.github.io/imagecheck/"
    assert all(u.startswith("https://github.com/imagecheck/imagecheck") for u in urls.values())
    assert wheel.metadata["License-Expression"] == "Apache-2.0"
