"""Tests for the credentials: config.json keychains and their precedence, table-driven."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from imagecheck.authn import AnonymousKeychain, ChainKeychain, Credentials, default_keychain
from imagecheck.authn._configfiles import AuthsKeychain
from imagecheck.authn._credentials import StaticKeychain
from imagecheck.errors import CredentialsError, UsageError
from imagecheck.reference import parse_reference


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def write_config(directory: Path, auths: Any, name: str = "config.json") -> Path:
    path = directory / name
    path.write_text(json.dumps({"auths": auths}), encoding="utf-8")
    return path


def no_docker_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose default config location (``$DOCKER_CONFIG``) holds nothing."""
    empty = tmp_path / "no-docker-config"
    empty.mkdir(exist_ok=True)
    return {"DOCKER_CONFIG": str(empty)}


# -- decoding entries --------------------------------------------------------------------------

# (id, auths entry, username, password, identity token, registry token)
ENTRIES: list[tuple[str, dict[str, Any], str, str, str, str]] = [
    ("auth-base64", {"auth": b64("alice:s3cret")}, "alice", "s3cret", "", ""),
    ("auth-password-with-colons", {"auth": b64("alice:a:b:c")}, "alice", "a:b:c", "", ""),
    ("auth-empty-password", {"auth": b64("alice:")}, "alice", "", "", ""),
    ("auth-utf8", {"auth": b64("zoë:pässword")}, "zoë", "pässword", "", ""),
    ("auth-wins-over-fields", {"auth": b64("alice:a"), "username": "bob", "password": "b"},
     "alice", "a", "", ""),
    ("username-password", {"username": "bob", "password": "hunter2"}, "bob", "hunter2", "", ""),
    ("identitytoken", {"auth": b64("<token>:"), "identitytoken": "refresh-1"},
     "<token>", "", "refresh-1", ""),
    ("registrytoken", {"registrytoken": "bearer-1"}, "", "", "", "bearer-1"),
    ("nulls-are-empty", {"auth": None, "username": None, "password": None}, "", "", "", ""),
    ("unknown-fields-ignored", {"username": "u", "password": "p", "email": "u@x.test"},
     "u", "p", "", ""),
]  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "username", "password", "identity_token", "registry_token"),
    [c[1:] for c in ENTRIES],
    ids=[c[0] for c in ENTRIES],
)
def test_config_entry_is_decoded(
    tmp_path: Path,
    entry: dict[str, Any],
    username: str,
    password: str,
    identity_token: str,
    registry_token: str,
) -> None:
    path = write_config(tmp_path, {"registry.test": entry})
    (creds,) = AuthsKeychain.from_file(path).resolve(parse_reference("registry.test/app:1"))
    assert creds.username == username
    assert creds.password == password
    assert creds.identity_token == identity_token
    assert creds.registry_token == registry_token
    assert str(path) in creds.source


# -- which key matches which reference ---------------------------------------------------------

