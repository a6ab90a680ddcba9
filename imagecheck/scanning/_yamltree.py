"""YAML documents as a small node tree that remembers where every value is written.

Why not ``yaml.compose_all``: its nodes resolve an alias to the anchored node itself, so an
image reached through ``*base`` can only be reported on the anchor's line, and every use of
the anchor looks the same. We read libyaml's *events* (``CSafeLoader``, the C parser; the pure
Python ``SafeLoader`` if PyYAML was built without it) and compose them here into nodes that
keep an :class:`Alias` where the text has one. The tree is composed without recursion, so
deep nesting cannot exhaust the stack, and nothing is constructed: unknown tags
(``!Ref``), duplicate keys and unhashable keys never fail a scan.

Bounded by construction, since the file may come from a hostile change: a document nested more
than :data:`MAX_DEPTH` deep (as libyaml itself refuses; PyYAML's own parser would go on) or of
more than :data:`MAX_NODES` nodes is a problem at the line where it crosses the limit, like a
syntax error.

A syntax error ends only the document it is in: the problem is recorded with its line and
parsing resumes at the next ``---`` at or after the error. A line starting with ``---`` ends
any scalar or collection in YAML (the spec's c-forbidden), so that is where a new document
can be parsed on its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import yaml

__all__ = [
    "DEFAULT_LOADER",
    "Alias",
    "Mapping",
    "Node",
    "Position",
    "Scalar",
    "Sequence",
    "SyntaxProblem",
    "documents",
]

if TYPE_CHECKING:
    Loader = type[yaml.CSafeLoader] | type[yaml.SafeLoader]
# libyaml's C parser when PyYAML was built with it; the pure-Python one gives the same events.
DEFAULT_LOADER: Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DOCUMENT_MARKER = re.compile(r"^---(?:[ \t]|$)", re.MULTILINE)
# libyaml's own limit (exceeded maximum nesting depth), kept for the pure-Python parser too.
MAX_DEPTH = 1000
# A composed node takes ~200 bytes: a document's tree stays under ~200 MB however long the
# input (stdin may be 32 MiB). The largest CRDs have some 100,000.
MAX_NODES = 1_000_000

Position = tuple[int, int]
"""(line, column), both 1-based."""


@dataclass(eq=False, slots=True)
class Scalar:
    value: str
    at: Position
    style: str | None  # None or "" for plain; one of ' " | > otherwise
    tag: str | None


@dataclass(eq=False, slots=True)
class Sequence:
    at: Position
    items: list[Node] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class Mapping:
    at: Position
    source: str = ""  # the text of a flow mapping, to recognise {{ .Values.image }}
    pairs: list[tuple[Node, Node]] = field(default_factory=list)


@dataclass(eq=False, slots=True)
class Alias:
    """``*name`` where it is written; ``target`` is the anchored node."""

    target: Scalar | Sequence | Mapping
    at: Position


Node = Scalar | Sequence | Mapping | Alias


@dataclass(frozen=True, slots=True)
class SyntaxProblem:
    line: int | None
    message: str


class _LimitReached(yaml.YAMLError):
    """A document over :data:`MAX_DEPTH` or :data:`MAX_NODES`; ``line`` in the whole text."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


def documents(text: str, *, loader: Loader = DEFAULT_LOADER) -> Iterator[Node | SyntaxProblem]:
    """Each document's root node, in order, and a :class:`SyntaxProblem` for each broken one.

    Empty documents (``---`` followed by nothing or only comments) yield nothing. ``loader``
    only chooses the parser: libyaml's, or PyYAML's own (the same events, 10x slower).
    """
    start = 0  # character offset of the part still to parse; always a line start
    line_offset = 0  # lines before ``start``
    while True:
        try:
            yield from _Composer(text, start, line_offset, loader).documents()
        except yaml.YAMLError as exc:
            problem = _problem(exc, text, start, line_offset)
            yield problem
            resume = _resume_offset(text, start, line_offset, problem.line)
            if resume is None:
                return
            line_offset += text.count("\n", start, resume)
            start = resume
        else:
            return


def _resume_offset(text: str, start: int, line_offset: int, error_line: int | None) -> int | None:
    """The offset of the first ``---`` line at or after the error line, past ``start``."""
    if error_line is None:
        return None
    pos = start
    for _ in range(error_line - 1 - line_offset):
        pos = text.find("\n", pos) + 1
        if pos == 0:
            return None
    match = _DOCUMENT_MARKER.search(text, max(pos, start + 1))
    return None if match is None else match.start()


