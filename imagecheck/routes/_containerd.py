"""containerd's registry host directories (the CRI plugin's ``config_path``, ``ctr images pull
--hosts-dir``, e.g. ``/etc/containerd/certs.d``) as a :class:`~imagecheck.routes.Router`.

For a reference on registry ``host``, containerd 1.6 (``remotes/docker/config``) reads the first
of ``<root>/<host with ":port" as "_port_">``, ``<root>/<host>``, ``<root>/_default`` that
exists (``hostPaths``, ``HostDirFromRoot``). In it, ``hosts.toml`` lists the hosts to ask
(``_containerd_toml``); with no ``hosts.toml`` (or an empty one), Docker's layout applies:
``*.crt`` files are CAs, ``*.cert`` files client certificates with their ``*.key``
(``loadCertFiles``). When no directory exists, or the file leaves the server out, the
registry's own endpoint comes last (``ConfigureHosts``): ``docker.io`` is
``https://registry-1.docker.io``; a loopback host is plain HTTP, TLS unverified; any other is
HTTPS. The resolver then asks, in order, the hosts whose capabilities allow the request
(``pull`` and ``resolve`` for a tag, ``pull`` for a digest: ``filterHosts``), adds
``?ns=<registry>`` for a host that is not the registry's own (``addNamespace``, ``isProxy``)
and keeps the first failure that is not a 404 (``Resolve``): :attr:`Verdict.FIRST_FAILURE`.

Every directory is read when the router is built, bounded, so asking it does no I/O.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from imagecheck._files import read_regular_file
from imagecheck.errors import ConfigFileError, ImagecheckError
from imagecheck.reference import Reference
from imagecheck.reference._rules import split_port
from imagecheck.routes._containerd_toml import HostConfig, parse_hosts_file
from imagecheck.routes._containerd_url import HostURL
from imagecheck.routes._types import Endpoint, HostTLS, Route, Verdict

# A node's certs.d holds a directory per registry it pulls from: tens, not hundreds.
MAX_HOST_DIRS = 256
# Files looked at in one host directory without a hosts.toml (Docker's certificate layout).
MAX_CERT_DIR_ENTRIES = 256
MAX_HOSTS_TOML = 64 * 1024

_DOCKER_HUB = "docker.io"
_DOCKER_HUB_API = "registry-1.docker.io"
_DEFAULT_DIR = "_default"
_SERVER_DEFAULT = HostURL("https", "", "/v2")


@dataclass(frozen=True, slots=True)
class _HostDir:
    """One registry's directory, read: its hosts in order (the server last, ``host`` empty
    when containerd fills in the registry's default endpoint), or why containerd fails every
    pull it serves."""

    hosts: tuple[HostConfig, ...] = ()
    origin: str = ""
    broken: str | None = None


class HostsDirRouter:
    """The routes containerd takes with ``root`` as its registry configuration directory."""

    def __init__(self, root: Path, directories: Mapping[str, _HostDir]) -> None:
        self.root = root
        self._directories = dict(directories)

    def route(self, ref: Reference, text: str) -> Route:
        source = f"hosts.toml in {self.root}"
        directory = self._directory(ref.registry)
        if directory is not None and directory.broken is not None:
            return Route((), Verdict.FIRST_FAILURE, blocked=directory.broken, source=source)
        if directory is None:
            directory = _HostDir((HostConfig(_SERVER_DEFAULT),))
        configs = list(directory.hosts)
        if configs and not configs[-1].url.host:
            configs[-1] = _default_host(ref.registry, configs[-1])
        endpoints = tuple(_endpoint(ref, config, directory.origin) for config in configs)
        return Route(endpoints, Verdict.FIRST_FAILURE, source=source)

    def _directory(self, host: str) -> _HostDir | None:
        for name in (_port_directory(host), host, _DEFAULT_DIR):
            if name in self._directories:
                return self._directories[name]
        return None


def load_hosts_dir(path: Path) -> HostsDirRouter:
    """Read the containerd registry configuration directory ``path`` (``certs.d``): every
    host directory in it, each ``hosts.toml`` or Docker-style certificate set. Raises
    :class:`~imagecheck.errors.ConfigFileError` for a directory or file that cannot be used."""
    root = Path(path)
    directories: dict[str, _HostDir] = {}
    for name in _list(root, MAX_HOST_DIRS, "registry host directories"):
        directory = _read_entry(root / name)
        if directory is not None:
            directories[name] = directory
    return HostsDirRouter(root, directories)


def _read_entry(path: Path) -> _HostDir | None:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None  # a dangling symlink: containerd's os.Stat finds nothing there either
    except OSError as exc:
        raise ConfigFileError(path, f"cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(mode):
        return _HostDir(broken=f"{path} is not a directory: containerd cannot read a hosts.toml")
    return _read_directory(path)


def _read_directory(directory: Path) -> _HostDir:
    file = directory / "hosts.toml"
    data = _read_hosts_toml(file)
    if data:
        hosts = parse_hosts_file(_decode(data, file), str(directory), file)
        if hosts is not None:
            return _HostDir(hosts, str(file))
        # containerd 1.6 cannot decode a file without a [host] table and falls back to the
        # directory's certificate files; say so where the endpoint is named.
        return _cert_files(directory, f"{file} (ignored: no [host] table, as containerd 1.6)")
    return _cert_files(directory, str(directory))


def _read_hosts_toml(file: Path) -> bytes:
    try:
        return read_regular_file(file, limit=MAX_HOSTS_TOML, what="hosts.toml", error=_Unusable)
    except _Unusable as exc:
        if not file.exists():
            return b""  # no hosts.toml: Docker's certificate layout
        raise ConfigFileError(file, str(exc).replace(f" {file}", "", 1)) from None


class _Unusable(ImagecheckError):
    """A file that cannot be read, before it is named as a configuration file."""


def _decode(data: bytes, file: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigFileError(file, "not UTF-8 text", line=line) from None


def _cert_files(directory: Path, origin: str) -> _HostDir:
    """Docker's ``certs.d`` layout: ``*.crt`` CAs, ``*.cert`` client certificates each with
    the ``*.key`` of the same name when there is one, in name order."""
    ca_files: list[str] = []
    pairs: list[tuple[str, str]] = []
    for name in sorted(_list(directory, MAX_CERT_DIR_ENTRIES, "files")):
        path = directory / name
        if path.is_dir() and not path.is_symlink():
            continue  # as Go's DirEntry.IsDir: the entry itself, symlinks not followed
        if name.endswith(".crt"):
            ca_files.append(str(path))
        if name.endswith(".cert"):
            key = directory / (name[: -len(".cert")] + ".key")
            pairs.append((str(path), str(key) if key.exists() else ""))
    server = HostConfig(_SERVER_DEFAULT, ca_files=tuple(ca_files), client_pairs=tuple(pairs))
    return _HostDir((server,), origin)


def _list(directory: Path, limit: int, what: str) -> list[str]:
    names: list[str] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if len(names) == limit:
                    raise ConfigFileError(directory, f"more than {limit} {what}")
                names.append(entry.name)
    except FileNotFoundError:
        raise ConfigFileError(directory, "no such directory") from None
    except NotADirectoryError:
        raise ConfigFileError(directory, "not a directory") from None
    except OSError as exc:
        raise ConfigFileError(directory, f"cannot read: {exc.strerror or exc}") from None
    return names


def _port_directory(host: str) -> str:
    """containerd's ``hostDirectory``: ``host:port`` is looked up as ``host_port_`` first."""
    colon = host.rfind(":")
    return f"{host[:colon]}_{host[colon + 1 :]}_" if colon > 0 else host


