"""Where test helpers live: tests/support/ (or a helper module beside the only tests that use
it), never a test module or a conftest.py. A test module imported by another runs its
module-level code twice and drags its fixtures along; a conftest.py imported by name is a
second copy of the module pytest already loaded. The benchmarks and the demo are not tests:
they import the package and tests/support only."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tools import ROOT

CHECKED = ("tests", "benchmarks", "scripts")
# What the benchmarks and scripts, which are not tests, may import from tests/.
SUPPORT = "tests.support"


def imported(source: str, package: str) -> Iterator[tuple[int, tuple[str, ...]]]:
    """(line, candidates) for each name ``source`` imports: ``import a.b`` is ``("a.b",)``;
    ``from a import b`` is ``("a", "a.b")``, as ``b`` may be a module or a name in ``a``.
    Relative imports are resolved against ``package``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, (alias.name,)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                yield node.lineno, (base, f"{base}.{alias.name}")


def _is_test_or_conftest(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return last == "conftest" or last.startswith("test_")


def _in_tests(module: str) -> bool:
    return module == "tests" or module.startswith("tests.")


def _in_support(module: str) -> bool:
    return module == SUPPORT or module.startswith(SUPPORT + ".")


def violations(source: str, module: str) -> list[str]:
    """What ``module`` (dotted, e.g. ``tests.unit.test_x``) imports that it must not."""
    found = []
    for line, candidates in imported(source, module.rpartition(".")[0]):
        target = candidates[-1]
        if any(_in_tests(c) and _is_test_or_conftest(c) for c in candidates):
            found.append(f"{module}:{line}: imports {target}, a test module or conftest.py")
        elif not _in_tests(module) and _in_tests(target) and not _in_support(target):
            found.append(f"{module}:{line}: imports {target}; outside tests/, only {SUPPORT}")
    return found


def _modules() -> Iterator[tuple[Path, str]]:
    for top in CHECKED:
        for path in sorted((ROOT / top).rglob("*.py")):
            dotted = path.relative_to(ROOT).with_suffix("").parts
            yield path, ".".join(dotted)


def test_no_module_imports_a_test_module_or_a_conftest() -> None:
    found = [
        problem
        for path, module in _modules()
        for problem in violations(path.read_text(encoding="utf-8"), module)
    ]
    assert found == []


def test_the_walk_sees_the_benchmarks_the_demo_and_the_support_modules() -> None:
    modules = {module for _, module in _modules()}
    assert {"scripts.demo", "benchmarks.check_many", "tests.support.net"} <= modules


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        pytest.param(
            "tests.unit.test_a",
            "from tests.integration.test_webhook import pod\n",
            ["tests.unit.test_a:1: imports tests.integration.test_webhook"],
            id="a-test-module-of-another-directory",
        ),
        pytest.param(
            "tests.integration.test_a",
            "from tests.integration.conftest import RegistryEndpoint\n",
            ["tests.integration.test_a:1: imports tests.integration.conftest"],
            id="a-conftest-of-its-own-directory",
        ),
        pytest.param(
            "tests.integration.test_a",
            "from . import test_b\n",
            ["tests.integration.test_a:1: imports tests.integration.test_b"],
            id="a-test-module-named-relatively",
        ),
        pytest.param(
            "tests.image.test_a",
            "def f():\n    import tests.fuzz.conftest\n",
            ["tests.image.test_a:2: imports tests.fuzz.conftest"],
            id="inside-a-function",
        ),
        pytest.param(
            "benchmarks.bench",
            "from tests.fuzz import strategies\n",
            ["benchmarks.bench:1: imports tests.fuzz.strategies; outside tests/"],
            id="a-benchmark-importing-a-test-helper-outside-support",
        ),
        pytest.param(
            "scripts.demo",
            "from tests.support.registry import LocalRegistry\nimport imagecheck\n",
            [],
            id="the-demo-importing-support",
        ),
        pytest.param(
            "tests.unit.test_a",
            "from aiohttp.test_utils import TestClient\n",
            [],
            id="a-library-s-test-module",
        ),
        pytest.param(
            "tests.fuzz.test_a",
            "from tests.fuzz.proc import run_bounded\nfrom tests.support import net\n",
            [],
            id="a-helper-beside-its-tests",
        ),
    ],
)
def test_the_checker_finds_a_planted_violation(
    module: str, source: str, expected: list[str]
) -> None:
    found = violations(source, module)
    assert len(found) == len(expected), found
    for problem, start in zip(found, expected, strict=True):
        assert problem.startswith(start), problem
