"""docs/troubleshooting.md against the code: a section for every result status and for every
error class a user can meet (wherever in the package it is defined), the hints worded as the
command line words them, and every example message one the code can emit.

The facts line under each heading (exit code, retried or not, the docstring) is written by
the site's build hook, so only the sections' presence is held here. An example message is
checked against the package's own string templates, read from its source: each f-string is a
pattern whose replacement fields match anything. A message may join several with ``; `` (a
hint, a reason), and a part may have context before its template (``FILE:LINE: `` before a
configuration file's reason), as the code composes them.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections.abc import Iterator
from functools import cache

import pytest

import imagecheck
from imagecheck.errors import Hint, ImagecheckError
from imagecheck.render import hint_text
from imagecheck.result import Status
from tests.support.tools import ROOT

PAGE = ROOT / "docs" / "troubleshooting.md"
PACKAGE = ROOT / "imagecheck"
RESULT_LINE = re.compile(r"^(?:found|missing|denied|error|invalid) +\S+  (.+)$")
ERROR_LINE = re.compile(r"^imagecheck: error: (.+)$")
# A pattern needs this many literal characters to say anything about a message.
MIN_LITERAL = 10


def _subclasses(cls: type[ImagecheckError]) -> Iterator[type[ImagecheckError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _public_errors() -> set[str]:
    for module in pkgutil.walk_packages(imagecheck.__path__, "imagecheck."):
        importlib.import_module(module.name)
    return {c.__name__ for c in _subclasses(ImagecheckError) if not c.__name__.startswith("_")}


def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


def test_every_status_has_its_section() -> None:
    text = _page()
    for status in Status:
        assert text.count(f"<!-- status: {status.value} -->") == 1, status
        assert f"{{ #status-{status.value} }}" in text, status


def test_every_public_error_has_its_section() -> None:
    text = _page()
    named = set(re.findall(r"^<!-- error: (\w+) -->$", text, re.MULTILINE))
    errors = _public_errors()
    assert errors - named == set(), "errors with no section in troubleshooting.md"
    assert named - errors == set(), "sections for errors the code no longer has"
    for name in named:
        assert text.count(f"<!-- error: {name} -->") == 1, name
        assert f"{{ #error-{name.lower()} }}" in text, name


@pytest.mark.parametrize(
    "hint", [Hint(insecure_registry="HOST"), Hint(ca_file=True)], ids=["insecure", "ca-file"]
)
def test_the_hints_are_worded_as_the_command_line_words_them(hint: Hint) -> None:
    assert f"`{hint_text(hint)}`" in _page()


def _pattern(node: ast.JoinedStr) -> str | None:
    parts: list[str] = []
    literal = 0
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            parts.append(re.escape(value.value))
            literal += len(value.value)
        else:
            parts.append(".+")
    return "".join(parts) if literal >= MIN_LITERAL else None


@cache
def _templates() -> tuple[re.Pattern[str], ...]:
    """Every string the package's source can put in a message, as a pattern."""
    patterns: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr) and (pattern := _pattern(node)):
                patterns.add(pattern)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and len(node.value) >= MIN_LITERAL
            ):
                patterns.add(re.escape(node.value))
    # The template at the start, or after the context a caller put before it.
    return tuple(re.compile(rf"(?:.*[\s:\]])?{p}", re.DOTALL) for p in sorted(patterns))


def _emitted(message: str) -> bool:
    """``message`` is templates joined by ``; ``, each part ending with one."""
    cuts = [0] + [m.end() for m in re.finditer("; ", message)]
    ends = [m.start() for m in re.finditer("; ", message)] + [len(message)]
    reachable = {0}
    for start in cuts:
        if start not in reachable:
            continue
        for end in ends:
            segment = message[start:end]
            if end > start and any(t.fullmatch(segment) for t in _templates()):
                reachable.add(end + 2)
    return len(message) + 2 in reachable


def _examples() -> list[str]:
    blocks = re.findall(r"^```text\n(.*?)^```$", _page(), re.MULTILINE | re.DOTALL)
    lines = [line for block in blocks for line in block.splitlines()]
    messages = []
    for line in lines:
        match = RESULT_LINE.match(line) or ERROR_LINE.match(line)
        assert match is not None, f"not a result or an error line: {line!r}"
        messages.append(match.group(1))
    return messages


def test_the_page_has_examples() -> None:
    assert len(_examples()) >= 10


@pytest.mark.parametrize("message", _examples())
def test_every_example_message_is_one_the_code_emits(message: str) -> None:
    assert _emitted(message), f"no message template in imagecheck/ gives {message!r}"


@pytest.mark.parametrize(
    "message",
    ["tag '1.0.1' was not found anywhere", "the registry exploded; add --insecure HOST please"],
)
def test_a_message_the_code_never_emits_is_caught(message: str) -> None:
    assert not _emitted(message)
