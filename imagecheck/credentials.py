"""Where credentials come from: :class:`Credentials` values answered by *keychains*.

A keychain answers one question, "which credentials should be offered to this registry
for this repository?", with an ordered list of candidates (empty: go anonymous). Sources
compose through :class:`ChainKeychain`, whose order is the documented precedence.

Everything is read and validated when a keychain is built, so a broken file is a one-line
:class:`~imagecheck.errors.CredentialsError` before any request is sent. Credential helpers
are the exception: they are asked on first need, once per registry, inside the deadline
(:meth:`AsyncKeychain.aresolve`, see ``credhelper.py``).
"""

from __future__ import annotations

import base64
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from imagecheck import bounded
from imagecheck.credhelper import CredentialHelpers, HelperAnswer
from imagecheck.errors import CredentialsError
from imagecheck.files import MAX_CONFIG_FILE, read_regular_file, size_text
from imagecheck.reference import DOCKER_HUB_ALIASES, DOCKER_HUB_INDEX, Reference
from imagecheck.retry import Deadline

# Docker keeps Docker Hub credentials under this legacy v1 URL (docker/cli registry.IndexServer).
DOCKER_HUB_CONFIG_KEY = f"https://{DOCKER_HUB_INDEX}/v1/"


@dataclass(frozen=True, slots=True)
class Credentials:
    """Secrets for one registry. Secret fields never show in ``repr`` (and so in logs).

    Every value must be sendable (:func:`secret_problem`, :func:`bearer_problem`): a
    :class:`CredentialsError` naming the source, never the value, otherwise.
    """

    username: str = ""
    password: str = field(default="", repr=False)
    identity_token: str = field(default="", repr=False)
    registry_token: str = field(default="", repr=False)
    source: str = ""  # where they came from, for messages: never secret

    def __post_init__(self) -> None:
        checks = (
            ("username", secret_problem(self.username)),
            ("password", secret_problem(self.password)),
            ("identitytoken", secret_problem(self.identity_token)),
            ("registrytoken", bearer_problem(self.registry_token) if self.registry_token else None),
        )
        for name, problem in checks:
            if problem is not None:
                raise CredentialsError(f"{self.source or 'credentials'}: the {name} {problem}")

    @property
    def has_basic(self) -> bool:
        return bool(self.username or self.password)

    def secrets(self) -> list[str]:
        """Every secret string this value holds (for redaction)."""
        return [s for s in (self.password, self.identity_token, self.registry_token) if s]


def secret_problem(value: str) -> str | None:
    """What makes ``value`` unusable as a secret, or ``None``: a control character (other than
    tab), as a trailing newline from ``echo`` or a NUL. HTTP cannot carry it in a header
    (h11 refuses it, quoting the value in its message), and no registry issued it."""
    if any(_control(ch) and ch != "\t" for ch in value):
        return "contains a control character (a trailing newline?)"
    return None


def bearer_problem(value: str) -> str | None:
    """What makes ``value`` unusable as a bearer token, which goes into the ``Authorization``
    header as it is (RFC 6750 section 2.1: no whitespace, no control characters), or ``None``."""
    if any(_control(ch) or ch.isspace() for ch in value):
        return "contains whitespace or a control character (a trailing newline?)"
    return None


def _control(ch: str) -> bool:
    return unicodedata.category(ch) == "Cc"


class Keychain(Protocol):
    """Answers which credentials to offer for a reference, most preferred first."""

    def resolve(self, reference: Reference) -> Sequence[Credentials]: ...


@runtime_checkable
class AsyncKeychain(Keychain, Protocol):
    """A keychain that may have to run something to answer (a credential helper): the
    checker asks it with ``aresolve``, on the event loop and inside the check's deadline."""

    async def aresolve(self, reference: Reference, deadline: Deadline) -> Sequence[Credentials]: ...


