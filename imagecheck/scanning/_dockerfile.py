"""The images a Dockerfile's build pulls: ``FROM``, ``COPY --from`` and
``RUN --mount=from=``, as BuildKit reads them.

https://docs.docker.com/reference/dockerfile/ — what is followed here:

- the ``# escape=`` parser directive (a backtick for Windows Dockerfiles), and the image the
  ``# syntax=`` directive names (``_dfdirectives``), kind ``dockerfile-syntax``;
- line continuations, with comment and empty lines inside them dropped;
- ``FROM [--platform=...] image [AS name]``; a later ``FROM name`` is that stage, not an
  image, and ``scratch`` is no image at all: both are left out silently;
- ``ARG`` defaults: only ARGs declared before the first ``FROM`` can be used in ``FROM``
  (https://docs.docker.com/reference/dockerfile/#understand-how-arg-and-from-interact), as
  ``$NAME``, ``${NAME}``, ``${NAME:-default}``, ``${NAME:+alternative}`` (and without the
  colon). An ARG without a default, one never declared, or a platform ARG the builder sets
  (``$TARGETARCH``) stays as written, and the image is reported as skipped;
- ``COPY --from=<image>`` and ``RUN --mount=...,from=<image>,...`` (a mount of any type: the
  comma-separated options in any order, quoted as CSV). Unlike ``FROM``, a stage defined
  anywhere in the file, even later, is that stage (BuildKit then fails the build: it must come
  first), and ``COPY --from=<number>`` is a stage index. BuildKit substitutes no ARG in them
  (it fails the build), so a ``$NAME`` there is reported as skipped, not substituted;
- heredocs (``RUN <<EOF`` ... ``EOF``): their lines are not instructions.

Bounded by construction, since the file may come from a hostile change: continuations are joined
and heredocs skipped in linear time; an ARG whose value would be longer than :data:`MAX_VALUE`
characters, substitutions nested more than :data:`MAX_NESTING` deep, or more than
:data:`MAX_SUBSTITUTED` characters substituted in one Dockerfile (``ARG B=$A$A``, ``ARG
C=$B$B``...: 28 lines make 2^28) are not expanded: a ``FROM`` that needs such a value is a
problem on its line.
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
    builder_flags,
    csv_fields,
    split_words,
)
from imagecheck.scanning._dfdirectives import syntax_directive
from imagecheck.scanning._model import (
    PLACEHOLDER,
    FileProblem,
    Occurrence,
    placeholder_in,
)

__all__ = ["MAX_NESTING", "MAX_SUBSTITUTED", "MAX_VALUE", "SYNTAX_KIND", "images_in_dockerfile"]

# The kind of the image a ``# syntax=`` directive names: BuildKit's frontend.
SYNTAX_KIND = "dockerfile-syntax"

_DIRECTIVE = re.compile(r"#\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(\S+)\s*")
_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)([\"']?)([A-Za-z0-9_.-]+)\2")
_HEREDOC_INSTRUCTIONS = frozenset({"RUN", "COPY", "ADD"})
# What Go's strconv.Atoi takes: BuildKit reads such a COPY --from as a stage index.
_STAGE_INDEX = re.compile(r"[+-]?[0-9]+")
_INT64 = 2**63


@dataclass(frozen=True, slots=True)
class _Instruction:
    keyword: str  # upper case
    arguments: str  # after the keyword, continuations joined
    # Where each physical line's part starts in arguments, and that line's number: searched
    # once for each flag of an instruction continued over thousands of lines.
    starts: tuple[int, ...]
    lines: tuple[int, ...]

    @property
    def line(self) -> int:
        """The line of the keyword."""
        return self.lines[0]

    def line_at(self, offset: int) -> int:
        return self.lines[max(bisect.bisect_right(self.starts, offset) - 1, 0)]


@dataclass(slots=True)
class _Stages:
    names: set[str]  # lower case: BuildKit matches stage names case-insensitively
    current: str | None = None  # the name of the stage read now, as written


def images_in_dockerfile(text: str, file: str) -> Iterator[Occurrence | FileProblem]:
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    escape = _escape_directive(lines)
    substitution = Substitution(escape)
    stages = _Stages(set())
    seen_from = False
    # A COPY --from names a stage when any FROM, even a later one, defines it: known at the end.
    found: list[tuple[Occurrence | FileProblem, str | None]] = []
    syntax = syntax_directive(lines)
    if syntax is not None:
        found.append((_syntax(*syntax, file), None))
    for instruction in _instructions(lines, escape):
        if instruction.keyword == "ARG" and not seen_from:
            substitution.declare(instruction.arguments, instruction.line)
        elif instruction.keyword == "FROM":
            seen_from = True
            stages.current = None
            bases = _from(instruction, file, substitution, stages)
            found.extend((result, None) for result in bases)
        elif instruction.keyword in ("COPY", "RUN") and seen_from:
            found.extend(_sources(instruction, file, escape, stages.current))
    for result, source in found:
        if source is None or source.lower() not in stages.names:
            yield result


def _syntax(line: int, image: str, file: str) -> Occurrence | FileProblem:
    if len(image) > MAX_VALUE:
        return FileProblem(file, line, f"# syntax: longer than {MAX_VALUE} characters")
    template = placeholder_in(image)
    # BuildKit substitutes nothing in a directive: a placeholder stays one.
    skipped = None if template is None else f"{PLACEHOLDER} {template}"
    return Occurrence(image, file, line, SYNTAX_KIND, None, None, skipped)


def _from(
    instruction: _Instruction,
    file: str,
    substitution: Substitution,
    stages: _Stages,
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
    stages.current = stage
    if image != "scratch" and image.lower() not in stages.names:
        skipped = f"{PLACEHOLDER} {unresolved}" if unresolved else None
        line = instruction.line_at(words[0][1])
        yield Occurrence(image, file, line, "Dockerfile", stage, None, skipped)
    if stage is not None:
        stages.names.add(stage.lower())


def _sources(
    instruction: _Instruction, file: str, escape: str, stage: str | None
) -> Iterator[tuple[Occurrence | FileProblem, str | None]]:
    """The images a ``COPY --from`` or ``RUN --mount=from=`` names, each with the text to
    look up among the stage names (frontend/dockerfile/dockerfile2llb/convert.go,
    ``toCommand`` and convert_runmount.go, ``detectRunMount``)."""
    for word, offset in builder_flags(instruction.arguments, escape):
        flag, equals, value = word.partition("=")
        line = instruction.line_at(offset)
        if not equals:
            continue
        if instruction.keyword == "COPY" and flag == "--from":
            what = "COPY --from"
            if _STAGE_INDEX.fullmatch(value) and abs(int(value)) < _INT64:
                continue  # a stage index, or a build error when out of range
        elif instruction.keyword == "RUN" and flag == "--mount":
            what = "RUN --mount from"
            try:
                value = _mount_from(value)
            except ValueError as exc:  # BuildKit fails the build too
                yield FileProblem(file, line, f"RUN --mount: invalid CSV: {exc}"), None
                continue
        else:
            continue
        # An empty --from is the build context; a stage or an image named scratch is empty.
        if value in ("", "scratch"):
            continue
        if len(value) > MAX_VALUE:
            yield FileProblem(file, line, f"{what}: longer than {MAX_VALUE} characters"), None
            continue
        yield Occurrence(value, file, line, "Dockerfile", stage, None, _skip(value, what)), value


def _mount_from(value: str) -> str:
    """The ``from=`` of a ``--mount`` value, or ``""``.

    Read whatever the mount's type (BuildKit reads ``from`` before the type, which may be an
    ARG); like BuildKit, ``from=0`` is an image named ``0``: only ``COPY`` takes an index.
    """
    found = ""
    for field in csv_fields(value):
        key, equals, text = field.partition("=")
        if equals and key.lower() == "from":
            found = text
    return found


def _skip(image: str, what: str) -> str | None:
    """Why the image of a ``COPY --from`` or ``--mount`` is not checked, if it is not."""
    template = placeholder_in(image)
    if template is None:
        return None
    if template.startswith("{{"):
        return f"{PLACEHOLDER} {template}"
    # BuildKit fails the build ("variable expansion is not supported for --from", Dockerfile
    # frontend 1.18; moby/moby#34482); buildah substitutes the stage's ARGs.
    return f"{PLACEHOLDER} {template}: BuildKit substitutes no ARG in {what}"


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
        pieces, starts, numbers, offset = [first], [0], [index], 0
        while (piece := pieces[-1].rstrip(" \t")).endswith(escape):
            pieces[-1] = piece[:-1]
            offset += len(pieces[-1])
            index = _next_content_line(lines, index)
            if index == len(lines):
                break  # a continuation on the last line leads nowhere
            starts.append(offset)
            numbers.append(index + 1)
            pieces.append(lines[index])
            index += 1
        arguments = "".join(pieces)
        instruction = _Instruction(keyword.upper(), arguments, tuple(starts), tuple(numbers))
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
