"""Reading one ``registries.conf`` file (containers-registries.conf(5)) into plain values:
the TOML, the types of its fields, and the line each ``[[registry]]`` table starts on.

What the fields *mean* (defaults, checks, merging) is :mod:`._registries_conf`'s business.
The shape follows containers/image v5.23 (``pkg/sysregistriesv2``), which decodes the file
into Go structs with BurntSushi/toml: a key it does not know is ignored, a known key of the
wrong type is an error. The deprecated version 1 tables (``[registries.search]``,
``[registries.insecure]``, ``[registries.block]``) are read too, so that the caller can
convert them as containers/image does.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from imagecheck._files import read_regular_file
from imagecheck.errors import ConfigFileError, UsageError

# A real registries.conf is a few KiB; Fedora's, comments and all, is about 4 KiB.
MAX_FILE_BYTES = 256 * 1024
MAX_REGISTRIES = 1000
MAX_MIRRORS = 100
MAX_ALIASES = 10_000
MAX_SEARCH = 100

# tomllib ends its messages with "(at line N, column M)".
_AT_LINE = re.compile(r"\s*\(at line (\d+), column \d+\)$")
_REGISTRY_HEADER = re.compile(r'^\s*\[\[\s*"?registry"?\s*\]\]')
_MIRROR_HEADER = re.compile(r'^\s*\[\[\s*"?registry"?\s*\.\s*"?mirror"?\s*\]\]')


class Invalid(Exception):
    """A reason a file cannot be used, and the line it is on when known; the loader turns it
    into a :class:`~imagecheck.errors.ConfigFileError` naming the file."""

    def __init__(self, reason: str, line: int | None = None, key: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line
        # The key whose value is wrong: its own line is found when the error is raised.
        self.key = key


@dataclass(frozen=True, slots=True)
class RawMirror:
    location: str
    insecure: bool
    pull_from_mirror: str
    line: int | None


@dataclass(frozen=True, slots=True)
class RawRegistry:
    """One ``[[registry]]`` table as written (nothing trimmed, no defaults applied)."""

    prefix: str
    location: str
    insecure: bool
    blocked: bool
    mirror_by_digest_only: bool
    pull_from_mirror: str
    mirrors: tuple[RawMirror, ...]
    line: int | None


@dataclass(frozen=True, slots=True)
class RawFile:
    """One file's settings; None where the file does not set the key (a drop-in then leaves
    the value before it alone; an empty array is set, and empties it)."""

    path: Path
    registries: tuple[RawRegistry, ...]
    search: tuple[str, ...] | None
    search_line: int | None
    mode: str
    mode_line: int | None
    aliases: tuple[tuple[str, str, int | None], ...]
    helpers: bool  # credential-helpers is non-empty (it only counts for "mixing v1 and v2")
    v1_search: tuple[str, ...]
    v1_insecure: tuple[str, ...]
    v1_block: tuple[str, ...]

    @property
    def v1(self) -> bool:
        """containers/image's ``V1RegistriesConf.Nonempty``: an empty array does not count."""
        return bool(self.v1_search or self.v1_insecure or self.v1_block)

    @property
    def v2(self) -> bool:
        """``V2RegistriesConf.Nonempty``: any v2 setting, an empty array not counting."""
        return bool(self.registries or self.search or self.helpers or self.mode or self.aliases)


def read_file(path: Path) -> RawFile:
    """Read and decode ``path``; :class:`ConfigFileError` names the file (and the line)."""
    try:
        data = read_regular_file(
            path, limit=MAX_FILE_BYTES, what="registries configuration", error=UsageError
        )
    except UsageError as exc:
        raise ConfigFileError(path, _after_path(str(exc), path)) from None
    try:
        return decode(path, data)
    except Invalid as exc:
        raise ConfigFileError(path, exc.reason, line=exc.line) from None


def _after_path(message: str, path: Path) -> str:
    """``cannot read registries configuration PATH: why`` without the path (the error names
    it once, in front)."""
    return message.replace(f" {path}", "", 1)