async def resolve_credentials(
    keychain: Keychain, reference: Reference, deadline: Deadline
) -> Sequence[Credentials]:
    """``keychain``'s answer for ``reference``: asynchronously, within ``deadline``, when it
    may run a helper; at once otherwise."""
    if isinstance(keychain, AsyncKeychain):
        return await keychain.aresolve(reference, deadline)
    return keychain.resolve(reference)


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

    async def aresolve(self, reference: Reference, deadline: Deadline) -> Sequence[Credentials]:
        for keychain in self.keychains:
            found = await resolve_credentials(keychain, reference, deadline)
            if found:
                return found
        return ()


@dataclass(frozen=True, slots=True)
class RegistryKey:
    """A credentials key (``https://host:port/path``) reduced to what matching needs."""

    host: str  # lower-cased; in pull secrets it may hold globs
    port: str
    path: str  # "" or "/team/..."

    @property
    def text(self) -> str:
        return self.host + (f":{self.port}" if self.port else "") + self.path


def parse_registry_key(key: str) -> RegistryKey:
    """Drop the scheme, and a ``/v1/`` or ``/v2/`` path (Docker's own spellings of a bare
    host, e.g. ``https://index.docker.io/v1/``); keep any other path as a namespace."""
    text = key.strip()
    for scheme in ("https://", "http://"):
        if text.lower().startswith(scheme):
            text = text[len(scheme) :]
            break
    hostport, _, path = text.partition("/")
    path = "/" + path if path else ""
    if path.startswith(("/v1/", "/v2/")) or path in ("/v1", "/v2"):
        path = path[3:]
    path = path.rstrip("/")
    host, port = _split_port(hostport.lower())
    return RegistryKey(host, port, path)


def _split_port(hostport: str) -> tuple[str, str]:
    if hostport.startswith("["):  # [::1]:5000
        host, _, rest = hostport.partition("]")
        return host + "]", rest.lstrip(":")
    host, sep, port = hostport.rpartition(":")
    return (host, port) if sep and port.isdigit() else (hostport, "")


def config_key_host(key: str) -> str:
    """The ``host[:port]`` of a config.json ``auths`` key, which may be a URL or a bare host."""
    parsed = parse_registry_key(key)
    return parsed.host + (f":{parsed.port}" if parsed.port else "")


def registry_matches(key: str, reference: Reference) -> bool:
    """Whether a config key names the registry of ``reference`` (Docker Hub aliases included)."""
    host = config_key_host(key)
    if reference.is_docker_hub:
        return host in DOCKER_HUB_ALIASES
    return host == reference.registry.lower()


def namespace_match(key: str, reference: Reference) -> int:
    """How well a config/auth.json key fits: -1 not at all, else the length of its path.

    Podman's auth.json allows ``registry/namespace`` keys; the longest matching one wins
    (containers-auth.json(5)). The path must end at a ``/`` boundary of the repository.
    """
    if not registry_matches(key, reference):
        return -1
    path = parse_registry_key(key).path
    repo = "/" + reference.repository
    if not path or repo == path or repo.startswith(path + "/"):
        return len(path)
    return -1


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
        except ValueError:  # binascii.Error, non-ASCII text, UnicodeDecodeError
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


def load_json_file(path: Path, what: str = "credentials file") -> dict[str, Any]:
    """A JSON object from the regular file at ``path`` (at most 1 MiB), or a one-line
    :class:`CredentialsError` naming it and ``what`` it is."""
    raw = read_regular_file(path, limit=MAX_CONFIG_FILE, what=what, error=CredentialsError)
    return parse_json_object(raw, str(path))


def parse_json_object(text: str | bytes, where: str) -> dict[str, Any]:
    """A JSON object from ``text``, or a one-line :class:`CredentialsError` naming ``where``
    (also for 60,000-deep nesting or a 5,000-digit number: never a traceback)."""
    return bounded.parse_json_object(text, where, error=CredentialsError)


