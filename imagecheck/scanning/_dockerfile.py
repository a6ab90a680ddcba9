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

from imagecheck.scanning._model import (
    MAX_IMAGE_LENGTH,
    PLACEHOLDER,
    FileProblem,
    Occurrence,
    placeholder_in,
)

__all__ = ["MAX_NESTING", "MAX_SUBSTITUTED", "MAX_VALUE", "images_in_dockerfile"]

# An ARG's value, and a FROM's image, once substituted: no image is this long.
MAX_VALUE = MAX_IMAGE_LENGTH
# ${A:-${B:-${C}}}: BuildKit sets no limit; nobody writes more than a few.
MAX_NESTING = 32
# Characters substituted in all of a Dockerfile's ARGs and FROMs (values are copied into
# each ARG that uses them): a few hundred ARGs of MAX_VALUE.
MAX_SUBSTITUTED = 1024 * 1024

_DIRECTIVE = re.compile(r"#\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(\S+)\s*")
_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)([\"']?)([A-Za-z0-9_.-]+)\2")
_HEREDOC_INSTRUCTIONS = frozenset({"RUN", "COPY", "ADD"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Set by the builder for each build: known only then.
# https://docs.docker.com/reference/dockerfile/#automatic-platform-args-in-the-global-scope
_PLATFORM_ARGS = frozenset(
    f"{prefix}{suffix}"
    for prefix in ("BUILD", "TARGET")
    for suffix in ("PLATFORM", "OS", "ARCH", "VARIANT")
)


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


@dataclass(frozen=True, slots=True)
class _Arg:
    value: str | None  # None: declared without a default, or not expanded (overflow)
    unresolved: str | None = None  # the first placeholder left in value, with why
    overflow: str | None = None  # why the default was not expanded


class _Overflow(Exception):
    """A substitution past a limit. ``message`` says which: as a predicate (``expands to
    over 4096 characters``), or, when ``about_arg``, whole, naming the ARG and its line."""

    def __init__(self, message: str, *, about_arg: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.about_arg = about_arg


def images_in_dockerfile(text: str, file: str) -> Iterator[Occurrence | FileProblem]:
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    escape = _escape_directive(lines)
    substitution = _Substitution(escape)
    stages: set[str] = set()
    seen_from = False
    for instruction in _instructions(lines, escape):
        if instruction.keyword == "ARG" and not seen_from:
            substitution.declare(instruction)
        elif instruction.keyword == "FROM":
            seen_from = True
            yield from _from(instruction, file, substitution, stages)


def _from(
    instruction: _Instruction,
    file: str,
    substitution: _Substitution,
    stages: set[str],
) -> Iterator[Occurrence | FileProblem]:
    words = list(_words(instruction.arguments, substitution.escape))
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
    except _Overflow as exc:
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


# --- words and ARG substitution ------------------------------------------------------------


def _words(text: str, escape: str) -> Iterator[tuple[str, int]]:
    """Split on whitespace outside quotes; each word as written, with its offset."""
    start: int | None = None
    quote: str | None = None
    index = 0
    while index < len(text):
        char = text[index]
        if quote is None and char.isspace():
            if start is not None:
                yield text[start:index], start
                start = None
        else:
            if start is None:
                start = index
            if char == escape and quote != "'":
                index += 1
            elif char in "'\"" and quote in (None, char):
                quote = None if quote else char
        index += 1
    if start is not None:
        yield text[start:], start


class _Substitution:
    """The ARGs declared before the first ``FROM``, and their substitution in words."""

    def __init__(self, escape: str) -> None:
        self.escape = escape
        self.args: dict[str, _Arg] = {}
        self._budget = MAX_SUBSTITUTED

    def declare(self, instruction: _Instruction) -> None:
        """Record ``ARG NAME[=default] ...``; defaults may use the ARGs declared before."""
        for word, _ in _words(instruction.arguments, self.escape):
            name, equals, default = word.partition("=")
            if equals:
                try:
                    self.args[name] = _Arg(*self.expand(default))
                except _Overflow as exc:
                    why = f"ARG {name} (line {instruction.line}) {exc.message}"
                    self.args[name] = _Arg(None, overflow=exc.message if exc.about_arg else why)
            elif name not in self.args:
                self.args[name] = _Arg(None)

    def expand(self, word: str) -> tuple[str, str | None]:
        """Remove quotes and escapes and substitute ARGs, as the shell lexer of BuildKit does.

        Returns the text, with what could not be substituted left as written, and the first
        such placeholder with why (``${TAG}: ARG TAG has no default``). Raises
        :class:`_Overflow` past a limit.
        """
        return self._expand(word, 0, len(word), _matching_braces(word), 0)

    def _expand(
        self, word: str, start: int, stop: int, braces: dict[int, int], depth: int
    ) -> tuple[str, str | None]:
        """``expand`` of ``word[start:stop]`` (the operand of ``${A:-...}`` at ``depth``)."""
        if depth > MAX_NESTING:
            raise _Overflow(f"nests substitutions more than {MAX_NESTING} deep")
        out: list[str] = []
        size = 0
        unresolved: str | None = None
        quote: str | None = None
        index = start
        while index < stop:
            char, text, end = word[index], word[index], index + 1
            if char == self.escape and quote != "'" and index + 1 < stop:
                text, end = word[index + 1], index + 2
            elif char in "'\"" and quote in (None, char):
                quote, text = (None if quote else char), ""
            elif char == "$" and quote != "'":
                variable = self._variable(word, index, stop, braces, depth)
                if variable is not None:
                    end, text, problem = variable
                    unresolved = unresolved or problem
            out.append(text)
            size += len(text)
            self._budget -= len(text)
            if size > MAX_VALUE:
                raise _Overflow(f"expands to over {MAX_VALUE} characters")
            if self._budget < 0:
                raise _Overflow(f"expands past the {MAX_SUBSTITUTED:,} characters all ARGs may")
            index = end
        return "".join(out), unresolved

    def _variable(
        self, word: str, start: int, stop: int, braces: dict[int, int], depth: int
    ) -> tuple[int, str, str | None] | None:
        """Substitute the ``$NAME`` or ``${...}`` at ``word[start]``: (end, text, unresolved).

        None when the ``$`` starts no variable (a literal dollar).
        """
        operand: tuple[int, int] | None = None
        if word.startswith("${", start, stop):
            end = braces.get(start + 1)  # inside word[start:stop] if at all
            if end is None:
                return None
            written = word[start : end + 1]
            match = _BRACED.fullmatch(word, start + 2, end)
            if match is None:  # ${NAME#pattern} and other shell forms BuildKit may know
                return end + 1, written, f"{written}: unsupported substitution"
            name, operator = match.group(1, 2)
            operand = match.span(3) if operator is not None else None
        else:
            name_match = _NAME.match(word, start + 1, stop)
            if name_match is None:
                return None
            end, name, operator = name_match.end() - 1, name_match.group(0), None
            written = "$" + name
        arg = self.args.get(name)
        if arg is not None and arg.overflow is not None:
            raise _Overflow(arg.overflow, about_arg=True)
        value, inherited = (None, None) if arg is None else (arg.value, arg.unresolved)
        if operator is not None and operand is not None:
            # ${NAME:-word} / ${NAME:+word}: with the colon an empty value counts as unset.
            # A build without --build-arg leaves an ARG without a default unset.
            is_set = value is not None and (value != "" or ":" not in operator)
            if operator.endswith("-") and is_set:
                return end + 1, value or "", inherited
            if operator.endswith("+") and not is_set:
                return end + 1, "", None
            return (end + 1, *self._expand(word, *operand, braces, depth + 1))
        if value is not None:
            return end + 1, value, inherited
        return end + 1, written, f"{written}: {_why_unset(name, declared=arg is not None)}"


def _why_unset(name: str, *, declared: bool) -> str:
    """Why ``$name`` has no value in a ``FROM``."""
    if name in _PLATFORM_ARGS:
        return f"{name} is set by the builder for each platform"
    if declared:
        return f"ARG {name} has no default"
    return f"{name} is not declared with ARG before the first FROM"


_BRACED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-+])(.*))?", re.DOTALL)


def _matching_braces(word: str) -> dict[int, int]:
    """The index of each ``{`` in ``word`` that is closed, and of the ``}`` that closes it.

    Found in one pass: looking for each ``${``'s end on its own re-reads the rest of the word
    for every unclosed one.
    """
    matches: dict[int, int] = {}
    opened: list[int] = []
    for index, char in enumerate(word):
        if char == "{":
            opened.append(index)
        elif char == "}" and opened:
            matches[opened.pop()] = index
    return matches
