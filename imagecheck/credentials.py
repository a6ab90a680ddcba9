"""Where credentials come from: :class:`Credentials` values answered by *keychains*.

A keychain answers one question, "which credentials should be offered to this registry
for this repository?", with an ordered list of candidates (empty: go anonymous). Sources
compose through :class:`ChainKeychain`, whose order is the documented precedence.

Everything is read and validated when a keychain is built, so a broken file is a one-line
:class:`~imagecheck.errors.CredentialsError` before any request is sent.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from imagecheck.errors import CredentialsError
from imagecheck.reference import Reference

# Docker keeps Docker Hub credentials under this legacy v1 URL (docker/cli registry.IndexServer).
DOCKER_HUB_CONFIG_KEY = "https://index.docker.io/v1/"
_HUB_HOSTS = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})


@dataclass(frozen=True, slots=True)
class Credentials:
    """Secrets for one registry. Secret fields never show in ``repr`` (and so in logs)."""

    username: str = ""
    password: str = field(default="", repr=False)
    identity_token: str = field(default="", repr=False)
    registry_token: str = field(default="", repr=False)
    source: str = ""  # where they came from, for messages: never secret

    @property
    def has_basic(self) -> bool:
        return bool(self.username or self.password)

    def secrets(self) -> list[str]:
        """Every secret string this value holds (for redaction)."""
        return [s for s in (self.password, self.identity_token, self.registry_token) if s]


class Keychain(Protocol):
    """Answers which credentials to offer for a reference, most preferred first."""

    def resolve(self, reference: Reference) -> Sequence[Credentials]: ...


class AnonymousKeychain:
    """Offers nothing: every request goes anonymous."""

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        return ()


@dataclass(frozen=True)
class StaticKeychain:
    """The same credentials for every registry (``--username`` / ``--password-stdin``).

    ``registry`` limits them to one host, so they are not offered to another.
    """

    credentials: Credentials
    registry: str | None = None

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        if self.registry is not None and not registry_matches(self.registry, reference):
            return ()
        return (self.credentials,)


@dataclass(frozen=True)
class ChainKeychain:
    """The first keychain with an answer wins: order is precedence."""

    keychains: Sequence[Keychain]

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        for keychain in self.keychains:
            found = keychain.resolve(reference)
            if found:
                return found
        return ()


def config_key_host(key: str) -> str:
    """The ``host[:port]`` of a config.json ``auths`` key, which may be a URL or a bare host.

    Docker writes ``https://index.docker.io/v1/`` and older clients ``http://host/v1/``;
    users write ``host:5000``. Compare on host[:port] alone, as docker/cli does.
    """
    host = key.strip()
    for prefix in ("https://", "http://"):
        if host.lower().startswith(prefix):
            host = host[len(prefix) :]
            break
    return host.split("/", 1)[0].lower()


def registry_matches(key: str, reference: Reference) -> bool:
    """Whether a config key names the registry of ``reference`` (Docker Hub aliases included)."""
    host = config_key_host(key)
    if reference.is_docker_hub:
        return host in _HUB_HOSTS
    return host == reference.registry.lower()


def decode_auth_entry(entry: Any, *, where: str) -> Credentials:
    """One ``auths`` entry (``auth``, ``username``/``password``, ``identitytoken``,
    ``registrytoken``) as :class:`Credentials`. ``where`` names the file for errors."""
    if not isinstance(entry, dict):
        raise CredentialsError(f"{where}: expected an object with credentials")
    username = _str_field(entry, "username", where)
    password = _str_field(entry, "password", where)
    encoded = _str_field(entry, "auth", where)
    if encoded:
        try:
            decoded = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise CredentialsError(f"{where}: 'auth' is not valid base64") from None
        if ":" not in decoded:
            raise CredentialsError(f"{where}: 'auth' must encode 'username:password'")
        username, password = decoded.split(":", 1)
    return Credentials(
        username=username,
        password=password,
        identity_token=_str_field(entry, "identitytoken", where),
        registry_token=_str_field(entry, "registrytoken", where),
        source=where,
    )


def _str_field(entry: dict[str, Any], name: str, where: str) -> str:
    value = entry.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CredentialsError(f"{where}: '{name}' must be a string")
    return value


def load_json_file(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``, or a one-line :class:`CredentialsError` naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CredentialsError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CredentialsError(f"{path}: invalid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CredentialsError(f"{path}: expected a JSON object")
    return data


@dataclass(frozen=True)
class AuthsKeychain:
    """Credentials from an ``auths`` map (Docker config.json, podman auth.json)."""

    entries: Sequence[tuple[str, Credentials]]

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        for key, creds in self.entries:
            if registry_matches(key, reference):
                return (creds,)
        return ()

    @classmethod
    def from_auths(cls, auths: Any, *, where: str) -> AuthsKeychain:
        if auths is None:
            return cls(())
        if not isinstance(auths, dict):
            raise CredentialsError(f"{where}: 'auths' must be an object")
        entries = [
            (key, decode_auth_entry(value, where=f"{where} (auths.{key})"))
            for key, value in auths.items()
        ]
        # An exact key wins over its URL spellings: sort bare hosts first, stably.
        entries.sort(key=lambda item: "://" in item[0])
        return cls(tuple(entries))

    @classmethod
    def from_file(cls, path: Path) -> AuthsKeychain:
        return cls.from_auths(load_json_file(path).get("auths"), where=str(path))


def docker_config_path(explicit: str | None = None, env: dict[str, str] | None = None) -> Path:
    """Where Docker's config.json is: ``--docker-config`` (a file or a directory), then
    ``$DOCKER_CONFIG/config.json``, then ``~/.docker/config.json``."""
    env = dict(os.environ) if env is None else env
    if explicit:
        path = Path(explicit).expanduser()
        return path / "config.json" if path.is_dir() else path
    if env.get("DOCKER_CONFIG"):
        return Path(env["DOCKER_CONFIG"]).expanduser() / "config.json"
    return Path.home() / ".docker" / "config.json"


def default_keychain(
    *,
    static: Credentials | None = None,
    static_registries: Iterable[str] = (),
    docker_config: str | None = None,
    env: dict[str, str] | None = None,
) -> Keychain:
    """The precedence chain: explicit credentials, then Docker's config.json, then anonymous.

    An explicit ``docker_config`` that does not exist is an error; the default location
    missing simply means no credentials from it.
    """
    chain: list[Keychain] = []
    if static is not None:
        hosts = list(static_registries)
        chain.extend(StaticKeychain(static, host) for host in hosts)
        if not hosts:
            chain.append(StaticKeychain(static))
    path = docker_config_path(docker_config, env)
    if docker_config or path.exists():
        if docker_config and not path.exists():
            raise CredentialsError(f"docker config {path} does not exist")
        chain.append(AuthsKeychain.from_file(path))
    chain.append(AnonymousKeychain())
    return ChainKeychain(tuple(chain))
