"""Hypothesis strategies for everything hostile the fuzz suite feeds imagecheck.

Registry answers mix the plausible (a Bearer challenge whose realm is the stand-in, a token, a
manifest with its digest) with the hostile (odd statuses, lying lengths, huge and quoted
challenge parameters, redirects to other schemes and to cloud metadata addresses, deep JSON,
huge numbers, control characters and ANSI escapes in error messages, endless bodies, gzip
bombs). The plausible choices come first in each ``one_of``, so that hypothesis shrinks a
failure towards the most ordinary answer that still shows it.

No strategy ever produces a DNS name: hosts are the stand-in (``@@SELF@@``), its second
listener (``@@ELSEWHERE@@``), numeric metadata addresses, or ``localhost``. Every other URL
is relative or has a scheme no client may follow (``file:``, ``gopher:``...). See
``netguard.py`` for what happens should a client still try to leave the machine.
"""

from __future__ import annotations

import base64
import json
import string
from typing import Any, cast

from hypothesis import strategies as st

from tests.support.standin import (
    AUTH,
    AUTH_DECODED,
    ELSEWHERE,
    MANIFEST_BODY,
    ROLES,
    SELF,
    Action,
    DeepJson,
    Drop,
    Endless,
    GzipBomb,
    Hang,
    Raw,
    Reply,
    Script,
    Trickle,
    big,
)

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
SHA = "sha256:" + "0" * 64

# 169.254.169.254 (AWS, GCP, Azure, ...) spelled every way a resolver accepts, and AWS's
# IPv6 endpoint: the client must refuse each as a redirect target or a token realm.
METADATA_HOSTS = (
    "169.254.169.254",
    "[fd00:ec2::254]",
    "2852039166",
    "0xa9fea9fe",
    "0251.0376.0251.0376",
    "169.254.43518",
    "[::ffff:169.254.169.254]",
    "[::ffff:a9fe:a9fe]",
)

# Text that must never reach a terminal as is: newlines (forged output lines), carriage
# returns, ANSI escapes (colours, cursor moves, clear screen, OSC 8 links), bidi overrides,
# the Unicode line separators, NUL.
NASTY_TEXT = (
    "line one\nmissing  forged/line:1  this line was not printed by imagecheck",
    "\r\x1b[2K\x1b[1A\x1b[32mfound\x1b[0m",
    "\x1b]8;;http://169.254.169.254/\x1b\\click\x1b]8;;\x1b\\",
    "\x1b[2J\x1b[H",
    "\u202egnp.exe",
    "a\u2028b\u2029c",
    "nul\x00byte",
    "\x07\x08\x0b\x0c\x7f\x9b",
)

_header_chars = st.characters(codec="latin-1", exclude_characters="\r\n")
nasty_text = st.one_of(
    st.sampled_from(NASTY_TEXT),
    st.text(st.characters(codec="utf-8"), max_size=40),
    st.text(st.characters(categories=["Cc", "Cf", "Zl", "Zp"]), min_size=1, max_size=12),
)


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


# -- URLs ------------------------------------------------------------------------------------

_path_text = st.text(st.characters(codec="ascii", exclude_characters="\r\n#?/\\"), max_size=30).map(
    lambda s: s.replace(" ", "%20")
)

