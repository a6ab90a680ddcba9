"""Large inputs described small: hypothesis prints a failing example's arguments in full, so a
100,000-bracket body or a 3,000-image review is drawn as a recipe (``Repeat(b"[", 100000)``)
and made into bytes only when it is used."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Repeat:
    """``prefix``, then ``unit`` ``count`` times, then ``suffix``."""

    unit: bytes
    count: int
    prefix: bytes = b""
    suffix: bytes = b""

    def render(self) -> bytes:
        return self.prefix + self.unit * self.count + self.suffix


@dataclass(frozen=True)
class Numbered:
    """``prefix``, then ``line`` formatted with ``i`` (and ``i - 1`` as ``j``) for ``i`` in
    ``start..count-1``, then ``suffix``: chains such as ``m{i}: &m{i} {<<: *m{j}}``."""

    line: str
    count: int
    prefix: str = ""
    suffix: str = ""
    start: int = 1

    def render(self) -> bytes:
        lines = (self.line.format(i=i, j=i - 1) for i in range(self.start, self.count))
        return (self.prefix + "".join(lines) + self.suffix.format(n=self.count - 1)).encode()


@dataclass(frozen=True)
class Nest:
    """``prefix``, ``opener`` ``count`` times, ``middle``, ``closer`` ``count`` times,
    ``suffix``: ``${A:-${A:- ... }}``."""

    opener: bytes
    closer: bytes
    count: int
    prefix: bytes = b""
    middle: bytes = b""
    suffix: bytes = b""

    def render(self) -> bytes:
        return (
            self.prefix + self.opener * self.count + self.middle + self.closer * self.count
        ) + self.suffix


Recipe = Repeat | Numbered | Nest
Content = bytes | Recipe


def render(content: Content) -> bytes:
    return content if isinstance(content, bytes) else content.render()
