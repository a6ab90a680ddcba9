"""The ``# syntax=`` parser directive: the frontend image BuildKit pulls first, found where
BuildKit looks for it (frontend/dockerfile/parser/directives.go) and nowhere else."""

from __future__ import annotations

import pytest

from imagecheck.scanning import scan_text
from imagecheck.scanning._render import render_scan_list_text

SYNTAX = "dockerfile-syntax"

# (id, Dockerfile text, [(line, kind, image, skipped)])
CASES: list[tuple[str, str, list[tuple[int, str, str, str | None]]]] = [
    ("first-line", "# syntax=docker/dockerfile:1.7\nFROM alpine\n",
     [(1, SYNTAX, "docker/dockerfile:1.7", None), (2, "Dockerfile", "alpine", None)]),
    ("spaces-and-case", "#  Syntax = docker/dockerfile:1 \nFROM alpine\n",
     [(1, SYNTAX, "docker/dockerfile:1", None), (2, "Dockerfile", "alpine", None)]),
    ("after-escape-and-check", "# escape=`\n#check=skip=all\n# syntax=d/f:1\nFROM a\n",
     [(3, SYNTAX, "d/f:1", None), (4, "Dockerfile", "a", None)]),
    ("after-a-shebang", "#!/usr/bin/env buildctl\n# syntax=d/f:1\nFROM a\n",
     [(2, SYNTAX, "d/f:1", None), (3, "Dockerfile", "a", None)]),
    ("arguments-are-not-the-image", "# syntax=d/f:1 --debug\nFROM a\n",
     [(1, SYNTAX, "d/f:1", None), (2, "Dockerfile", "a", None)]),
    ("c-style", "// syntax=d/f:1\nFROM a\n",
     [(1, SYNTAX, "d/f:1", None), (2, "Dockerfile", "a", None)]),
    ("crlf", "# syntax=d/f:1\r\nFROM a\r\n",
     [(1, SYNTAX, "d/f:1", None), (2, "Dockerfile", "a", None)]),
    ("placeholder", "# syntax=${FRONTEND}\nFROM a\n",
     [(1, SYNTAX, "${FRONTEND}", "template placeholder ${FRONTEND}"),
      (2, "Dockerfile", "a", None)]),
    # Any other line ends the directives: what follows is a comment.
    ("after-a-comment", "# a comment\n# syntax=d/f:1\nFROM a\n", [(3, "Dockerfile", "a", None)]),
    ("after-an-empty-line", "\n# syntax=d/f:1\nFROM a\n", [(3, "Dockerfile", "a", None)]),
    ("after-an-unknown-directive", "# foo=bar\n# syntax=d/f:1\nFROM a\n",
     [(3, "Dockerfile", "a", None)]),
    ("after-an-instruction", "FROM a\n# syntax=d/f:1\n", [(1, "Dockerfile", "a", None)]),
    ("indented", " # syntax=d/f:1\nFROM a\n", [(2, "Dockerfile", "a", None)]),
    ("no-value", "# syntax=\nFROM a\n", [(2, "Dockerfile", "a", None)]),
    # A second one is an error to BuildKit, which keeps the first.
    ("twice", "# syntax=d/f:1\n# syntax=d/f:2\nFROM a\n",
     [(1, SYNTAX, "d/f:1", None), (3, "Dockerfile", "a", None)]),
    ("escape-is-no-image", "# escape=\\\nFROM a\n", [(2, "Dockerfile", "a", None)]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_syntax_directive(text: str, expected: list[tuple[int, str, str, str | None]]) -> None:
    occurrences, problems = scan_text(text, "Dockerfile")
    assert [(o.line, o.kind, o.image, o.skipped) for o in occurrences] == expected
    assert problems == []


def test_a_bom_comes_before_the_directive() -> None:
    occurrences, _ = scan_text("\ufeff# syntax=d/f:1\nFROM a\n", "Dockerfile")
    assert [(o.line, o.image) for o in occurrences] == [(1, "d/f:1"), (2, "a")]


def test_list_shows_the_kind() -> None:
    occurrences, _ = scan_text("# syntax=d/f:1\nFROM a AS b\n", "Dockerfile")
    lines = render_scan_list_text(occurrences, {}, []).splitlines()
    assert [line.split() for line in lines] == [
        ["FILE:LINE", "KIND/NAME", "CONTAINER", "IMAGE"],
        ["Dockerfile:1", "dockerfile-syntax", "-", "d/f:1"],
        ["Dockerfile:2", "Dockerfile/b", "-", "a"],
    ]
