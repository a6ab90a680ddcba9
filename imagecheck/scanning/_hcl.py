"""The part of HCL (https://github.com/hashicorp/hcl/blob/main/hclsyntax/spec.md) that bake
files write their tags and contexts in: blocks, attributes, strings, lists and objects.

Any other expression (a function call, a conditional, a ``for``, arithmetic) is skipped to
its end and read as None; a string with ``${...}`` keeps it as written. Bounded by
construction: one pass to tokens (at most :data:`MAX_TOKENS`), then one over them, blocks and
brackets nested at most :data:`MAX_DEPTH` deep; past either, or on a syntax error, the reader
returns the line and why, and the file is not read further.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["MAX_DEPTH", "MAX_TOKENS", "Block", "Text", "Value", "read_hcl"]

MAX_TOKENS = 500_000
MAX_DEPTH = 64

_TOKEN = re.compile(
    r"""(?P<space>[ \t\r]+)|(?P<nl>\n)|(?P<comment>(?:\#|//)[^\n]*)|(?P<block>/\*)"""
    r"""|(?P<str>")|(?P<heredoc><<-?(?P<marker>[A-Za-z_][A-Za-z0-9_]*)[ \t]*\n)"""
    r"""|(?P<id>[A-Za-z_][A-Za-z0-9_-]*)|(?P<num>[0-9][0-9.eE+-]*)"""
    r"""|(?P<op>==|!=|<=|>=|=>|&&|\|\||\.\.\.|[{}\[\]()=,:?.+\-*/%<>!])"""
)
_CLOSE = {"{": "}", "[": "]", "(": ")"}


@dataclass(frozen=True, slots=True)
class Text:
    """A string literal's text (``${...}`` as written) and its line."""

    value: str
    line: int


Value = Text | list["Value"] | dict[str, "Value"] | None


@dataclass(slots=True)
class Block:
    type: str
    labels: list[str] = field(default_factory=list)
    attributes: dict[str, Value] = field(default_factory=dict)
    blocks: list[Block] = field(default_factory=list)


class _Error(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


# (kind, text, line): kind is "nl", "str", "id", "num", "op", or "end".
_Token = tuple[str, str, int]


def read_hcl(text: str) -> Block | tuple[int, str]:
    """The file's top-level body, or (line, why) when it cannot be read."""
    try:
        return _Parser(_tokens(text)).body()
    except _Error as exc:
        return exc.line, exc.message


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, line, n = 0, 1, len(text)
    while i < n:
        if len(tokens) > MAX_TOKENS:
            raise _Error(line, f"more than {MAX_TOKENS:,} tokens")
        match = _TOKEN.match(text, i)
        if match is None:
            raise _Error(line, f"unexpected character {text[i]!r}")
        kind = match.lastgroup or ""
        if kind == "str":
            end = _string_end(text, i, line)
            tokens.append(("str", _unescaped(text[i + 1 : end - 1]), line))
            i = end
            continue
        if kind == "block":
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif kind == "heredoc":
            end, body = _heredoc(text, match)
            tokens.append(("str", body, line))
        else:
            end = match.end()
            if kind in ("nl", "id", "num", "op"):
                tokens.append((kind, match.group(), line))
        line += text.count("\n", i, end)
        i = end
    tokens.append(("end", "", line))
    return tokens


def _string_end(text: str, start: int, line: int) -> int:
    """The index after the quoted template at ``start``: ``${...}`` may hold strings."""
    stack = ['"']
    i = start + 1
    while stack:
        if i >= len(text) or (stack[-1] == '"' and text[i] == "\n"):
            raise _Error(line, "unterminated string")
        if len(stack) > MAX_DEPTH:
            raise _Error(line, f"templates nested more than {MAX_DEPTH} deep")
        c = text[i]
        if stack[-1] == '"':
            if c == "\\" or text.startswith(("$${", "%%{"), i):
                i += 2
                continue
            if c == '"':
                stack.pop()
            elif c in "$%" and text.startswith("{", i + 1):
                stack.append("{")
                i += 1
        elif c == '"':
            stack.append('"')
        elif c == "{":
            stack.append("{")
        elif c == "}":
            stack.pop()
        i += 1
    return i


def _unescaped(raw: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), raw)


def _heredoc(text: str, match: re.Match[str]) -> tuple[int, str]:
    marker = match.group("marker")
    start = match.end()
    end = re.compile(rf"^[ \t]*{re.escape(marker)}[ \t]*$", re.MULTILINE).search(text, start)
    if end is None:
        raise _Error(text.count("\n", 0, start), f"heredoc {marker} is never closed")
    return end.end(), text[start : end.start()]


class _Parser:
    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.at = 0
        self.depth = 0

    def peek(self) -> _Token:
        return self.tokens[self.at]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        if token[0] != "end":
            self.at += 1
        return token

    def skip_newlines(self) -> None:
        while self.peek()[0] == "nl":
            self.at += 1

    def nest(self, line: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Error(line, f"nested more than {MAX_DEPTH} deep")

    def body(self, block: Block | None = None) -> Block:
        block = block or Block("")
        while True:
            self.skip_newlines()
            kind, text, line = self.take()
            if kind == "end" or (kind, text) == ("op", "}"):
                if (kind == "end") != (block.type == ""):
                    raise _Error(line, "unbalanced braces")
                return block
            if kind != "id":
                raise _Error(line, f"unexpected {text!r}")
            if self.peek()[1] == "=" and self.peek()[0] == "op":
                self.take()
                block.attributes[text] = self.expression()
                continue
            child = Block(text)
            while self.peek()[0] in ("str", "id"):
                child.labels.append(self.take()[1])
            opening = self.take()
            if opening[1] != "{":
                raise _Error(opening[2], f"expected {{ after {text}")
            self.nest(line)
            block.blocks.append(self.body(child))
            self.depth -= 1

    def expression(self) -> Value:
        kind, text, line = self.peek()
        value: Value = None
        if kind == "str":
            self.take()
            value = Text(text, line)
        elif (kind, text) == ("op", "["):
            value = self.collection("]")
        elif (kind, text) == ("op", "{"):
            value = self.collection("}")
        if self.peek()[0] in ("nl", "end") or self.peek()[1] in (",", "]", "}", ")"):
            return value
        self.skip_rest()  # an operator, a call, a conditional: not a literal
        return None

    def collection(self, close: str) -> Value:
        self.nest(self.take()[2])
        items: list[Value] = []
        entries: dict[str, Value] = {}
        while True:
            self.skip_newlines()
            kind, text, line = self.peek()
            if (kind, text) == ("op", close):
                self.take()
                break
            if kind == "end":
                raise _Error(line, f"expected {close!r}")
            if close == "]":
                items.append(self.expression())
            else:
                self.take()
                if self.peek()[1] not in ("=", ":"):
                    self.skip_rest()
                else:
                    self.take()
                    value = self.expression()
                    if kind in ("id", "str"):
                        entries[text] = value
            self.skip_newlines()
            if self.peek()[1] == ",":
                self.take()
        self.depth -= 1
        return items if close == "]" else entries

    def skip_rest(self) -> None:
        """Past the rest of an expression: to a newline, comma or closer outside brackets."""
        stack: list[str] = []
        while True:
            kind, text, line = self.peek()
            if kind == "end":
                if stack:
                    raise _Error(line, f"expected {stack[-1]!r}")
                return
            if not stack and (kind == "nl" or text in (",", "]", "}", ")")):
                return
            self.take()
            if kind != "op":
                continue
            if text in _CLOSE:
                if len(stack) > MAX_DEPTH:
                    raise _Error(line, f"nested more than {MAX_DEPTH} deep")
                stack.append(_CLOSE[text])
            elif stack and text == stack[-1]:
                stack.pop()
            elif text in ("]", "}", ")"):
                raise _Error(line, f"unexpected {text!r}")
