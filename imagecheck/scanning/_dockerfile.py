"""Base images in a Dockerfile: its ``FROM`` instructions, as BuildKit reads them.

https://docs.docker.com/reference/dockerfile/ — what is followed here:

- the ``# escape=`` parser directive (a backtick for Windows Dockerfiles);
- line continuations, with comment and empty lines inside them dropped;
- ``FROM [--platform=...] image [AS name]``; a later ``FROM name`` is that stage, not an
  image, and ``scratch`` is no image at all: both are left out silently;
- ``ARG`` defaults: only ARGs declared before the first ``FROM`` can be used in ``FROM``
  (https://docs.docker.com/reference/dockerfile/#understand-how-arg-and-from-interact), as
  ``$NAME``, ``${NAME}``, ``${NAME:-default}``, ``${NAME:+alternative}`` (and without the
  colon). An ARG without a default, one never declared, or a platform ARG the builder sets
  (``$TARGETARCH``) stays as written, and the image is reported as skipped;
- heredocs (``RUN <<EOF`` ... ``EOF``): their lines are not instructions.

Bounded by construction (issue #10): continuations are joined and heredocs skipped in linear
time; an ARG whose value would be longer than :data:`MAX_VALUE` characters, substitutions
nested more than :data:`MAX_NESTING` deep, or more than :data:`MAX_SUBSTITUTED` characters
substituted in one Dockerfile (``ARG B=$A$A``, ``ARG C=$B$B``...: 28 lines make 2^28) are
not expanded: a ``FROM`` that needs such a value is a problem on its line.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from imagecheck.scanning._dfargs import (
    MAX_NESTING,
    MAX_SUBSTITUTED,
    MAX_VALUE,
    Overflow,
    Substitution,
    split_words,
)
from imagecheck.scanning._model import (
    PLACEHOLDER,
    FileProblem,
    Occurrence,
    placeholder_in,
)

__all__ = ["MAX_NESTING", "MAX_SUBSTITUTED", "MAX_VALUE", "images_in_dockerfile"]

_DIRECTIVE = re.compile(r"#\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(\S+)\s*")
_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)([\"']?)([A-Za-z0-9_.-]+)\2")
_HEREDOC_INSTRUCTIONS = frozenset({"RUN", "COPY", "ADD"})


@dataclass(frozen=True, slots=True)
class _Instruction:
    keyword: str  # upper case
    arguments: str  # after the keyword, continuations joined
    line: int  # of the keyword
    # (offset in arguments, line) where each physical line's part starts
    parts: tuple[tuple[int, int], ...]

    def line_at(self, offset: int) -> int:
        index = bisect.bisect_right([start for start, _ in self.parts], offset) - 1
        return self.parts[max(index, 0)][1]


def images_in_dockerfile(text: str, file: str) -> Iterator[Occurrence | FileProblem]:
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    escape = _escape_directive(lines)
    substitution = Substitution(escape)
    stages: set[str] = set()
    seen_from = False
    for instruction in _instructions(lines, escape):
        if instruction.keyword == "ARG" and not seen_from:
            substitution.declare(instruction.arguments, instruction.line)
        elif instruction.keyword == "FROM":
            seen_from = True
            yield from _from(instruction, file, substitution, stages)


def _from(
    instruction: _Instruction,
    file: str,
    substitution: Substitution,
    stages: set[str],
) -> Iterator[Occurrence | FileProblem]:
    words = list(split_words(instruction.arguments, substitution.escape))
    while words and words[0][0].startswith("--"):  # --platform=...
        del words[0]
    image = " ".join(word for word, _ in words)
    if len(image) > MAX_VALUE:
        yield FileProblem(file, instruction.line, f"FROM: longer than {MAX_VALUE} characters")
        return
    template = placeholder_in(image)
    if template is not None and template.startswith("{{"):
        # A Dockerfile template (Jinja, Go): its words are not Docker's.
        line = instruction.line_at(words[0][1])
        yield Occurrence(image, file, line, "Dockerfile", None, None, f"{PLACEHOLDER} {template}")
        return
    if len(words) not in (1, 3) or (len(words) == 3 and words[1][0].upper() != "AS"):
        yield FileProblem(file, instruction.line, "FROM requires either one or three arguments")
        return
    stage = words[2][0] if len(words) == 3 else None
    try:
        image, unresolved = substitution.expand(words[0][0])
    except Overflow as exc:
        why = exc.message if exc.about_arg else f"the image {exc.message}"
        yield FileProblem(file, instruction.line_at(words[0][1]), f"FROM: {why}")
        return
    if image != "scratch" and image.lower() not in stages:
        skipped = f"{PLACEHOLDER} {unresolved}" if unresolved else None
        line = instruction.line_at(words[0][1])
        yield Occurrence(image, file, line, "Dockerfile", stage, None, skipped)
    if stage is not None:
        stages.add(stage.lower())  # BuildKit matches stage names case-insensitively


# --- instructions --------------------------------------------------------------------------


def _escape_directive(lines: list[str]) -> str:
    """The escape character: ``\\``, or a backtick from ``# escape=``."""
    escape = "\\"
    for line in lines:
        match = _DIRECTIVE.fullmatch(line)
        if match is None:
            break  # directives only come first; anything else ends them
        if match.group(1).lower() == "escape" and match.group(2) in ("\\", "`"):
            escape = match.group(2)
    return escape


