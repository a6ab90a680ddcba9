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
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

from imagecheck.scanning._model import PLACEHOLDER, FileProblem, Occurrence, placeholder_in

__all__ = ["images_in_dockerfile"]

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
    value: str | None  # None: declared without a default
    unresolved: tuple[str, ...] = ()  # placeholders left in value, with why


def images_in_dockerfile(text: str, file: str) -> Iterator[Occurrence | FileProblem]:
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    escape = _escape_directive(lines)
    global_args: dict[str, _Arg] = {}
    stages: set[str] = set()
    seen_from = False
    for instruction in _instructions(lines, escape):
        if instruction.keyword == "ARG" and not seen_from:
            _declare(instruction.arguments, escape, global_args)
        elif instruction.keyword == "FROM":
            seen_from = True
            yield from _from(instruction, file, escape, global_args, stages)


def _from(
    instruction: _Instruction,
    file: str,
    escape: str,
    args: dict[str, _Arg],
    stages: set[str],
) -> Iterator[Occurrence | FileProblem]:
    words = list(_words(instruction.arguments, escape))
    while words and words[0][0].startswith("--"):  # --platform=...
        del words[0]
    image = " ".join(word for word, _ in words)
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
    image, unresolved = _expand(words[0][0], escape, args)
    if image != "scratch" and image.lower() not in stages:
        skipped = f"{PLACEHOLDER} {unresolved[0]}" if unresolved else None
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
    continuation = re.compile(re.escape(escape) + r"[ \t]*$")
    index = 0
    while index < len(lines):
        words = lines[index].split(None, 1)
        index += 1
        if not words or words[0].startswith("#"):
            continue
        keyword, text = words[0], words[1] if len(words) > 1 else ""
        first_line = index
        parts = [(0, first_line)]
        while index < len(lines) and (match := continuation.search(text)) is not None:
            text = text[: match.start()]
            index = _next_content_line(lines, index)
            if index < len(lines):
                parts.append((len(text), index + 1))
                text += lines[index]
                index += 1
        text = continuation.sub("", text)  # a continuation on the last line leads nowhere
        instruction = _Instruction(keyword.upper(), text, first_line, tuple(parts))
        yield instruction
        if instruction.keyword in _HEREDOC_INSTRUCTIONS:
            index = _skip_heredocs(lines, index, instruction.arguments)


def _next_content_line(lines: list[str], index: int) -> int:
    """Inside a continuation, comment lines and empty lines are dropped."""
    while index < len(lines) and (
        not lines[index].strip() or lines[index].lstrip().startswith("#")
    ):
        index += 1
    return index


def _skip_heredocs(lines: list[str], index: int, arguments: str) -> int:
    """The index after the bodies of the heredocs ``arguments`` opens (``RUN <<EOF``).

    When a terminator never comes, it was no heredoc (``echo "a <<b"``): nothing is skipped.
    """
    start = index
    for match in _HEREDOC.finditer(arguments):
        strip_tabs, word = match.group(1) == "-", match.group(3)
        while index < len(lines):
            line = lines[index].lstrip("\t") if strip_tabs else lines[index]
            index += 1
            if line == word:
                break
        else:
            return start
    return index


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


def _declare(arguments: str, escape: str, args: dict[str, _Arg]) -> None:
    """Record ``ARG NAME[=default] ...``; defaults may use the ARGs declared before."""
    for word, _ in _words(arguments, escape):
        name, equals, default = word.partition("=")
        if equals:
            args[name] = _Arg(*_expand(default, escape, args))
        elif name not in args:
            args[name] = _Arg(None)


def _expand(word: str, escape: str, args: dict[str, _Arg]) -> tuple[str, tuple[str, ...]]:
    """Remove quotes and escapes and substitute ARGs, as the shell lexer of BuildKit does.

    Returns the text, with what could not be substituted left as written, and those
    placeholders, each with why (``${TAG}: ARG TAG has no default``).
    """
    out: list[str] = []
    unresolved: list[str] = []
    quote: str | None = None
    index = 0
    while index < len(word):
        char = word[index]
        if char == escape and quote != "'" and index + 1 < len(word):
            out.append(word[index + 1])
            index += 2
            continue
        if char in "'\"" and quote in (None, char):
            quote = None if quote else char
        elif char == "$" and quote != "'":
            end, text, problems = _variable(word, index, escape, args)
            if end > index:
                out.append(text)
                unresolved.extend(problems)
                index = end
                continue
            out.append(char)
        else:
            out.append(char)
        index += 1
    return "".join(out), tuple(unresolved)


def _variable(
    word: str, start: int, escape: str, args: dict[str, _Arg]
) -> tuple[int, str, tuple[str, ...]]:
    """Substitute the ``$NAME`` or ``${...}`` at ``word[start]``: (end, text, unresolved).

    ``end == start`` when the ``$`` starts no variable (a literal dollar).
    """
    if word.startswith("${", start):
        end = _closing_brace(word, start + 2)
        if end is None:
            return start, "", ()
        written = word[start : end + 1]
        match = re.fullmatch(
            r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-+])(.*))?", word[start + 2 : end], re.DOTALL
        )
        if match is None:  # ${NAME#pattern} and other shell forms BuildKit may know
            return end + 1, written, (f"{written}: unsupported substitution",)
        name, operator, operand = match.groups()
    else:
        name_match = _NAME.match(word, start + 1)
        if name_match is None:
            return start, "", ()
        end, written = name_match.end() - 1, name_match.group(0)
        written, name, operator, operand = "$" + written, written, None, None
    arg = args.get(name)
    value, inherited = (None, ()) if arg is None else (arg.value, arg.unresolved)
    if operator is not None:
        # ${NAME:-word} / ${NAME:+word}: with the colon an empty value counts as unset.
        # A build without --build-arg leaves an ARG without a default unset.
        is_set = value is not None and (value != "" or ":" not in operator)
        if operator.endswith("-"):
            chosen = (value or "", inherited) if is_set else _expand(operand or "", escape, args)
        else:
            chosen = _expand(operand or "", escape, args) if is_set else ("", ())
        return (end + 1, *chosen)
    if value is not None:
        return end + 1, value, inherited
    if name in _PLATFORM_ARGS:
        why = f"{name} is set by the builder for each platform"
    elif arg is not None:
        why = f"ARG {name} has no default"
    else:
        why = f"{name} is not declared with ARG before the first FROM"
    return end + 1, written, (f"{written}: {why}",)


def _closing_brace(word: str, start: int) -> int | None:
    depth = 1
    for index in range(start, len(word)):
        if word[index] == "{":
            depth += 1
        elif word[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return None