# (id, auths key, image, matches)
KEYS: list[tuple[str, str, str, bool]] = [
    ("hub-v1-url-short-name", "https://index.docker.io/v1/", "busybox", True),
    ("hub-v1-url-user-repo", "https://index.docker.io/v1/", "team/app:1", True),
    ("hub-v1-url-explicit-docker.io", "https://index.docker.io/v1/", "docker.io/library/busybox",
     True),
    ("hub-docker.io-key", "docker.io", "busybox", True),
    ("hub-index-key", "index.docker.io", "busybox", True),
    ("hub-registry-1-key", "registry-1.docker.io", "busybox", True),
    ("hub-http-v1-url", "http://index.docker.io/v1/", "busybox", True),
    ("hub-key-not-for-other-registry", "https://index.docker.io/v1/", "registry.test/app", False),
    ("bare-host", "registry.test", "registry.test/app", True),
    ("bare-host-case-insensitive", "Registry.Test", "registry.test/app", True),
    ("host-port", "registry.test:5000", "registry.test:5000/app", True),
    ("host-port-needs-port", "registry.test:5000", "registry.test/app", False),
    ("host-needs-no-port", "registry.test", "registry.test:5000/app", False),
    ("https-v2-url", "https://registry.test/v2/", "registry.test/app", True),
    ("https-url-with-port", "https://registry.test:5000/v2/", "registry.test:5000/app", True),
    ("http-url", "http://registry.test", "registry.test/team/app", True),
    ("other-host", "other.test", "registry.test/app", False),
    ("suffix-is-not-a-match", "test", "registry.test/app", False),
    ("other-registry-not-hub", "registry.test", "busybox", False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("key", "image", "matches"), [c[1:] for c in KEYS], ids=[c[0] for c in KEYS]
)
def test_config_key_matches_reference(tmp_path: Path, key: str, image: str, matches: bool) -> None:
    path = write_config(tmp_path, {key: {"auth": b64("alice:pw")}})
    found = AuthsKeychain.from_file(path).resolve(parse_reference(image))
    assert [c.username for c in found] == (["alice"] if matches else [])


def test_bare_host_key_wins_over_url_spelling(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        {
            "https://registry.test/v2/": {"auth": b64("url:pw")},
            "registry.test": {"auth": b64("bare:pw")},
        },
    )
    (creds,) = AuthsKeychain.from_file(path).resolve(parse_reference("registry.test/app"))
    assert creds.username == "bare"


def test_config_without_auths_offers_nothing(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"psFormat": "table {{.ID}}"}', encoding="utf-8")
    assert AuthsKeychain.from_file(path).resolve(parse_reference("busybox")) == ()


# -- broken files ------------------------------------------------------------------------------

# (id, file content, words the message must contain)
BROKEN: list[tuple[str, str, str]] = [
    ("invalid-json", "{not json", "not valid JSON"),
    ("empty-file", "", "not valid JSON"),
    ("not-an-object", "[]", "not a JSON object"),
    ("auths-not-an-object", '{"auths": ["registry.test"]}', "'auths' must be an object"),
    ("entry-not-an-object", '{"auths": {"registry.test": "alice:pw"}}',
     "expected an object with credentials"),
    ("bad-base64", '{"auths": {"registry.test": {"auth": "not base64!"}}}',
     "'auth' is not valid base64"),
    ("auth-without-colon", json.dumps({"auths": {"registry.test": {"auth": b64("alice")}}}),
     "'auth' must encode 'username:password'"),
    ("auth-not-utf8", json.dumps({"auths": {"registry.test": {"auth": "/w=="}}}),
     "'auth' is not valid base64"),
    ("password-not-a-string", '{"auths": {"registry.test": {"username": "a", "password": 1}}}',
     "'password' must be a string"),
    ("auth-not-ascii", json.dumps({"auths": {"registry.test": {"auth": "\x80"}}}),
     "'auth' is not valid base64"),
    # A key with a newline and an escape: still one printable line naming it.
    ("key-with-control-characters", json.dumps({"auths": {"a\nfound\x1b": "x"}}),
     "(auths.a?found?): expected an object with credentials"),
]  # fmt: skip


@pytest.mark.parametrize(("content", "words"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_broken_config_is_credentials_error_naming_the_file(
    tmp_path: Path, content: str, words: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CredentialsError) as info:
        default_keychain(docker_config=str(path), env={})
    message = str(info.value)
    assert str(path) in message
    assert words in message
    assert "\n" not in message
    assert isinstance(info.value, UsageError)


def test_broken_default_config_is_an_error_too(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{", encoding="utf-8")
    with pytest.raises(CredentialsError, match="not valid JSON"):
        default_keychain(env={"DOCKER_CONFIG": str(tmp_path)})


def test_broken_secret_is_not_echoed(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"registry.test": {"auth": b64("alice-s3cret-no-colon")}})
    with pytest.raises(CredentialsError) as info:
        AuthsKeychain.from_file(path)
    assert "s3cret" not in str(info.value)


# -- where the config file is ------------------------------------------------------------------


def test_explicit_docker_config_missing_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "config.json"
    with pytest.raises(CredentialsError) as info:
        default_keychain(docker_config=str(missing), env={})
    assert str(missing) in str(info.value)
    assert "does not exist" in str(info.value)


def test_explicit_docker_config_directory_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match="does not exist"):
        default_keychain(docker_config=str(tmp_path), env={})


def test_default_docker_config_missing_means_anonymous(tmp_path: Path) -> None:
    keychain = default_keychain(env=no_docker_env(tmp_path))
    assert keychain.resolve(parse_reference("busybox")) == ()
    assert keychain.resolve(parse_reference("registry.test/app")) == ()


# (id, how the path is given: "file", "dir" or "env")
LOCATIONS = [("file", "file"), ("directory", "dir"), ("DOCKER_CONFIG", "env")]


@pytest.mark.parametrize("how", [c[1] for c in LOCATIONS], ids=[c[0] for c in LOCATIONS])
def test_docker_config_location(tmp_path: Path, how: str) -> None:
    path = write_config(tmp_path, {"registry.test": {"username": "alice", "password": "pw"}})
    if how == "file":
        keychain = default_keychain(docker_config=str(path), env={})
    elif how == "dir":
        keychain = default_keychain(docker_config=str(tmp_path), env={})
    else:
        keychain = default_keychain(env={"DOCKER_CONFIG": str(tmp_path)})
    (creds,) = keychain.resolve(parse_reference("registry.test/app"))
    assert (creds.username, creds.password) == ("alice", "pw")


# -- secrets stay out of repr ------------------------------------------------------------------

SECRETS = Credentials(
    username="alice",
    password="pw-SECRET-1",
    identity_token="id-SECRET-2",
    registry_token="rt-SECRET-3",
    source="config.json",
)


def test_repr_never_contains_secrets(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        {"registry.test": {"auth": b64("alice:pw-SECRET-1"), "identitytoken": "id-SECRET-2"}},
    )
    for value in (
        SECRETS,
        StaticKeychain(SECRETS),
        ChainKeychain((StaticKeychain(SECRETS),)),
        AuthsKeychain.from_file(path),
    ):
        for text in (repr(value), str(value), f"{value}"):
            assert "SECRET" not in text
    assert "alice" in repr(SECRETS)


def test_secrets_lists_every_secret() -> None:
    assert SECRETS.secrets() == ["pw-SECRET-1", "id-SECRET-2", "rt-SECRET-3"]
    assert Credentials(username="u").secrets() == []


# -- precedence --------------------------------------------------------------------------------

STATIC = Credentials(username="static", password="s", source="--username")


# (id, static registries, image, expected username or None)
PRECEDENCE: list[tuple[str, list[str], str, str | None]] = [
    ("static-first", [], "registry.test/app", "static"),
    ("static-for-hub-too", [], "busybox", "static"),
    ("static-limited-to-its-registry", ["registry.test"], "registry.test/app", "static"),
    ("static-elsewhere-falls-to-config", ["other.test"], "registry.test/app", "config"),
    ("static-elsewhere-hub-config", ["other.test"], "busybox", "hub"),
    ("static-elsewhere-nothing-anonymous", ["other.test"], "third.test/app", None),
]


@pytest.mark.parametrize(
    ("registries", "image", "expected"),
    [c[1:] for c in PRECEDENCE],
    ids=[c[0] for c in PRECEDENCE],
)
def test_precedence(
    tmp_path: Path, registries: list[str], image: str, expected: str | None
) -> None:
    path = write_config(
        tmp_path,
        {
            "registry.test": {"auth": b64("config:c")},
            "https://index.docker.io/v1/": {"auth": b64("hub:h")},
        },
    )
    keychain = default_keychain(
        static=STATIC, static_registries=registries, docker_config=str(path), env={}
    )
    found = keychain.resolve(parse_reference(image))
    assert [c.username for c in found] == ([] if expected is None else [expected])


def test_config_without_static(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"registry.test": {"auth": b64("config:c")}})
    keychain = default_keychain(docker_config=str(path), env={})
    assert [c.username for c in keychain.resolve(parse_reference("registry.test/a"))] == ["config"]
    assert keychain.resolve(parse_reference("busybox")) == ()


def test_chain_first_answer_wins() -> None:
    first = StaticKeychain(Credentials(username="first"), registry="registry.test")
    second = StaticKeychain(Credentials(username="second"))
    chain = ChainKeychain((AnonymousKeychain(), first, second))
    assert [c.username for c in chain.resolve(parse_reference("registry.test/a"))] == ["first"]
    assert [c.username for c in chain.resolve(parse_reference("other.test/a"))] == ["second"]
    assert ChainKeychain(()).resolve(parse_reference("busybox")) == ()


# -- secrets must be sendable: refused at the source, never echoed -------------------------

# (id, auths entry, words of the message)
UNSENDABLE: list[tuple[str, dict[str, str], str]] = [
    ("registrytoken-newline", {"registrytoken": "rt-SECRET\n"}, "the registrytoken contains"),
    ("registrytoken-space", {"registrytoken": "rt SECRET"}, "the registrytoken contains"),
    ("identitytoken-newline", {"identitytoken": "id-SECRET\r\n"}, "the identitytoken contains"),
    ("password-nul", {"username": "u", "password": "pw-SECRET\x00"}, "the password contains"),
    ("auth-newline", {"auth": b64("u:pw-SECRET\n")}, "the password contains"),
    ("username-escape", {"username": "u\x1b[2J", "password": "pw-SECRET"}, "the username"),
]


@pytest.mark.parametrize(
    ("entry", "words"), [c[1:] for c in UNSENDABLE], ids=[c[0] for c in UNSENDABLE]
)
def test_unsendable_secret_is_a_credentials_error_naming_the_source(
    tmp_path: Path, entry: dict[str, str], words: str
) -> None:
    path = write_config(tmp_path, {"registry.test": entry})
    with pytest.raises(CredentialsError) as info:
        AuthsKeychain.from_file(path)
    message = str(info.value)
    assert message.startswith(f"{path} (auths.registry.test): {words}")
    assert "SECRET" not in message
    assert "\n" not in message


def test_a_tab_in_a_password_is_sendable() -> None:
    assert Credentials(username="u", password="p\tw").password == "p\tw"


def test_docker_auth_config_is_capped() -> None:
    # An environment string cannot exceed 128 KiB on Linux; the library takes text from
    # anywhere, so the cap is on the text itself.
    text = '{"auths": {}, "padding": "' + "x" * (1024 * 1024) + '"}'
    with pytest.raises(CredentialsError, match="DOCKER_AUTH_CONFIG: larger than 1 MiB"):
        AuthsKeychain.from_json_text(text, where="DOCKER_AUTH_CONFIG")
