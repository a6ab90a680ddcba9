"""One ``hosts.toml`` as containerd 1.6 reads it (``remotes/docker/config/hosts.go``,
``parseHostsFile`` and ``parseHostConfig``; the fields in ``docs/hosts.md``).

The file lists ``[host."URL"]`` tables, asked in the order they appear, then the root-level
``server`` last. Each has ``capabilities`` (``pull``, ``resolve``, ``push``; all three when the
list is missing or empty), ``ca`` (a path or a list), ``client`` (a path holding certificate
and key, a list of them, or a list of ``[certificate, key]`` pairs), ``skip_verify``,
``header`` (a value or a list of values per name) and ``override_path``. Relative paths are
relative to the file's directory. Keys containerd does not know are ignored, as it does.

Where containerd would log the file as undecodable and carry on without it, this reader
refuses it: a pre-flight that silently asked other hosts would hide the broken file. Errors
are :class:`~imagecheck.errors.ConfigFileError`, one line naming the file and the line.
"""

from __future__ import annotations

import os.path
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from imagecheck.errors import ConfigFileError
from imagecheck.routes._containerd_url import HostURL, URLProblem, parse_host_url

# Bounds on what one file may ask for; real files list a handful of hosts and headers.
MAX_HOSTS = 64
MAX_HEADERS = 32
MAX_HEADER_VALUES = 16
MAX_HEADER_VALUE = 4096
MAX_PATHS = 32

_CAPABILITIES = ("pull", "resolve", "push")
# RFC 9110 field names (tokens); values may not break the header block.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00\r\n]")
_AT_LINE = re.compile(r"\(at line (\d+), column \d+\)")
_KEY_LINE = re.compile(r"\s*(?:\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_-]+))\s*=")


@dataclass(frozen=True, slots=True)
class HostConfig:
    """One host of a ``hosts.toml``: where it is, what it may do, how to reach it. ``line``
    is where the file configures it (its table, or the ``server`` line)."""

    url: HostURL
    pull: bool = True
    resolve: bool = True
    ca_files: tuple[str, ...] = ()
    # (certificate, key); a key of "": the key is in the certificate's file.
    client_pairs: tuple[tuple[str, str], ...] = ()
    skip_verify: bool | None = None
    headers: tuple[tuple[str, str], ...] = ()
    line: int | None = None


