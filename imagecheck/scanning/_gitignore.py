"""Which paths git ignores: ``.gitignore`` files and ``.git/info/exclude``, applied while walking
as ``git ls-files --others --exclude-standard`` applies them (gitignore(5)).

Git's own rules (dir.c, wildmatch.c), each tested against git itself:

- a line is a pattern; blank lines and lines starting with ``#`` are none; trailing spaces are
  dropped unless escaped (``\\ ``), a CR before the newline too; ``\\`` escapes any character;
- ``!`` re-includes; a trailing ``/`` matches directories only; a pattern without any other
  ``/`` matches a name at any depth below its file's directory, one with a ``/`` (a leading one
  included) the path relative to that directory;
- ``*``, ``?`` and ``[...]`` (``[!...]``, ranges, ``[:alpha:]``...) never match ``/``; ``**``
  between slashes (or at either end) matches any number of directories; a pattern whose
  bracket is never closed, or that ends in a lone ``\\``, matches nothing;
- the last matching pattern of a file decides; a deeper directory's file comes before its
  parents', ``.git/info/exclude`` after them all; a directory ignored is not entered, so
  nothing under it can be re-included.

Each file's patterns become one regular expression, its alternatives last pattern first, so one
``fullmatch`` finds the deciding pattern. Bounded, since the files come from the change under
review: a file is at most :data:`MAX_IGNORE_BYTES` long and holds at most :data:`MAX_PATTERNS`
patterns, and a pattern can take no exponential time: the stars of one path component but the
last, and the ``**/`` before a part followed by another ``**``, are matched atomically at the
first place their next part fits (where it first fits is never worse than a later place).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["MAX_IGNORE_BYTES", "MAX_PATTERNS", "IgnoreFile", "parse_ignore_file"]

# GitHub's largest .gitignore templates are a few KiB, with ~200 patterns.
MAX_IGNORE_BYTES = 256 * 1024
MAX_PATTERNS = 5000
# A pattern longer than a path can be matches nothing any file system holds.
_MAX_PATTERN = 4096
_CLASSES = {
    "alnum": "a-zA-Z0-9",
    "alpha": "a-zA-Z",
    "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": " \\t\\n\\r\\f\\v",
    "upper": "A-Z",
    "xdigit": "0-9A-Fa-f",
}
_COMPONENTS = "(?:[^/]*/)*"  # any number of whole directories: ** between slashes


class _NeverMatches(Exception):
    """The pattern matches no path (an unclosed bracket, a trailing lone backslash)."""


@dataclass(frozen=True, slots=True)
class IgnoreFile:
    """One file's patterns, for the paths below ``base`` (``""`` or ``"dir/sub/"``, relative
    to the work tree's root)."""

    base: str
    files: re.Pattern[str] | None  # the patterns that match a file
    directories: re.Pattern[str] | None  # all of them
    # For each pattern, in each expression's group order: whether it re-includes.
    file_negated: tuple[bool, ...]
    directory_negated: tuple[bool, ...]

    def decides(self, path: str, is_directory: bool) -> bool | None:
        """Whether ``path`` (relative to the work tree, below ``base``) is ignored (True),
        re-included (False), or matched by none of these patterns (None)."""
        expression = self.directories if is_directory else self.files
        if expression is None:
            return None
        match = expression.fullmatch(path, len(self.base))
        if match is None or match.lastindex is None:
            return None
        negated = self.directory_negated if is_directory else self.file_negated
        return not negated[match.lastindex - 1]


def parse_ignore_file(text: str, base: str) -> IgnoreFile | int:
    """The patterns of an ignore file's ``text``; or, past :data:`MAX_PATTERNS`, the line of
    the first pattern too many."""
    file_patterns: list[tuple[str, bool]] = []
    directory_patterns: list[tuple[str, bool]] = []
    count = 0
    for number, line in _lines(text):
        parsed = _pattern(line)
        if parsed is None:
            continue
        count += 1
        if count > MAX_PATTERNS:
            return number
        expression, negated, directories_only = parsed
        directory_patterns.append((expression, negated))
        if not directories_only:
            file_patterns.append((expression, negated))
    files, file_negated = _compiled(file_patterns)
    directories, directory_negated = _compiled(directory_patterns)
    return IgnoreFile(base, files, directories, file_negated, directory_negated)


def _compiled(patterns: list[tuple[str, bool]]) -> tuple[re.Pattern[str] | None, tuple[bool, ...]]:
    if not patterns:
        return None, ()
    ordered = patterns[::-1]  # the first alternative that matches is the file's last pattern
    expression = re.compile("|".join(f"({regex})" for regex, _ in ordered), re.DOTALL)
    return expression, tuple(negated for _, negated in ordered)


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for number, raw in enumerate(text.removeprefix("\ufeff").split("\n"), 1):
        line = raw.removesuffix("\r")
        if line and not line.startswith("#"):
            yield number, _trim_trailing_spaces(line)


def _trim_trailing_spaces(line: str) -> str:
    """Without its trailing spaces, unless escaped (dir.c, ``trim_trailing_spaces``)."""
    last_space = None
    index = 0
    while index < len(line):
        char = line[index]
        if char == " ":
            last_space = index if last_space is None else last_space
        elif char == "\\":
            index += 1
            if index == len(line):
                return line
            last_space = None
        else:
            last_space = None
        index += 1
    return line if last_space is None else line[:last_space]