def _problem(exc: yaml.YAMLError, text: str, start: int, line_offset: int) -> SyntaxProblem:
    if isinstance(exc, _LimitReached):
        return SyntaxProblem(exc.line, exc.message)
    if isinstance(exc, yaml.reader.ReaderError) and isinstance(exc.character, int):
        # A control character. The reader checks all the input before parsing, so the
        # documents before it are lost too (rare enough). Its position counts bytes in libyaml
        # and characters in PyYAML: find the character itself.
        found = text.find(chr(exc.character), start)
        line = None if found == -1 else text.count("\n", 0, found) + 1
        return SyntaxProblem(line, f"invalid YAML: character {exc.character:#x}: {exc.reason}")
    if not isinstance(exc, yaml.MarkedYAMLError):
        return SyntaxProblem(None, _one_line(f"invalid YAML: {exc}"))
    mark = exc.problem_mark or exc.context_mark
    message = f"invalid YAML: {exc.problem or exc.context}"
    if exc.problem and exc.context:
        message += f" ({exc.context}"
        if exc.context_mark is not None and exc.context_mark.line != getattr(mark, "line", None):
            message += f" from line {exc.context_mark.line + 1 + line_offset}"
        message += ")"
    return SyntaxProblem(None if mark is None else mark.line + 1 + line_offset, _one_line(message))


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _Composer:
    """Compose one stream (or the rest of one, after an error) from parser events."""

    def __init__(self, text: str, start: int, line_offset: int, loader: Loader) -> None:
        self._text = text
        self._start = start
        self._line_offset = line_offset
        self._parser = loader(text[start:] if start else text)
        self._anchors: dict[str, Scalar | Sequence | Mapping] = {}

    def documents(self) -> Iterator[Node]:
        parser = self._parser
        try:
            parser.get_event()  # StreamStart
            while not parser.check_event(yaml.StreamEndEvent):
                parser.get_event()  # DocumentStart
                self._anchors = {}  # anchors never cross documents
                root = self._document()
                parser.get_event()  # DocumentEnd
                if not _is_empty(root):
                    yield root
        finally:
            parser.dispose()

    def _document(self) -> Node:
        """The document's root node (an empty plain scalar for an empty document)."""
        # Open collections: the node, its children so far, where a flow mapping starts.
        stack: list[tuple[Sequence | Mapping, list[Node], int | None]] = []
        nodes = 0
        while True:
            event = self._parser.get_event()
            node: Node
            if isinstance(event, yaml.NodeEvent):
                nodes += 1
                if nodes > MAX_NODES:
                    raise _LimitReached(
                        self._at(event)[0], f"YAML document over {MAX_NODES:,} nodes"
                    )
            if isinstance(event, yaml.CollectionStartEvent):
                if len(stack) == MAX_DEPTH:
                    message = f"YAML nested more than {MAX_DEPTH} deep"
                    raise _LimitReached(self._at(event)[0], message)
                opened: Sequence | Mapping
                if isinstance(event, yaml.SequenceStartEvent):
                    opened = Sequence(self._at(event))
                else:
                    opened = Mapping(self._at(event))
                self._anchor(event, opened)
                flow_start = _mark(event.start_mark).index if event.flow_style else None
                stack.append((opened, [], flow_start))
                continue
            if isinstance(event, yaml.CollectionEndEvent):
                node, children, flow_start = stack.pop()
                if isinstance(node, Mapping):
                    node.pairs = list(zip(children[::2], children[1::2], strict=True))
                    if flow_start is not None:
                        begin = self._start + flow_start
                        end = self._start + _mark(event.end_mark).index
                        node.source = self._text[begin:end]
                else:
                    node.items = children
            elif isinstance(event, yaml.ScalarEvent):
                node = Scalar(event.value, self._at(event), event.style, event.tag)
                self._anchor(event, node)
            elif isinstance(event, yaml.AliasEvent):
                node = Alias(self._alias_target(event), self._at(event))
            else:  # the parser never sends this inside a document
                raise yaml.composer.ComposerError(None, None, f"unexpected {event}", None)
            if not stack:
                return node
            stack[-1][1].append(node)

    def _at(self, event: yaml.Event) -> Position:
        mark = _mark(event.start_mark)
        return (mark.line + 1 + self._line_offset, mark.column + 1)

    def _anchor(self, event: yaml.NodeEvent, node: Scalar | Sequence | Mapping) -> None:
        if event.anchor is not None:
            self._anchors[event.anchor] = node

    def _alias_target(self, event: yaml.AliasEvent) -> Scalar | Sequence | Mapping:
        anchor = str(event.anchor)
        target = self._anchors.get(anchor)
        if target is None:
            mark = _mark(event.start_mark)
            raise yaml.composer.ComposerError(
                None,
                None,
                f"found undefined alias {anchor!r}",
                yaml.Mark("", mark.index, mark.line, mark.column, None, 0),
            )
        return target


class _Mark(Protocol):
    """libyaml's and PyYAML's marks alike; 0-based."""

    @property
    def index(self) -> int: ...
    @property
    def line(self) -> int: ...
    @property
    def column(self) -> int: ...


def _mark(mark: _Mark | None) -> _Mark:
    if mark is None:  # the parsers always set marks on events
        raise yaml.YAMLError("event without a position")
    return mark


def _is_empty(node: Node) -> bool:
    return isinstance(node, Scalar) and not node.style and not node.value