def _is_localhost(host: str) -> bool:
    """containerd's ``IsLocalhost``: ``localhost`` or a loopback IP, with or without port."""
    name, port = split_port(host)
    if port is not None and name.startswith("["):
        name = name[1:-1]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _default_host(registry: str, config: HostConfig) -> HostConfig:
    """The registry's own endpoint where the configuration names none, keeping the TLS and
    headers the file gave it; every capability, whatever the file said (ConfigureHosts)."""
    config = replace(config, pull=True, resolve=True)
    if registry == _DOCKER_HUB:
        return replace(config, url=HostURL("https", _DOCKER_HUB_API, "/v2"))
    if _is_localhost(registry):
        return replace(config, url=HostURL("http", registry, "/v2"), skip_verify=True)
    return replace(config, url=HostURL("https", registry, "/v2"))


def _is_proxy(registry: str, host: str) -> bool:
    """containerd's ``isProxy``: a host other than the registry's own (registry-1 for Hub)."""
    return host != registry and not (registry == _DOCKER_HUB and host == _DOCKER_HUB_API)


def _endpoint(ref: Reference, config: HostConfig, origin: str) -> Endpoint:
    url = config.url
    proxy = _is_proxy(ref.registry, url.host)
    if origin and config.line is not None and origin.endswith("hosts.toml"):
        origin = f"{origin}:{config.line}"
    return Endpoint(
        host=url.host,
        repository=ref.repository,
        scheme=url.scheme,
        path=url.path,
        tags=config.pull and config.resolve,
        digests=config.pull,
        tls=HostTLS(
            ca_files=tuple(Path(ca) for ca in config.ca_files),
            client_pairs=tuple((Path(c), Path(k) if k else None) for c, k in config.client_pairs),
            skip_verify=bool(config.skip_verify),
        ),
        headers=config.headers,
        namespace=ref.registry if proxy else None,
        mirror=proxy,
        origin=origin,
    )
