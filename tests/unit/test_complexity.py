"""No function in ``imagecheck/`` above cyclomatic-complexity grade C, as ``radon cc`` grades
it: functions short enough to read at a glance.

Every module is measured, none excluded: methods, nested functions and the methods of nested
classes too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from radon.complexity import cc_rank, cc_visit
from radon.visitors import Class, Function

PACKAGE = Path(__file__).resolve().parents[2] / "imagecheck"
MODULES = sorted(PACKAGE.rglob("*.py"))
WORST_GRADE = "C"  # A 1-5, B 6-10, C 11-20, D 21-30, ...


def functions(blocks: Iterable[Function | Class]) -> Iterator[Function]:
    """Each function once: radon lists a class's methods both in the class and on their own."""
    seen: set[tuple[str, int]] = set()
    for function in _walk(blocks):
        if (function.fullname, function.lineno) not in seen:
            seen.add((function.fullname, function.lineno))
            yield function


def _walk(blocks: Iterable[Function | Class]) -> Iterator[Function]:
    for block in blocks:
        if isinstance(block, Class):
            yield from _walk([*block.methods, *block.inner_classes])
        else:
            yield block
            yield from _walk(block.closures)


def test_the_package_is_measured() -> None:
    assert PACKAGE / "run.py" in MODULES
    assert len(MODULES) > 30


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_function_above_grade_c(module: Path) -> None:
    code = module.read_text(encoding="utf-8")
    too_complex = [
        f"{f.fullname} (line {f.lineno}): {cc_rank(f.complexity)} ({f.complexity})"
        for f in functions(cc_visit(code))
        if cc_rank(f.complexity) > WORST_GRADE
    ]
    assert too_complex == [], "split these into functions that each do one thing"


def test_the_measure_fails_what_it_should() -> None:
    """A function of 21 branches is grade D, and found inside a class and a closure."""
    branches = "\n".join(f"        if x == {i}: return {i}" for i in range(20))
    code = f"class A:\n    def f(self, x):\n        def g():\n            pass\n{branches}\n"
    [found] = [f for f in functions(cc_visit(code)) if cc_rank(f.complexity) > WORST_GRADE]
    assert found.fullname == "A.f"
    assert cc_rank(found.complexity) == "D"
