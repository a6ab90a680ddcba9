"""Docker's ``config.json`` and podman's ``auth.json``: ``auths`` entries decoded into
:class:`~imagecheck.authn._credentials.Credentials`, and :class:`AuthsKeychain`, which answers from
them and from their credential helpers (``credHelpers``, ``credsStore``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imagecheck import _capped
from imagecheck._deadline import Deadline
from imagecheck._files import MAX_CONFIG_FILE, read_regular_file, size_text
from imagecheck.authn._credentials import Credentials, namespace_match, registry_matches
from imagecheck.authn._helperproc import HelperAnswer
from imagecheck.authn._helpers import CredentialHelpers
from imagecheck.errors import CredentialsError
from imagecheck.reference import DOCKER_HUB_INDEX, Reference

# Docker keeps Docker Hub credentials under this legacy v1 URL (docker/cli registry.IndexServer).
DOCKER_HUB_CONFIG_KEY = f"https://{DOCKER_HUB_INDEX}/v1/"


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
    return _capped.parse_json_object(text, where, error=CredentialsError)


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