def parse_hosts_file(text: str, base_dir: str, file: Path) -> tuple[HostConfig, ...] | None:
    """The hosts ``text`` (the content of ``file``) lists, the server last; relative paths
    joined to ``base_dir``. ``None`` for a file with no ``host`` table, which containerd 1.6
    cannot decode and ignores (containerd issue 10027)."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _AT_LINE.search(str(exc))
        reason = _AT_LINE.sub("", str(exc)).strip()
        raise ConfigFileError(
            file, f"not TOML: {reason}", line=int(match.group(1)) if match else None
        ) from None
    except RecursionError:
        raise ConfigFileError(file, "not TOML: nested too deeply") from None
    tables = document.get("host")
    if not isinstance(tables, dict):
        return None
    lines = _Lines(text)
    if len(tables) > MAX_HOSTS:
        raise ConfigFileError(file, f"more than {MAX_HOSTS} [host] tables", line=None)
    reader = _Reader(file, base_dir, lines)
    hosts = [reader.host(key, value) for key, value in tables.items()]
    hosts.append(reader.server(document))
    return tuple(hosts)


class _Reader:
    """Reads the fields of one table, raising errors that name the line of the field."""

    def __init__(self, file: Path, base_dir: str, lines: _Lines) -> None:
        self.file = file
        self.base_dir = base_dir
        self.lines = lines
        self.table: tuple[str, ...] = ()

    def fail(self, reason: str, key: str | None = None) -> ConfigFileError:
        where = f'[host."{self.table[1]}"] ' if self.table else ""
        return ConfigFileError(self.file, where + reason, line=self.lines.find(self.table, key))

    def host(self, key: str, table: object) -> HostConfig:
        self.table = ("host", key)
        if not isinstance(table, dict):
            raise self.fail("must be a table")
        try:
            url = parse_host_url(key, override_path=self._flag(table, "override_path") is True)
        except URLProblem as exc:
            raise self.fail(f"not a host URL: {exc}") from None
        if not url.host:
            raise self.fail("not a host URL: no host")
        return self._config(url, table)

    def server(self, document: Mapping[str, object]) -> HostConfig:
        self.table = ()
        server = document.get("server", "")
        if not isinstance(server, str):
            raise self.fail("server must be a string", "server")
        override = self._flag(document, "override_path") is True
        if not server:
            # The registry's default endpoint: containerd fills it in (ConfigureHosts).
            return self._config(HostURL("https", "", "/v2"), document)
        try:
            url = parse_host_url(server, override_path=override)
        except URLProblem as exc:
            raise self.fail(f"server is not a host URL: {exc}", "server") from None
        return self._config(url, document)

    def _config(self, url: HostURL, table: Mapping[str, object]) -> HostConfig:
        capabilities = self._capabilities(table.get("capabilities"))
        return HostConfig(
            url=url,
            pull="pull" in capabilities,
            resolve="resolve" in capabilities,
            ca_files=self._ca(table.get("ca")),
            client_pairs=self._client(table.get("client")),
            skip_verify=self._flag(table, "skip_verify"),
            headers=self._headers(table.get("header")),
            line=self.lines.find(self.table, "server" if not self.table else None),
        )

    def _flag(self, table: Mapping[str, object], key: str) -> bool | None:
        value = table.get(key)
        if value is not None and not isinstance(value, bool):
            raise self.fail(f"{key} must be true or false", key)
        return value if isinstance(value, bool) else None

    def _capabilities(self, value: object) -> frozenset[str]:
        names = self._strings(value, "capabilities", lower=True)
        for name in names:
            if name not in _CAPABILITIES:
                raise self.fail(f"unknown capability {name!r}", "capabilities")
        return frozenset(names or _CAPABILITIES)

    def _ca(self, value: object) -> tuple[str, ...]:
        if isinstance(value, str):
            return (self._path(value),)
        return tuple(self._path(item) for item in self._strings(value, "ca", what="a path or "))

    def _client(self, value: object) -> tuple[tuple[str, str], ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            return ((self._path(value), ""),)
        if not isinstance(value, list) or len(value) > MAX_PATHS:
            raise self.fail(f"client must be a path or a list of at most {MAX_PATHS}", "client")
        return tuple(self._pair(item) for item in value)

    def _pair(self, item: object) -> tuple[str, str]:
        if isinstance(item, str):
            return (self._path(item), "")
        if isinstance(item, list) and len(item) == 2 and all(isinstance(p, str) for p in item):
            cert, key = item
            return (self._path(cert), self._path(key) if key else "")
        raise self.fail("client pairs must be [certificate, key] paths", "client")

    def _headers(self, value: object) -> tuple[tuple[str, str], ...]:
        if value is None:
            return ()
        if not isinstance(value, dict) or len(value) > MAX_HEADERS:
            raise self.fail(f"header must be a table of at most {MAX_HEADERS} names", "header")
        headers: list[tuple[str, str]] = []
        for name, values in value.items():
            items = [values] if isinstance(values, str) else values
            if not isinstance(items, list) or len(items) > MAX_HEADER_VALUES:
                raise self.fail(f"header {name!r} must be a string or a list of strings", "header")
            for item in items:
                headers.append((name, self._header_value(name, item)))
        return tuple(headers)

    def _header_value(self, name: str, item: object) -> str:
        if not _TOKEN.fullmatch(name):
            raise self.fail(f"header name {name!r} is not a valid field name", "header")
        if not isinstance(item, str):
            raise self.fail(f"header {name!r} must be a string or a list of strings", "header")
        if len(item) > MAX_HEADER_VALUE or _BAD_VALUE.search(item):
            raise self.fail(
                f"header {name!r}: a value longer than {MAX_HEADER_VALUE} characters "
                "or holding a line break",
                "header",
            )
        return item

    def _strings(
        self, value: object, key: str, *, lower: bool = False, what: str = ""
    ) -> list[str]:
        if value is None:
            return []
        if (
            not isinstance(value, list)
            or len(value) > MAX_PATHS
            or not all(isinstance(item, str) for item in value)
        ):
            raise self.fail(f"{key} must be {what}a list of at most {MAX_PATHS} strings", key)
        return [item.lower() for item in value] if lower else list(value)

    def _path(self, value: str) -> str:
        # containerd's makeAbsPath: an absolute path as written, a relative one joined to the
        # file's directory and cleaned (Go's filepath.Join).
        if os.path.isabs(value):
            return value
        joined = os.path.join(self.base_dir, value) if self.base_dir else value
        return os.path.normpath(joined) if joined else joined


class _Lines:
    """Where a table or a key is written, for messages. A light scan of the text, not a second
    parser: a table header line is parsed by tomllib on its own; a key is found by name after
    its table's header. ``None`` when not found (a key in an inline table, say)."""

    def __init__(self, text: str) -> None:
        self.text_lines = text.splitlines()
        self.tables: dict[tuple[str, ...], int] = {}
        for number, line in enumerate(self.text_lines, start=1):
            stripped = line.strip()
            if stripped.startswith("[") and not stripped.startswith("[["):
                self.tables.setdefault(_table_path(stripped), number)

    def find(self, table: tuple[str, ...], key: str | None) -> int | None:
        start = self.tables.get(table, 0 if not table else -1)
        if start < 0:
            return None
        if key is None:
            return start or None
        if (*table, key) in self.tables:  # a sub-table: [host."URL".header]
            return self.tables[(*table, key)]
        for number in range(start + 1, len(self.text_lines) + 1):
            line = self.text_lines[number - 1]
            if line.lstrip().startswith("["):
                break
            match = _KEY_LINE.match(line)
            if match and key in match.groups():
                return number
        return start or None


def _table_path(header: str) -> tuple[str, ...]:
    try:
        node: object = tomllib.loads(header)
    except (tomllib.TOMLDecodeError, RecursionError):
        return ()
    path: list[str] = []
    while isinstance(node, dict) and len(node) == 1:
        name, node = next(iter(node.items()))
        path.append(name)
    return tuple(path)