def decode(path: Path, data: bytes) -> RawFile:
    try:
        text = data.decode("utf-8")
        document = tomllib.loads(text)
    except UnicodeDecodeError:
        raise Invalid("not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _AT_LINE.search(message)
        line = int(found.group(1)) if found else None
        raise Invalid(f"not valid TOML: {_AT_LINE.sub('', message)}", line) from None
    lines = text.splitlines()
    search = _strings(document, "unqualified-search-registries", MAX_SEARCH)
    mode_line = _key_line(lines, "short-name-mode")
    v1 = _table(document, "registries")
    return RawFile(
        path=path,
        registries=_registries(document, lines),
        search=search,
        search_line=_key_line(lines, "unqualified-search-registries"),
        mode=_string(document, "short-name-mode", line=mode_line),
        mode_line=mode_line,
        aliases=_aliases(document, lines),
        helpers=bool(_strings(document, "credential-helpers", MAX_SEARCH)),
        v1_search=_v1_list(v1, "search"),
        v1_insecure=_v1_list(v1, "insecure"),
        v1_block=_v1_list(v1, "block"),
    )


# --- typed fields ------------------------------------------------------------------------


def _kind(value: object) -> str:
    names = {bool: "a boolean", str: "a string", int: "an integer", float: "a float"}
    name = names.get(type(value))
    if name:
        return name
    if isinstance(value, list):
        return "an array"
    return "a table" if isinstance(value, dict) else "a date"


def _string(table: dict[str, object], key: str, where: str = "", line: int | None = None) -> str:
    value = table.get(key, "")
    if not isinstance(value, str):
        raise Invalid(f"{where}{key} must be a string, not {_kind(value)}", line, key)
    return value


def _bool(table: dict[str, object], key: str, where: str, line: int | None) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise Invalid(f"{where}{key} must be true or false, not {_kind(value)}", line, key)
    return value


def _strings(
    table: dict[str, object], key: str, limit: int, where: str = ""
) -> tuple[str, ...] | None:
    if key not in table:
        return None
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise Invalid(f"{where}{key} must be an array of strings")
    if len(value) > limit:
        raise Invalid(f"{where}{key} has more than {limit} entries")
    return tuple(value)


def _table(table: dict[str, object], key: str, where: str = "") -> dict[str, object]:
    value = table.get(key, {})
    if not isinstance(value, dict):
        raise Invalid(f"{where}{key} must be a table, not {_kind(value)}")
    return value


def _tables(
    table: dict[str, object], key: str, limit: int, where: str = ""
) -> list[dict[str, object]]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise Invalid(f"{where}{key} must be an array of tables ([[{where}{key}]])")
    if len(value) > limit:
        raise Invalid(f"more than {limit} [[{where}{key}]] tables")
    return value


# --- the tables --------------------------------------------------------------------------


def _registries(document: dict[str, object], lines: list[str]) -> tuple[RawRegistry, ...]:
    tables = _tables(document, "registry", MAX_REGISTRIES)
    starts = _header_lines(lines, _REGISTRY_HEADER, len(tables))
    mirror_starts = _header_lines(lines, _MIRROR_HEADER, None)
    registries = []
    for index, table in enumerate(tables):
        line = starts[index] if starts else None
        end = starts[index + 1] if starts and index + 1 < len(starts) else len(lines) + 1
        mine = [n for n in mirror_starts or () if line is not None and line < n < end]
        try:
            registries.append(_registry(table, line, mine))
        except Invalid as exc:
            exc.line = _key_after(lines, exc.key, exc.line)
            raise
    return tuple(registries)


def _registry(table: dict[str, object], line: int | None, mirror_lines: list[int]) -> RawRegistry:
    where = "registry."
    mirrors = _tables(table, "mirror", MAX_MIRRORS, where)
    if len(mirror_lines) != len(mirrors):
        mirror_lines = []
    return RawRegistry(
        prefix=_string(table, "prefix", where, line),
        location=_string(table, "location", where, line),
        insecure=_bool(table, "insecure", where, line),
        blocked=_bool(table, "blocked", where, line),
        mirror_by_digest_only=_bool(table, "mirror-by-digest-only", where, line),
        pull_from_mirror=_string(table, "pull-from-mirror", where, line),
        mirrors=tuple(
            _mirror(mirror, mirror_lines[i] if mirror_lines else line)
            for i, mirror in enumerate(mirrors)
        ),
        line=line,
    )


def _mirror(table: dict[str, object], line: int | None) -> RawMirror:
    where = "registry.mirror."
    return RawMirror(
        location=_string(table, "location", where, line),
        insecure=_bool(table, "insecure", where, line),
        pull_from_mirror=_string(table, "pull-from-mirror", where, line),
        line=line,
    )


def _aliases(
    document: dict[str, object], lines: list[str]
) -> tuple[tuple[str, str, int | None], ...]:
    aliases = _table(document, "aliases")
    if len(aliases) > MAX_ALIASES:
        raise Invalid(f"more than {MAX_ALIASES} [aliases]")
    found = []
    for name, value in aliases.items():
        line = _key_line(lines, name)
        if not isinstance(value, str):
            raise Invalid(f"aliases.{name} must be a string, not {_kind(value)}", line)
        found.append((name, value, line))
    return tuple(found)


def _v1_list(v1: dict[str, object], key: str) -> tuple[str, ...]:
    return _strings(_table(v1, key, "registries."), "registries", MAX_REGISTRIES) or ()


# --- lines ---------------------------------------------------------------------------------


def _header_lines(lines: list[str], header: re.Pattern[str], expected: int | None) -> list[int]:
    """The 1-based lines of the headers ``header`` matches; empty when their number is not
    ``expected`` (tables written inline, say): then errors name no line rather than a wrong
    one."""
    found = [number for number, text in enumerate(lines, 1) if header.match(text)]
    return found if expected is None or len(found) == expected else []


def _key_after(lines: list[str], key: str, start: int | None) -> int | None:
    """The line of ``key`` in the table that starts at line ``start`` (its first assignment
    from there on), else ``start``: a wrong value is named where it is written."""
    if not key or start is None:
        return start
    found = _key_line(lines[start - 1 :], key)
    return start + found - 1 if found is not None else start


def _key_line(lines: list[str], key: str) -> int | None:
    pattern = re.compile(rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*=""")
    for number, text in enumerate(lines, 1):
        if pattern.match(text):
            return number
    return None