metadata_urls = st.builds(
    lambda scheme, host, path: f"{scheme}://{host}/{path}",
    st.sampled_from(["http", "https"]),
    st.sampled_from(METADATA_HOSTS),
    st.sampled_from(
        ["latest/meta-data/iam/security-credentials/", "computeMetadata/v1/", "metadata/v1", ""]
    ),
)
# Where a redirect may point. Hosts: the stand-in, its other origin, metadata. No DNS names.
locations = st.one_of(
    st.sampled_from(
        [
            f"http://{SELF}/v2/repo/manifests/moved",
            "/v2/repo/manifests/moved",
            f"http://{ELSEWHERE}/blobs/elsewhere",
            f"//{ELSEWHERE}/scheme-relative",
            f"http://{SELF}/loop",
            "/loop",
            "file:///etc/passwd",
            "gopher://127.0.0.1:70/_GET%20/",
            "ftp://127.0.0.1/x",
            "data:text/plain,hello",
            "http://localhost:1/closed",
            f"https://{SELF}/v2/repo/manifests/tls",
            "http://[::1]:1/closed",
            "http://127.0.0.1:0/zero",
            "",
        ]
    ),
    metadata_urls,
    _path_text.map(lambda p: f"/x{p}"),
    st.integers(1000, 20000).map(lambda n: f"/{big(n)}"),
)
realms = st.one_of(
    st.sampled_from(
        [
            f"http://{SELF}/token",
            f"https://{SELF}/token",
            f"http://{SELF}/token?existing=1&service=x",
            f"http://{SELF}/token#frag",
            f"http://user:pw@{SELF}/token",
            "file:///etc/passwd",
            "/token",
            "",
            f"http://{SELF}/token\x00",
            "http://[::1/token",
        ]
    ),
    metadata_urls,
    st.text(st.characters(codec="ascii", exclude_characters=':\r\n"\\'), max_size=40),
    st.integers(1000, 70000).map(lambda n: f"http://{SELF}/token?{big(n)}"),
)
_param_value = st.one_of(
    st.sampled_from(["fuzz", "registry.docker.io", "repository:repo:pull", ""]),
    st.text(_header_chars, max_size=30),
)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- headers ---------------------------------------------------------------------------------

bearer = st.builds(
    lambda realm, service, extra: f"Bearer realm={_quote(realm)},service={_quote(service)}{extra}",
    realms,
    _param_value,
    st.sampled_from(
        ["", ',scope="repository:repo:pull"', ',error="invalid_token"', ",scope=unquoted"]
    ),
)
challenges = st.one_of(
    st.just(f'Bearer realm="http://{SELF}/token",service="fuzz"'),
    bearer,
    st.just('Basic realm="fuzz"'),
    st.sampled_from(
        [
            'Bearer realm="unterminated',
            "Bearer realm=",
            "Bearer",
            'Bearer realm=""',
            "Negotiate abc==",
            f'Bearer realm="http://{SELF}/token",service="a\\"b",scope="x,y"',
            f'Basic realm="x", Bearer realm="http://{SELF}/token"',
            f'Bearer realm="http://{SELF}/token?sent={AUTH}"',
            ",,,,",
            '=="',
        ]
    ),
    st.integers(50, 3000).map(lambda n: "Bearer " + ",".join(f'p{i}="v"' for i in range(n))),
    st.integers(1000, 90000).map(lambda n: f'Bearer realm="{big(n)}"'),
    st.text(_header_chars, max_size=200),
)
digests = st.one_of(
    st.just(SHA),
    st.sampled_from(
        [
            "sha512:" + "0" * 128,
            "md5:d41d8cd98f00b204e9800998ecf8427e",
            "sha256:",
            "sha256:" + "0" * 63,
            "SHA256:" + "0" * 64,
            "sha256:" + "g" * 64,
            "blake3:" + "0" * 64,
            "sha256+b64u:LCa0a2j_xo_5m0U8HTBBNBNCLXBkg7-g-YpeiGJm564",
            "sha256:" + "0" * 64 + "\x1b[31m",
        ]
    ),
    st.integers(1000, 60000).map(lambda n: "sha256:" + "0" * n),
    st.text(_header_chars, max_size=80),
)
retry_afters = st.one_of(
    st.sampled_from(["0", "1", "3", "120", "86400"]),
    st.sampled_from(
        [
            "-1",
            "1.5",
            "1e9",
            "99999999999999999999999999",
            big(5000, "9"),
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "Mon, 01 Jan 0001 00:00:00 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT garbage",
            "²",
            "",
        ]
    ),
    st.text(_header_chars, max_size=40),
)
content_types = st.one_of(
    st.sampled_from([OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST, "application/json"]),
    st.sampled_from(["text/html", "", ";;;", "application/json; charset=utf-16"]),
    st.text(_header_chars, max_size=60),
)


def _header(name: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str]]:
    return values.map(lambda value: (name, value))