def _instructions(lines: list[str], escape: str) -> Iterator[_Instruction]:
    heredocs = _Heredocs(lines)
    index = 0
    while index < len(lines):
        words = lines[index].split(None, 1)
        index += 1
        if not words or words[0].startswith("#"):
            continue
        keyword, first = words[0], words[1] if len(words) > 1 else ""
        # Each physical line read once and joined once, never the text joined so far again.
        pieces, parts, offset = [first], [(0, index)], 0
        while (piece := pieces[-1].rstrip(" \t")).endswith(escape):
            pieces[-1] = piece[:-1]
            offset += len(pieces[-1])
            index = _next_content_line(lines, index)
            if index == len(lines):
                break  # a continuation on the last line leads nowhere
            parts.append((offset, index + 1))
            pieces.append(lines[index])
            index += 1
        instruction = _Instruction(keyword.upper(), "".join(pieces), parts[0][1], tuple(parts))
        yield instruction
        if instruction.keyword in _HEREDOC_INSTRUCTIONS:
            index = heredocs.skip(index, instruction.arguments)


def _next_content_line(lines: list[str], index: int) -> int:
    """Inside a continuation, comment lines and empty lines are dropped."""
    while index < len(lines) and (
        not lines[index].strip() or lines[index].lstrip().startswith("#")
    ):
        index += 1
    return index


class _Heredocs:
    """Skips heredoc bodies, finding each terminator without reading the lines again."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines

    def skip(self, index: int, arguments: str) -> int:
        """The index after the bodies of the heredocs ``arguments`` opens (``RUN <<EOF``).

        When a terminator never comes, it was no heredoc (``echo "a <<b"``): nothing is
        skipped.
        """
        start = index
        for match in _HEREDOC.finditer(arguments):
            strip_tabs, word = match.group(1) == "-", match.group(3)
            where = (self._stripped if strip_tabs else self._exact).get(word, [])
            found = bisect.bisect_left(where, index)
            if found == len(where):
                return start
            index = where[found] + 1
        return index

    @cached_property
    def _exact(self) -> dict[str, list[int]]:
        return _line_indices(self._lines)

    @cached_property
    def _stripped(self) -> dict[str, list[int]]:  # <<-EOF: leading tabs are not compared
        return _line_indices([line.lstrip("\t") for line in self._lines])


def _line_indices(lines: list[str]) -> dict[str, list[int]]:
    """Each text, and the indices of the lines that are exactly it, in order."""
    indices: dict[str, list[int]] = {}
    for index, line in enumerate(lines):
        indices.setdefault(line, []).append(index)
    return indices
