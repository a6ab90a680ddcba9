"""The words of a Dockerfile instruction, as BuildKit reads them: ARG substitution in a
``FROM`` (quotes, escapes, ``$NAME``, ``${NAME}``, ``${NAME:-default}``,
``${NAME:+alternative}``; bounded by :data:`MAX_VALUE`, :data:`MAX_NESTING` and
:data:`MAX_SUBSTITUTED`, see :mod:`._dockerfile`), an instruction's ``--flags``, and the
comma-separated fields of a ``--mount``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from imagecheck.scanning._model import MAX_IMAGE_LENGTH

# An ARG's value, and a FROM's image, once substituted: no image is this long.
MAX_VALUE = MAX_IMAGE_LENGTH
# ${A:-${B:-${C}}}: BuildKit sets no limit; nobody writes more than a few.
MAX_NESTING = 32
# Characters substituted in all of a Dockerfile's ARGs and FROMs (values are copied into
# each ARG that uses them): a few hundred ARGs of MAX_VALUE.
MAX_SUBSTITUTED = 1024 * 1024

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Set by the builder for each build: known only then.
# https://docs.docker.com/reference/dockerfile/#automatic-platform-args-in-the-global-scope
_PLATFORM_ARGS = frozenset(
    f"{prefix}{suffix}"
    for prefix in ("BUILD", "TARGET")
    for suffix in ("PLATFORM", "OS", "ARCH", "VARIANT")
)


@dataclass(frozen=True, slots=True)
class _Arg:
    value: str | None  # None: declared without a default, or not expanded (overflow)
    unresolved: str | None = None  # the first placeholder left in value, with why
    overflow: str | None = None  # why the default was not expanded


class Overflow(Exception):
    """A substitution past a limit. ``message`` says which: as a predicate (``expands to
    over 4096 characters``), or, when ``about_arg``, whole, naming the ARG and its line."""

    def __init__(self, message: str, *, about_arg: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.about_arg = about_arg


def split_words(text: str, escape: str) -> Iterator[tuple[str, int]]:
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


def builder_flags(text: str, escape: str) -> Iterator[tuple[str, int]]:
    """The ``--flag[=value]`` words an instruction's arguments start with, each with quotes
    and escapes removed and with its offset; they end at the first other word or at ``--``.

    As BuildKit's parser reads them (frontend/dockerfile/parser/split_command.go,
    ``extractBuilderFlags``): unlike a shell, the escape character escapes inside single
    quotes too.
    """
    index = 0
    while True:
        while index < len(text) and text[index].isspace():
            index += 1
        if not text.startswith("--", index):
            return
        start, out, quote, quoted = index, [], None, False
        while index < len(text) and (quote is not None or not text[index].isspace()):
            char = text[index]
            if char == escape:
                index += 1  # an escape at the very end is dropped
                out.append(text[index : index + 1])
            elif char == quote:
                quote = None
            elif quote is None and char in "'\"":
                quote, quoted = char, True
            else:
                out.append(char)
            index += 1
        word = "".join(out)
        if word == "--":
            return
        if word or quoted:
            yield word, start


def csv_fields(value: str) -> list[str]:
    """The fields of a one-line CSV value (RFC 4180 quotes, ``""`` for a quote), as the
    parser of a ``RUN --mount`` reads them (github.com/tonistiigi/go-csvvalue, strict).

    Raises :class:`ValueError` with encoding/csv's message for a stray or unclosed quote.
    """
    if not value:
        raise ValueError("EOF")
    fields: list[str] = []
    index = 0
    while True:
        if not value.startswith('"', index):
            comma = value.find(",", index)
            end = len(value) if comma < 0 else comma
            if '"' in value[index:end]:
                raise ValueError('bare " in non-quoted-field')
            fields.append(value[index:end])
            if comma < 0:
                return fields
            index = comma + 1
            continue
        index, field = _quoted_field(value, index + 1)
        fields.append(field)
        if index == len(value):
            return fields
        index += 1  # the comma after the closing quote


def _quoted_field(value: str, index: int) -> tuple[int, str]:
    """The quoted field whose text starts at ``value[index]``: where it ends, and its text."""
    parts: list[str] = []
    while True:
        quote = value.find('"', index)
        if quote < 0:
            raise ValueError('extraneous or missing " in quoted-field')
        parts.append(value[index:quote])
        index = quote + 1
        if value.startswith('"', index):
            parts.append('"')
            index += 1
        elif index == len(value) or value[index] == ",":
            return index, "".join(parts)
        else:
            raise ValueError('extraneous or missing " in quoted-field')


class Substitution:
    """The ARGs declared before the first ``FROM``, and their substitution in words."""

    def __init__(self, escape: str) -> None:
        self.escape = escape
        self.args: dict[str, _Arg] = {}
        self._budget = MAX_SUBSTITUTED

    def declare(self, arguments: str, line: int) -> None:
        """Record ``ARG NAME[=default] ...`` (the ARG on ``line``); defaults may use the ARGs
        declared before."""
        for word, _ in split_words(arguments, self.escape):
            name, equals, default = word.partition("=")
            if equals:
                try:
                    self.args[name] = _Arg(*self.expand(default))
                except Overflow as exc:
                    why = f"ARG {name} (line {line}) {exc.message}"
                    self.args[name] = _Arg(None, overflow=exc.message if exc.about_arg else why)
            elif name not in self.args:
                self.args[name] = _Arg(None)

    def expand(self, word: str) -> tuple[str, str | None]:
        """Remove quotes and escapes and substitute ARGs, as the shell lexer of BuildKit does.

        Returns the text, with what could not be substituted left as written, and the first
        such placeholder with why (``${TAG}: ARG TAG has no default``). Raises
        :class:`Overflow` past a limit.
        """
        return self._expand(word, 0, len(word), _matching_braces(word), 0)

    def _expand(
        self, word: str, start: int, stop: int, braces: dict[int, int], depth: int
    ) -> tuple[str, str | None]:
        """``expand`` of ``word[start:stop]`` (the operand of ``${A:-...}`` at ``depth``)."""
        if depth > MAX_NESTING:
            raise Overflow(f"nests substitutions more than {MAX_NESTING} deep")
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
                raise Overflow(f"expands to over {MAX_VALUE} characters")
            if self._budget < 0:
                raise Overflow(f"expands past the {MAX_SUBSTITUTED:,} characters all ARGs may")
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
            raise Overflow(arg.overflow, about_arg=True)
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