headers = st.one_of(
    _header("WWW-Authenticate", challenges),
    _header("Location", locations),
    _header("Docker-Content-Digest", digests),
    _header("Content-Type", content_types),
    _header("Retry-After", retry_afters),
    _header("Content-Encoding", st.sampled_from(["gzip", "deflate", "br", "zstd", "x-bogus"])),
    _header("Content-Length", st.sampled_from(["-1", "1e3", "0x10", "99999999999999999999"])),
    _header("Transfer-Encoding", st.sampled_from(["chunked", "gzip, chunked", "bogus"])),
    _header("X-Huge", st.integers(8000, 200000).map(big)),
    st.tuples(st.text(string.ascii_letters + "-", min_size=1, max_size=20), st.text(_header_chars)),
)

# -- bodies ----------------------------------------------------------------------------------

oci_errors = st.builds(
    lambda code, message, detail: _json(
        {"errors": [{"code": code, "message": message, "detail": detail}]}
    ),
    st.one_of(st.sampled_from(["MANIFEST_UNKNOWN", "DENIED", "UNAUTHORIZED"]), nasty_text),
    st.one_of(nasty_text, st.just(f"you sent {AUTH} ({AUTH_DECODED})")),
    st.one_of(st.none(), nasty_text, st.integers()),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
odd_errors = st.one_of(
    st.just(_json({"errors": []})),
    st.just(_json({"errors": "no"})),
    st.just(_json({"errors": [None, 1]})),
    st.just(_json({"errors": [{"code": {"a": 1}, "message": ["x"]}]})),
    st.just(b'{"errors":[{"code":' + big(5000, "9").encode() + b"}]}"),
    st.just(b"<html><body><h1>502 Bad Gateway</h1>" + b"\x1b[31m" + b"</body></html>"),
)
# The expires_in a token service may send: ordinary, absurd, or not a number at all.
_expires: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from([300, 60, 0, -1, 1.5, None, "60", True, [], {}]),
    st.just(float("inf")),
    st.integers(),
)
token_bodies = st.one_of(
    st.just(b'{"token": "fuzz-token"}'),
    st.builds(
        lambda field, value, expires: _json({field: value, "expires_in": expires}),
        st.sampled_from(["token", "access_token"]),
        st.one_of(st.just("fuzz-token"), st.text(max_size=40)),
        _expires,
    ),
    st.sampled_from(
        [
            b'{"token": "t", "expires_in": 1e999}',
            b'{"token": "t", "expires_in": ' + b"9" * 400 + b"}",
            b'{"token": "t", "expires_in": ' + big(5000, "9").encode() + b"}",
            b'{"token": "t", "expires_in": -1e999}',
            b'{"token": "t", "expires_in": NaN}',
            b'{"token": "t", "issued_at": "not a date"}',
            b'{"token": 123}',
            b'{"token": ""}',
            b'{"token": null, "access_token": ["x"]}',
            b'{"token": "tok\\r\\nInjected: 1"}',
            b'{"token": "' + big(70000).encode() + b'"}',
            b"[]",
            b'"token"',
            b"\xff\xfe\x00",
        ]
    ),
    json_values.map(_json),
)
manifest_bodies = st.one_of(
    st.just(MANIFEST_BODY),
    st.just(_json({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []})),
    st.just(_json({"manifests": [{"platform": {"os": "\x1b[31m"}}] * 3})),
    json_values.map(_json),
)
streams = st.one_of(
    st.builds(Endless, st.sampled_from([64 * 1024 * 1024, 5 * 1024 * 1024, 70 * 1024])),
    st.builds(GzipBomb),
    st.builds(
        DeepJson,
        st.sampled_from([2000, 20000, 300000]),
        st.sampled_from([b"", b'{"errors":', b'{"token":', b'{"manifests":']),
        st.sampled_from([b"[", b'{"a":']),
    ),
)
bodies = st.one_of(
    st.just(b""),
    oci_errors,
    odd_errors,
    token_bodies,
    manifest_bodies,
    st.binary(max_size=512),
    streams,
)
framings = st.sampled_from(["length", "length", "chunked", "close", "short", "long", "none"])
statuses = st.one_of(
    st.sampled_from([200, 401, 404, 403, 429, 503, 500, 502, 504, 408]),
    st.sampled_from([301, 302, 303, 307, 308, 204, 304, 405, 400, 501, 505, 100, 101, 103, 418]),
    st.integers(100, 599),
)


