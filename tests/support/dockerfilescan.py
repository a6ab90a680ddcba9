"""What a scan of a Dockerfile finds, asserted as (line, image, stage, skipped) rows."""

from __future__ import annotations

from imagecheck.scanning import scan_text


def assert_dockerfile(
    text: str,
    expected: list[tuple[int, str, str | None, str | None]],
    expected_problems: list[tuple[int, str]],
) -> None:
    """The scan of ``text`` finds exactly ``expected`` (line, image, stage, skipped), in order,
    and exactly ``expected_problems`` (line, message)."""
    occurrences, problems = scan_text(text, "Dockerfile")
    assert [(o.line, o.image, o.name, o.skipped) for o in occurrences] == expected
    assert {(o.kind, o.container, o.file) for o in occurrences} <= {
        ("Dockerfile", None, "Dockerfile")
    }
    assert [(p.line, p.message) for p in problems] == expected_problems
