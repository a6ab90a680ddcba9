"""Tests for the registry challenge: WWW-Authenticate parsing (RFC 9110 11.6.1), table-driven."""

from __future__ import annotations

import pytest

from imagecheck.errors import ProtocolError, RegistryError
from imagecheck.registry._challenge import Challenge, parse_challenges, pick_challenge

HUB_BEARER = 'Bearer realm="https://auth.docker.io/token",service="registry.docker.io"'

# (id, header, [(scheme, params), ...])
PARSED: list[tuple[str, str, list[tuple[str, dict[str, str]]]]] = [
    ("empty", "", []),
    ("only-whitespace-and-commas", " , ,\t", []),
    ("bearer-hub", HUB_BEARER,
     [("bearer", {"realm": "https://auth.docker.io/token", "service": "registry.docker.io"})]),
    ("basic", 'Basic realm="Registry Realm"', [("basic", {"realm": "Registry Realm"})]),
    ("scheme-without-params", "Bearer", [("bearer", {})]),
    ("quoted-comma-in-scope",
     'Bearer realm="https://a.test/t",scope="repository:a/b:pull,push",service="s"',
     [("bearer", {"realm": "https://a.test/t", "scope": "repository:a/b:pull,push",
                  "service": "s"})]),
    ("quoted-comma-then-next-challenge",
     'Bearer scope="repository:x:pull,push", Basic realm="r"',
     [("bearer", {"scope": "repository:x:pull,push"}), ("basic", {"realm": "r"})]),
    ("escaped-quote", r'Basic realm="say \"hi\""', [("basic", {"realm": 'say "hi"'})]),
    ("escaped-backslash", r'Basic realm="a\\b"', [("basic", {"realm": "a\\b"})]),
    ("escaped-ordinary-char", r'Basic realm="\a\b"', [("basic", {"realm": "ab"})]),
    ("empty-quoted-value", 'Basic realm=""', [("basic", {"realm": ""})]),
    ("unquoted-token-values", "Bearer realm=abc, service=reg.test",
     [("bearer", {"realm": "abc", "service": "reg.test"})]),
    ("whitespace-around-equals", 'Bearer realm = "r" ,  service= s',
     [("bearer", {"realm": "r", "service": "s"})]),
    ("upper-case-scheme-and-names", 'BEARER REALM="https://a.test/t",Service="S"',
     [("bearer", {"realm": "https://a.test/t", "service": "S"})]),
    ("mixed-case-scheme", 'bAsIc rEaLm="R"', [("basic", {"realm": "R"})]),
    ("values-keep-their-case", 'Bearer realm="HTTPS://A.test/T"',
     [("bearer", {"realm": "HTTPS://A.test/T"})]),
    ("two-challenges-one-header", 'Basic realm="r", ' + HUB_BEARER,
     [("basic", {"realm": "r"}),
      ("bearer", {"realm": "https://auth.docker.io/token", "service": "registry.docker.io"})]),
    ("three-challenges", 'Negotiate, Basic realm="r", Bearer realm="t"',
     [("negotiate", {}), ("basic", {"realm": "r"}), ("bearer", {"realm": "t"})]),
    ("bearer-error-params",
     'Bearer realm="t",error="insufficient_scope",scope="repository:a:pull"',
     [("bearer", {"realm": "t", "error": "insufficient_scope", "scope": "repository:a:pull"})]),
    ("token68", "Negotiate YWJjZGVm", [("negotiate", {"": "YWJjZGVm"})]),
    ("token68-padding", "Negotiate YWJj==", [("negotiate", {"": "YWJj=="})]),
    ("token68-then-challenge", 'Negotiate a+b/c==, Basic realm="r"',
     [("negotiate", {"": "a+b/c=="}), ("basic", {"realm": "r"})]),
    ("trailing-comma", 'Basic realm="r",', [("basic", {"realm": "r"})]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("header", "expected"), [case[1:] for case in PARSED], ids=[case[0] for case in PARSED]
)
def test_parse_challenges(header: str, expected: list[tuple[str, dict[str, str]]]) -> None:
    challenges = parse_challenges(header)
    assert [(c.scheme, dict(c.params)) for c in challenges] == expected


def test_challenge_properties() -> None:
    (challenge,) = parse_challenges(
        'Bearer realm="https://a.test/t",service="svc",scope="repository:x:pull",error="e"'
    )
    assert challenge.realm == "https://a.test/t"
    assert challenge.service == "svc"
    assert challenge.scope == "repository:x:pull"
    assert challenge.error == "e"
    assert Challenge("basic").realm is None


def test_challenge_params_are_read_only() -> None:
    (challenge,) = parse_challenges('Basic realm="r"')
    with pytest.raises(TypeError):
        challenge.params["realm"] = "other"  # type: ignore[index]


# (id, header)
MALFORMED: list[tuple[str, str]] = [
    ("unterminated-quote", 'Bearer realm="https://a.test/t'),
    ("unterminated-after-escape", 'Bearer realm="abc\\'),
    ("starts-with-equals", '="x"'),
    ("starts-with-quote", '"Bearer"'),
    ("quoted-string-without-name", 'Bearer "realm"'),
    ("bad-token-value", "Bearer realm=@x"),
    ("value-missing-before-next-param", 'Basic realm=, service="s"'),
    ("semicolon-separated", 'Bearer realm="a"; service="b"'),
]


@pytest.mark.parametrize("header", [c[1] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_header_is_protocol_error(header: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_challenges(header)
    assert isinstance(info.value, RegistryError)
    assert not info.value.temporary


# (id, header values, expected scheme or None, expected realm)
PICKED: list[tuple[str, list[str], str | None, str | None]] = [
    ("no-headers", [], None, None),
    ("empty-header", [""], None, None),
    ("unknown-schemes-only", ["Negotiate abc==", 'Digest realm="d"'], None, None),
    ("basic-only", ['Basic realm="b"'], "basic", "b"),
    ("bearer-only", ['Bearer realm="t"'], "bearer", "t"),
    ("bearer-preferred-same-header", ['Basic realm="b", Bearer realm="t"'], "bearer", "t"),
    ("bearer-preferred-across-headers", ['Basic realm="b"', 'Bearer realm="t"'], "bearer", "t"),
    ("bearer-preferred-when-first", ['Bearer realm="t"', 'Basic realm="b"'], "bearer", "t"),
    ("first-bearer-wins", ['Bearer realm="t1"', 'Bearer realm="t2"'], "bearer", "t1"),
    ("upper-case-basic", ['BASIC realm="b"'], "basic", "b"),
    ("unknown-then-basic", ['Negotiate abc==, Basic realm="b"'], "basic", "b"),
]


@pytest.mark.parametrize(
    ("headers", "scheme", "realm"), [c[1:] for c in PICKED], ids=[c[0] for c in PICKED]
)
def test_pick_challenge(headers: list[str], scheme: str | None, realm: str | None) -> None:
    picked = pick_challenge(headers)
    if scheme is None:
        assert picked is None
    else:
        assert picked is not None
        assert picked.scheme == scheme
        assert picked.realm == realm


def test_pick_challenge_malformed_header_raises() -> None:
    with pytest.raises(ProtocolError):
        pick_challenge(['Basic realm="b"', 'Bearer realm="unterminated'])


def test_overlong_header_is_refused_and_never_echoed() -> None:
    header = 'Bearer realm="https://a.test/t",service="' + "s" * 90_000 + '"'
    with pytest.raises(ProtocolError) as info:
        pick_challenge([header])
    assert str(info.value) == "WWW-Authenticate header is longer than 8192 characters"


@pytest.mark.parametrize("header", [c[1] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_header_is_not_echoed(header: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_challenges(header + "\x1b[2J" + "z" * 1000)
    assert "z" * 50 not in str(info.value)
    assert "\x1b" not in str(info.value)