def replies(
    status: st.SearchStrategy[int] = statuses,
    head: st.SearchStrategy[list[tuple[str, str]]] | None = None,
    body: st.SearchStrategy[Any] = bodies,
) -> st.SearchStrategy[Reply]:
    return st.builds(
        lambda s, h, b, f, lie, reason: Reply(s, tuple(h), b, f, lie, reason),
        status,
        head if head is not None else st.lists(headers, max_size=4),
        body,
        framings,
        st.integers(1, 100000),
        st.one_of(st.none(), st.sampled_from(["", "OK\x1b[31m", "Found\x00"])),
    )


hostile_actions: st.SearchStrategy[Action] = st.one_of(
    replies(),
    st.builds(Hang, st.sampled_from([0.05, 0.5, 5.0])),
    st.builds(
        Trickle,
        replies(body=st.one_of(st.just(b"{}"), st.builds(Endless, st.just(1 << 20)))),
        st.sampled_from([0.01, 0.2]),
        st.sampled_from([1, 64]),
    ),
    st.builds(
        Drop,
        st.sampled_from([b"", b"HTTP/1.1 200 OK\r\nContent-Ty", b"HTTP/1.1 401"]),
        st.booleans(),
    ),
    st.builds(
        Raw,
        st.one_of(
            st.sampled_from(
                [
                    b"HTTP/1.1 999 Nine\r\nContent-Length: 0\r\n\r\n",
                    b"HTTP/1.1 2000 Big\r\n\r\n",
                    b"HTTP/2 200\r\n\r\n",
                    b"HTTP/1.1 200 OK\r\nX: " + big(120000).encode() + b"\r\n\r\n",
                    b"HTTP/1.1 200 OK\n\n{}",
                    b"\x00\x00\x00\x04\x00\x00\x00\x00\x00",
                    b"SSH-2.0-OpenSSH_9.6\r\n",
                ]
            ),
            st.binary(max_size=200),
        ),
    ),
)


def _with(status: int, *pairs: tuple[str, str], body: bytes = b"") -> Reply:
    return Reply(status, pairs, body)


BEARER_PING = _with(401, ("WWW-Authenticate", f'Bearer realm="http://{SELF}/token",service="fuzz"'))
BASIC_PING = _with(401, ("WWW-Authenticate", 'Basic realm="fuzz"'))
OPEN_PING = _with(200, ("Content-Type", "application/json"), body=b"{}")
plain_pings = st.sampled_from([BEARER_PING, BEARER_PING, BASIC_PING, OPEN_PING])
_ping_actions = st.one_of(
    plain_pings,
    replies(
        status=st.sampled_from([401, 401, 200, 404, 503]),
        head=st.lists(_header("WWW-Authenticate", challenges), min_size=1, max_size=3),
    ),
    hostile_actions,
)
_token_actions = st.one_of(
    st.just(_with(200, ("Content-Type", "application/json"), body=b'{"token": "fuzz-token"}')),
    replies(status=st.sampled_from([200, 200, 401, 403, 404, 405, 503]), body=token_bodies),
    replies(
        status=st.sampled_from([301, 302, 307, 308]),
        head=st.lists(_header("Location", locations), min_size=1, max_size=1),
    ),
    hostile_actions,
)
_manifest_actions = st.one_of(
    st.just(
        _with(
            200,
            ("Content-Type", OCI_MANIFEST),
            ("Docker-Content-Digest", SHA),
            body=MANIFEST_BODY,
        )
    ),
    st.just(_with(404, ("Content-Type", "application/json"), body=b'{"errors": []}')),
    replies(status=st.sampled_from([404, 401, 403, 400]), body=oci_errors),
    replies(
        status=st.sampled_from([429, 503, 500]),
        head=st.lists(_header("Retry-After", retry_afters), max_size=1),
    ),
    replies(
        status=st.sampled_from([301, 302, 303, 307, 308]),
        head=st.lists(_header("Location", locations), min_size=1, max_size=2),
    ),
    replies(
        status=st.just(200),
        head=st.lists(
            st.one_of(
                _header("Docker-Content-Digest", digests), _header("Content-Type", content_types)
            ),
            max_size=3,
        ),
        body=st.one_of(manifest_bodies, streams),
    ),
    hostile_actions,
)
_other_actions = st.one_of(
    st.just(_with(200, ("Docker-Content-Digest", SHA), body=MANIFEST_BODY)),
    replies(
        status=st.sampled_from([301, 302, 307]),
        head=st.lists(_header("Location", locations), min_size=1, max_size=1),
    ),
    hostile_actions,
)
error_statuses = st.one_of(
    st.sampled_from([405, 400, 501, 500, 503, 429, 418, 404, 401, 403]), st.integers(100, 599)
)
hostile_bodies = st.one_of(
    oci_errors,
    streams,
    odd_errors,
    st.builds(DeepJson, st.sampled_from([1500, 100000]), st.sampled_from([b"", b'{"errors":'])),
    st.binary(max_size=256),
)


