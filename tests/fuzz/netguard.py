"""Keeps every process the fuzz suite runs on this machine: a connection to an address outside
127.0.0.0/8 and ::1, or a name lookup that could reach a DNS server, is refused before a
packet leaves, and written to a log the properties read.

The hostile registry stand-in sends redirects and token realms to cloud metadata addresses
(``169.254.169.254`` and its decimal, hex, octal and IPv6 spellings) on purpose: the client
must refuse them. Should it not (the defect the property looks for), this guard is what stops
the request, whatever the client does with proxies. It is installed into the imagecheck
subprocesses through ``site/sitecustomize.py`` (on ``PYTHONPATH``) and into the pytest process
itself, for the in-process properties, by :func:`installed`.

``socket.socket.connect``/``connect_ex`` are where asyncio, anyio and the standard library
connect (non-blocking connects included), and ``socket.getaddrinfo`` is where they resolve
names; numeric hosts, ``localhost`` and the wildcard addresses resolve without DNS.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket
from collections.abc import Iterator
from typing import Any

ENV = "IMAGECHECK_FUZZ_NETLOG"
_LOCAL_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo
_state: dict[str, str | None] = {"log": None}


def is_local_address(host: str) -> bool:
    """Loopback or wildcard (which Linux connects to loopback)."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def _resolves_without_dns(host: str) -> bool:
    if host.lower() in _LOCAL_NAMES:
        return True
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
        return True
    try:
        socket.inet_aton(host)  # 2852039166, 0xa9fea9fe, 0251.0376.0251.0376, 169.254.43518
    except OSError:
        return False
    return True


def _record(what: str) -> None:
    path = _state["log"]
    if path is None:
        return
    with open(path, "a", encoding="utf-8", errors="backslashreplace") as log:
        log.write(what.replace("\n", "\\n") + "\n")


def _off_machine(sock: socket.socket, address: Any) -> bool:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    return not (isinstance(address, tuple) and is_local_address(str(address[0])))


def _connect(self: socket.socket, address: Any) -> None:
    if _off_machine(self, address):
        _record(f"connect {address!r}")
        raise ConnectionRefusedError(errno.ECONNREFUSED, "fuzz netguard: not on this machine")
    _real_connect(self, address)


def _connect_ex(self: socket.socket, address: Any) -> int:
    if _off_machine(self, address):
        _record(f"connect {address!r}")
        return errno.ECONNREFUSED
    return _real_connect_ex(self, address)


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else host
    if name is not None and not _resolves_without_dns(str(name)):
        _record(f"getaddrinfo {name!r}")
        raise socket.gaierror(socket.EAI_NONAME, "fuzz netguard: no DNS lookups")
    return _real_getaddrinfo(host, *args, **kwargs)


def install(log_path: str) -> None:
    _state["log"] = log_path
    socket.socket.connect = _connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = _getaddrinfo


def uninstall() -> None:
    _state["log"] = None
    socket.socket.connect = _real_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _real_connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = _real_getaddrinfo


@contextlib.contextmanager
def installed(log_path: str) -> Iterator[None]:
    """The guard in this process, for the duration."""
    install(log_path)
    try:
        yield
    finally:
        uninstall()


def install_from_environment() -> None:
    path = os.environ.get(ENV)
    if path:
        install(path)