@dataclass(frozen=True)
class AuthsKeychain:
    """Credentials from a Docker ``config.json`` or podman ``auth.json``: its ``auths`` map,
    and its credential helpers (``credHelpers`` per registry, ``credsStore`` for all).

    As in docker/cli, a registry's helper comes first; when it has nothing for the registry,
    an inline ``auths`` entry still counts (Docker would stop there; users keep both).
    """

    entries: Sequence[tuple[str, Credentials]]
    creds_store: str = ""
    cred_helpers: Mapping[str, str] = field(default_factory=dict)
    where: str = ""
    # Shared by every keychain of a run, so that each helper is asked once per registry.
    helpers: CredentialHelpers = field(default_factory=CredentialHelpers, compare=False)

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        helper = self._helper_for(reference)
        if helper:
            answer = self.helpers.get_sync(helper, _server_url(reference))
            if answer is not None:
                return (_from_helper(answer),)
        return self._inline(reference)

    async def aresolve(self, reference: Reference, deadline: Deadline) -> Sequence[Credentials]:
        helper = self._helper_for(reference)
        if helper:
            answer = await self.helpers.get(helper, _server_url(reference), deadline)
            if answer is not None:
                return (_from_helper(answer),)
        return self._inline(reference)

    def _inline(self, reference: Reference) -> Sequence[Credentials]:
        best: tuple[int, Credentials] | None = None
        for key, creds in self.entries:
            fit = namespace_match(key, reference)
            if fit >= 0 and (best is None or fit > best[0]):
                best = (fit, creds)
        return (best[1],) if best else ()

    def _helper_for(self, reference: Reference) -> str:
        for key, helper in self.cred_helpers.items():
            if registry_matches(key, reference):
                return helper
        return self.creds_store

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        *,
        where: str,
        helpers: CredentialHelpers | None = None,
    ) -> AuthsKeychain:
        auths = config.get("auths")
        if auths is None:
            auths = {}
        if not isinstance(auths, dict):
            raise CredentialsError(f"{where}: 'auths' must be an object")
        entries = [
            (key, decode_auth_entry(value, where=f"{where} (auths.{key})"))
            for key, value in auths.items()
        ]
        # An exact key wins over its URL spellings: sort bare hosts first, stably.
        entries.sort(key=lambda item: "://" in item[0])
        store = config.get("credsStore") or ""
        cred_helpers = config.get("credHelpers") or {}
        if not isinstance(store, str):
            raise CredentialsError(f"{where}: 'credsStore' must be a string")
        if not isinstance(cred_helpers, dict) or not all(
            isinstance(v, str) for v in cred_helpers.values()
        ):
            raise CredentialsError(f"{where}: 'credHelpers' must map registries to helper names")
        return cls(tuple(entries), store, dict(cred_helpers), where, helpers or CredentialHelpers())

    @classmethod
    def from_file(
        cls, path: Path, *, what: str = "docker config", helpers: CredentialHelpers | None = None
    ) -> AuthsKeychain:
        return cls.from_config(load_json_file(path, what), where=str(path), helpers=helpers)

    @classmethod
    def from_json_text(
        cls, text: str, *, where: str, helpers: CredentialHelpers | None = None
    ) -> AuthsKeychain:
        if len(text) > MAX_CONFIG_FILE:
            raise CredentialsError(f"{where}: larger than {size_text(MAX_CONFIG_FILE)}")
        return cls.from_config(parse_json_object(text, where), where=where, helpers=helpers)


def _server_url(reference: Reference) -> str:
    """What a helper is asked for: Docker Hub by its legacy key, as docker/cli does."""
    return DOCKER_HUB_CONFIG_KEY if reference.is_docker_hub else reference.registry


def _from_helper(answer: HelperAnswer) -> Credentials:
    source = f"credential helper {answer.helper}"
    if answer.is_identity_token:
        return Credentials(identity_token=answer.secret, source=source)
    return Credentials(username=answer.username, password=answer.secret, source=source)