def _acts(strategy: st.SearchStrategy[Action]) -> st.SearchStrategy[tuple[Action, ...]]:
    return st.lists(strategy, min_size=1, max_size=3).map(tuple)


def _scenario(**roles: st.SearchStrategy[tuple[Action, ...]]) -> st.SearchStrategy[Script]:
    return st.fixed_dictionaries(roles).map(lambda actions: Script(cast(Any, actions)))


# Each scenario aims at one part of the protocol, so that its hostile answers are reached
# often; ``random`` lets every role answer anything.
_SCENARIOS: dict[str, st.SearchStrategy[Script]] = {
    # The token dance: a challenge (usually the stand-in's own realm), then any token answer.
    "token": _scenario(
        ping=_acts(st.one_of(st.just(BEARER_PING), _ping_actions)), token=_acts(_token_actions)
    ),
    # A manifest answer, hostile in status, headers and body, after a plain ping.
    "manifest": _scenario(ping=_acts(plain_pings), manifest=_acts(_manifest_actions)),
    # An error status whose body is deep JSON, a huge number, control characters, a stream:
    # the HEAD is answered 405, so the GET that follows reads the body.
    "error body": _scenario(
        ping=_acts(plain_pings),
        manifest=st.tuples(
            st.just(Reply(405)), replies(status=error_statuses, body=hostile_bodies)
        ),
    ),
    # A redirect, from any step, to anywhere (other schemes, metadata, another origin, loops).
    "redirect": _scenario(
        ping=_acts(
            st.one_of(
                plain_pings,
                replies(
                    status=st.sampled_from([301, 302, 307]),
                    head=st.lists(_header("Location", locations), min_size=1, max_size=1),
                ),
            )
        ),
        token=_acts(_token_actions),
        manifest=_acts(
            replies(
                status=st.sampled_from([301, 302, 303, 307, 308]),
                head=st.lists(_header("Location", locations), min_size=1, max_size=1),
            )
        ),
        other=_acts(_other_actions),
    ),
    # The ping itself: any challenge, status, body.
    "ping": _scenario(ping=_acts(_ping_actions)),
    # The blob an image config is read from (--platform, single manifests).
    "blob": _scenario(ping=_acts(plain_pings), blob=_acts(hostile_actions)),
    "random": st.builds(
        Script,
        st.dictionaries(st.sampled_from(ROLES), _acts(hostile_actions), min_size=1),
    ),
}


def scripts() -> st.SearchStrategy[Script]:
    """A script for the stand-in: a scenario, then its answers (roles left out answer
    plainly)."""
    return st.one_of(*_SCENARIOS.values())


# -- image references --------------------------------------------------------------------------

repositories = st.one_of(
    st.just("repo"),
    st.sampled_from(["team/app", "a/b/c/d", "x" * 200, "sample_app.v2"]),
)
identifiers = st.one_of(
    st.just(":tag"),
    st.just("@" + SHA),
    st.just(":tag@" + SHA),
    st.sampled_from([":" + "t" * 128, "@sha512:" + "0" * 128]),
)

# -- credentials -----------------------------------------------------------------------------

CANARY = "S3cr3t-CANARY-7f2d9c"


def b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()


secrets_with_canary = st.builds(
    lambda before, after: f"{before}{CANARY}{after}",
    st.one_of(
        st.just(""), st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=8)
    ),
    st.one_of(st.just(""), st.sampled_from(["\x1b[31m", "\t", "\x00", " ", "é", "\u202e"])),
)