def _pattern(line: str) -> tuple[str, bool, bool] | None:
    """The expression for one line (matched from its file's directory), whether it
    re-includes, whether it matches directories only; None when it matches nothing."""
    negated = line.startswith("!")
    pattern = line[1:] if negated else line
    directories_only = pattern.endswith("/")
    pattern = pattern.removesuffix("/")
    if not pattern or len(pattern) > _MAX_PATTERN:
        return None
    try:
        if "/" not in pattern:  # a name, at any depth
            return _COMPONENTS + _glob(pattern, 0), negated, directories_only
        pattern = pattern.removeprefix("/")
        # git compares the part before the first wildcard as text and matches the rest on
        # its own, where a ** just after that part counts as one at the start.
        return _glob(pattern, _literal_length(pattern)), negated, directories_only
    except _NeverMatches:
        return None


def _literal_length(pattern: str) -> int:
    match = re.search(r"[*?\[\\]", pattern)
    return len(pattern) if match is None else match.start()


def _glob(pattern: str, start: int) -> str:
    """``pattern`` (no trailing slash) as an expression: ``**`` is special at ``start``,
    after a slash, or at the end; what follows a ``**/`` or a star is made atomic where it
    is followed by another one."""
    parts: list[str] = []  # each either a wildcard marker or an expression
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "*":
            end = index
            while end < len(pattern) and pattern[end] == "*":
                end += 1
            at_start = index in (0, start) or pattern[index - 1] == "/"
            if end - index > 1 and at_start and pattern[end : end + 1] in ("", "/"):
                parts.append("**/" if end < len(pattern) else "**")
                end += end < len(pattern)
            else:
                parts.append("*")
            index = end
        elif char == "?":
            parts.append("[^/]")
            index += 1
        elif char == "[":
            expression, index = _bracket(pattern, index + 1)
            parts.append(expression)
        else:
            if char == "\\":
                index += 1
                if index == len(pattern):
                    raise _NeverMatches
                char = pattern[index]
            parts.append("/" if char == "/" else re.escape(char))
            index += 1
    return _joined(parts)


def _joined(parts: list[str]) -> str:
    """The parts as one expression. A star followed by another in its component, and a
    ``**/`` followed by another ``**``, takes the first place where what comes before the
    next one fits: atomic, so that failing never retries the other places."""
    out: list[str] = []
    index = 0
    while index < len(parts):
        part = parts[index]
        stop = _next_wildcard(parts, index + 1, part)
        if part in ("*", "**/") and stop < len(parts):
            wildcard = "[^/]*?" if part == "*" else "(?:[^/]*/)*?"
            out.append(f"(?>{wildcard}{_joined(parts[index + 1 : stop])})")
            index = stop
            continue
        out.append({"*": "[^/]*", "**/": _COMPONENTS, "**": ".*"}.get(part, part))
        index += 1
    return "".join(out)


def _next_wildcard(parts: list[str], index: int, kind: str) -> int:
    """Where the wildcard after a star in its component is, or the ``**`` after a ``**/``;
    ``len(parts)`` when there is none."""
    ends: tuple[str, ...]
    stops: tuple[str, ...]
    if kind == "*":
        ends, stops = ("/",), ("*",)
    elif kind == "**/":
        ends, stops = (), ("**/", "**")
    else:
        return len(parts)
    while index < len(parts) and parts[index] not in stops:
        if parts[index] in ends:
            return len(parts)
        index += 1
    return index


def _bracket(pattern: str, index: int) -> tuple[str, int]:
    """A ``[...]`` whose content starts at ``index``: its expression and the index after it
    (wildmatch.c: ``]`` first is a member, ``\\`` escapes, ``a-z`` ranges, ``[:class:]``)."""
    negated = pattern.startswith(("!", "^"), index)
    index += negated
    start = index
    members: list[str] = []
    while True:
        if index >= len(pattern):
            raise _NeverMatches
        if pattern[index] == "]" and index != start:
            break
        member, index = _member(pattern, index)
        members.append(member)
    body = "".join(members)
    if negated:
        return f"[^/{body}]", index + 1
    return f"(?!/)[{body}]", index + 1


def _member(pattern: str, index: int) -> tuple[str, int]:
    """The bracket member at ``index`` (a class, a range, a character) as a character class's
    text, and the index after it."""
    if pattern.startswith("[:", index):
        end = pattern.find("]", index + 2)
        if end == -1:
            raise _NeverMatches
        if end > index + 2 and pattern[end - 1] == ":":  # else "[" is a member
            name = pattern[index + 2 : end - 1]
            if name not in _CLASSES:
                raise _NeverMatches
            return _CLASSES[name], end + 1
    low, index = _character(pattern, index)
    if pattern.startswith("-", index) and pattern[index + 1 : index + 2] not in ("", "]"):
        high, index = _character(pattern, index + 1)
        # wildmatch.c compares the first character on its own too: [c-a] is [c].
        return (f"{re.escape(low)}-{re.escape(high)}" if low <= high else re.escape(low)), index
    return re.escape(low), index


def _character(pattern: str, index: int) -> tuple[str, int]:
    """The character at ``index`` (a backslash escapes the next), and the index after it."""
    index += pattern.startswith("\\", index)
    if index >= len(pattern):
        raise _NeverMatches
    return pattern[index], index + 1