# -- known attacks ---------------------------------------------------------------------------

_JSON = ("Content-Type", "application/json")


def _deep(prefix: bytes) -> DeepJson:
    return DeepJson(100000, prefix)


# Each is run first, every time (``@example``), whatever hypothesis then explores: the attack
# classes of issue #10, so that a fix that regresses is caught on every run.
KNOWN_ATTACKS: dict[str, Script] = {
    "gzip bomb as the ping's body": Script({"ping": (Reply(200, (_JSON,), GzipBomb()),)}),
    "endless ping body": Script(
        {"ping": (Reply(200, (_JSON,), Endless(64 * 1024 * 1024), framing="close"),)}
    ),
    # 405: HEAD is not supported, so the error body is read from the GET that follows.
    "gzip bomb as an error body": Script(
        {"ping": (OPEN_PING,), "manifest": (Reply(405, (_JSON,), GzipBomb()),)}
    ),
    "gzip bomb as the token answer": Script(
        {"ping": (BEARER_PING,), "token": (Reply(200, (_JSON,), GzipBomb()),)}
    ),
    "deep JSON error body": Script(
        {"ping": (OPEN_PING,), "manifest": (Reply(405, (_JSON,), _deep(b'{"errors":')),)}
    ),
    "deep JSON token answer": Script(
        {"ping": (BEARER_PING,), "token": (Reply(200, (_JSON,), _deep(b'{"token":')),)}
    ),
    "deep JSON manifest, read for --platform": Script(
        {"manifest": (Reply(200, (_JSON, ("Docker-Content-Digest", SHA)), _deep(b"")),)}
    ),
    "expires_in too big for a float": Script(
        {
            "ping": (BEARER_PING,),
            "token": (Reply(200, (_JSON,), b'{"token": "t", "expires_in": ' + b"9" * 400 + b"}"),),
        }
    ),
    "expires_in past the integer-string limit": Script(
        {
            "ping": (BEARER_PING,),
            "token": (
                Reply(200, (_JSON,), b'{"token": "t", "expires_in": %s}' % big(5000, "9").encode()),
            ),
        }
    ),
    "redirect to the metadata address": Script(
        {"manifest": (Reply(302, (("Location", "http://169.254.169.254/latest/meta-data/"),)),)}
    ),
    "redirect to metadata, decimal spelling": Script(
        {"manifest": (Reply(307, (("Location", "http://2852039166/computeMetadata/v1/"),)),)}
    ),
    "token realm redirects to metadata": Script(
        {
            "ping": (BEARER_PING,),
            "token": (Reply(302, (("Location", "http://[fd00:ec2::254]/latest/api/token"),)),),
        }
    ),
    "redirect to another origin": Script(
        {"manifest": (Reply(307, (("Location", f"http://{ELSEWHERE}/v2/repo/manifests/tag"),)),)}
    ),
    "ANSI and newlines in an OCI error": Script(
        {
            "manifest": (
                Reply(
                    400,
                    (_JSON,),
                    _json(
                        {
                            "errors": [
                                {
                                    "code": "\x1b[32mFOUND",
                                    "message": "ok\nfound    forged:1  sha256:0\r\x1b[2K",
                                }
                            ]
                        }
                    ),
                ),
            )
        }
    ),
    "control characters in the reason phrase": Script(
        {"manifest": (Reply(503, reason="Busy\x1b[2J\x1b[H"),)}
    ),
    "registry echoes the credentials it was sent": Script(
        {
            "ping": (BASIC_PING,),
            "manifest": (
                Reply(
                    400,
                    (_JSON,),
                    _json({"errors": [{"code": "X", "message": f"{AUTH} {AUTH_DECODED}"}]}),
                ),
            ),
        }
    ),
    "Retry-After past any deadline": Script(
        {"manifest": (Reply(503, (("Retry-After", "9" * 30),)),)}
    ),
    "ping that never answers": Script({"ping": (Hang(5.0),)}),
    "manifest trickled a byte at a time": Script(
        {"manifest": (Trickle(Reply(200, (_JSON,), Endless(1 << 20)), 0.01, 1),)}
    ),
}
