"""Tests for imagecheck.reference._reference: the reference grammar, table-driven."""

from __future__ import annotations

import dataclasses

import pytest

from imagecheck.errors import InvalidReferenceError
from imagecheck.reference import Reference, parse_reference

HUB = "docker.io"
HUB_API = "registry-1.docker.io"
D256 = "sha256:7cc4b5aefd1d0cadf8d97d4350462ba51c694ebca145b08d7d41b41acc8db5aa"
D512 = "sha512:" + "0123456789abcdef" * 8
D384 = "sha384:" + "0123456789abcdef" * 6
DBLAKE3 = "blake3:" + "ab" * 32
# Unregistered algorithms, examples from the OCI image-spec descriptor.md.
DB64U = "sha256+b64u:LCa0a2j_xo_5m0U8HTBBNBNCLXBkg7-g-YpeiGJm564"
DMULTI = "multihash+base58:QmRZxt2b1FVZPNqd8hsiykDL3TdBDeTSPX9Kv46HmX4Gx8"
TAG128 = "t" * 128
IMAGE_ID = "a" * 64

# (id, input, registry, repository, tag, digest, str(), api_host)
VALID: list[tuple[str, str, str, str, str | None, str | None, str, str]] = [
    # Docker Hub short names and normalisation
    ("hub-short", "busybox", HUB, "library/busybox", "latest", None,
     "docker.io/library/busybox:latest", HUB_API),
    ("hub-short-tag", "busybox:1.36", HUB, "library/busybox", "1.36", None,
     "docker.io/library/busybox:1.36", HUB_API),
    ("hub-library", "library/busybox:1.36", HUB, "library/busybox", "1.36", None,
     "docker.io/library/busybox:1.36", HUB_API),
    ("hub-docker.io-short", "docker.io/busybox", HUB, "library/busybox", "latest", None,
     "docker.io/library/busybox:latest", HUB_API),
    ("hub-docker.io-library", "docker.io/library/busybox", HUB, "library/busybox", "latest",
     None, "docker.io/library/busybox:latest", HUB_API),
    ("hub-index", "index.docker.io/busybox", HUB, "library/busybox", "latest", None,
     "docker.io/library/busybox:latest", HUB_API),
    ("hub-index-library-tag", "index.docker.io/library/busybox:1", HUB, "library/busybox",
     "1", None, "docker.io/library/busybox:1", HUB_API),
    # Only "docker.io" and "index.docker.io", spelled exactly so, are normalised (distribution's
    # splitDockerDomain); other spellings are asked as written, as containerd asks them.
    ("hub-registry-1-as-written", "registry-1.docker.io/library/busybox", HUB_API,
     "library/busybox", "latest", None, "registry-1.docker.io/library/busybox:latest", HUB_API),
    ("hub-registry-1-no-library", "registry-1.docker.io/busybox", HUB_API, "busybox", "latest",
     None, "registry-1.docker.io/busybox:latest", HUB_API),
    ("hub-uppercase-host-as-written", "DOCKER.IO/busybox", "DOCKER.IO", "busybox", "latest",
     None, "DOCKER.IO/busybox:latest", "DOCKER.IO"),
    ("hub-mixed-case-index-as-written", "Index.Docker.Io/team/app", "Index.Docker.Io",
     "team/app", "latest", None, "Index.Docker.Io/team/app:latest", "Index.Docker.Io"),
    ("hub-user-repo", "team/app", HUB, "team/app", "latest", None,
     "docker.io/team/app:latest", HUB_API),
    ("hub-user-repo-tag", "team/app:v1", HUB, "team/app", "v1", None,
     "docker.io/team/app:v1", HUB_API),
    ("hub-deep", "a/b/c/d", HUB, "a/b/c/d", "latest", None,
     "docker.io/a/b/c/d:latest", HUB_API),
    ("hub-docker.io-deep", "docker.io/library/a/b", HUB, "library/a/b", "latest", None,
     "docker.io/library/a/b:latest", HUB_API),
    ("hub-numeric", "0/1", HUB, "0/1", "latest", None, "docker.io/0/1:latest", HUB_API),
    ("hub-dotted-repo", "a.b.c", HUB, "library/a.b.c", "latest", None,
     "docker.io/library/a.b.c:latest", HUB_API),
    # bare "host" or "host:port" without a slash is a Hub name, as in Docker
    ("bare-domain-is-hub-repo", "ghcr.io", HUB, "library/ghcr.io", "latest", None,
     "docker.io/library/ghcr.io:latest", HUB_API),
    ("bare-localhost-port-is-tag", "localhost:5000", HUB, "library/localhost", "5000", None,
     "docker.io/library/localhost:5000", HUB_API),
    # other registries
    ("ghcr", "ghcr.io/owner/repo", "ghcr.io", "owner/repo", "latest", None,
     "ghcr.io/owner/repo:latest", "ghcr.io"),
    ("ghcr-tag", "ghcr.io/owner/repo:v1.2.3", "ghcr.io", "owner/repo", "v1.2.3", None,
     "ghcr.io/owner/repo:v1.2.3", "ghcr.io"),
    ("ghcr-single-component", "ghcr.io/app", "ghcr.io", "app", "latest", None,
     "ghcr.io/app:latest", "ghcr.io"),
    ("quay", "quay.io/coreos/etcd:v3.5.0", "quay.io", "coreos/etcd", "v3.5.0", None,
     "quay.io/coreos/etcd:v3.5.0", "quay.io"),
    ("gcr-distroless", "gcr.io/distroless/static-debian12:nonroot", "gcr.io",
     "distroless/static-debian12", "nonroot", None,
     "gcr.io/distroless/static-debian12:nonroot", "gcr.io"),
    ("deep-path", "registry.example.com/team/app/sub:2024.01", "registry.example.com",
     "team/app/sub", "2024.01", None, "registry.example.com/team/app/sub:2024.01",
     "registry.example.com"),
    ("uppercase-host-kept", "Registry.Example.COM/app", "Registry.Example.COM", "app",
     "latest", None, "Registry.Example.COM/app:latest", "Registry.Example.COM"),
    ("hyphenated-host", "my-registry.example-corp.io/a", "my-registry.example-corp.io", "a",
     "latest", None, "my-registry.example-corp.io/a:latest", "my-registry.example-corp.io"),
    ("punycode-host", "xn--bcher-kva.example/app", "xn--bcher-kva.example", "app", "latest",
     None, "xn--bcher-kva.example/app:latest", "xn--bcher-kva.example"),
    ("hub-port-is-not-hub", "docker.io:443/app", "docker.io:443", "app", "latest", None,
     "docker.io:443/app:latest", "docker.io:443"),
    # an uppercase first component is a registry (distribution's splitDockerDomain)
    ("uppercase-first-component", "MyOrg/app", "MyOrg", "app", "latest", None,
     "MyOrg/app:latest", "MyOrg"),
    ("uppercase-localhost", "LOCALHOST/app", "LOCALHOST", "app", "latest", None,
     "LOCALHOST/app:latest", "LOCALHOST"),
    ("mixed-case-localhost-port", "LocalHost:5000/app", "LocalHost:5000", "app", "latest",
     None, "LocalHost:5000/app:latest", "LocalHost:5000"),
    # no domain for distribution's grammar, but a path as a whole: containerd asks that host
    ("underscore-host-without-port", "exa_mple.com/app", "exa_mple.com", "app", "latest", None,
     "exa_mple.com/app:latest", "exa_mple.com"),
    # localhost, ports, IP addresses
    ("localhost", "localhost/app", "localhost", "app", "latest", None,
     "localhost/app:latest", "localhost"),
    ("localhost-port", "localhost:5000/app", "localhost:5000", "app", "latest", None,
     "localhost:5000/app:latest", "localhost:5000"),
    ("localhost-port-deep-tag", "localhost:5000/team/app:dev", "localhost:5000", "team/app",
     "dev", None, "localhost:5000/team/app:dev", "localhost:5000"),
    ("localhost-library-kept", "localhost/library/app", "localhost", "library/app", "latest",
     None, "localhost/library/app:latest", "localhost"),
    ("dotless-host-with-port", "myregistry:5000/app", "myregistry:5000", "app", "latest", None,
     "myregistry:5000/app:latest", "myregistry:5000"),
    ("port-1", "example.com:1/app", "example.com:1", "app", "latest", None,
     "example.com:1/app:latest", "example.com:1"),
    ("port-65535", "example.com:65535/app", "example.com:65535", "app", "latest", None,
     "example.com:65535/app:latest", "example.com:65535"),
    ("ipv4", "127.0.0.1/app", "127.0.0.1", "app", "latest", None,
     "127.0.0.1/app:latest", "127.0.0.1"),
    ("ipv4-port-tag", "127.0.0.1:5000/app:tag", "127.0.0.1:5000", "app", "tag", None,
     "127.0.0.1:5000/app:tag", "127.0.0.1:5000"),
    ("ipv4-port-deep", "10.0.0.1:443/a/b", "10.0.0.1:443", "a/b", "latest", None,
     "10.0.0.1:443/a/b:latest", "10.0.0.1:443"),
    ("ipv6", "[::1]/app", "[::1]", "app", "latest", None, "[::1]/app:latest", "[::1]"),
    ("ipv6-port", "[::1]:5000/app", "[::1]:5000", "app", "latest", None,
     "[::1]:5000/app:latest", "[::1]:5000"),
    ("ipv6-full-port-tag", "[2001:db8::1]:5000/team/app:1.0", "[2001:db8::1]:5000",
     "team/app", "1.0", None, "[2001:db8::1]:5000/team/app:1.0", "[2001:db8::1]:5000"),
    ("ipv6-uppercase-hex", "[FE80::1]:5000/app", "[FE80::1]:5000", "app", "latest", None,
     "[FE80::1]:5000/app:latest", "[FE80::1]:5000"),
    # path component separators
    ("sep-dot", "a.b/c.d/e", "a.b", "c.d/e", "latest", None, "a.b/c.d/e:latest", "a.b"),
    ("sep-underscore", "ghcr.io/c_d", "ghcr.io", "c_d", "latest", None,
     "ghcr.io/c_d:latest", "ghcr.io"),
    ("sep-double-underscore", "a__b", HUB, "library/a__b", "latest", None,
     "docker.io/library/a__b:latest", HUB_API),
    ("sep-dashes", "a---b", HUB, "library/a---b", "latest", None,
     "docker.io/library/a---b:latest", HUB_API),
    ("sep-mixed", "ghcr.io/a-b_c.d__e---f/g", "ghcr.io", "a-b_c.d__e---f/g", "latest", None,
     "ghcr.io/a-b_c.d__e---f/g:latest", "ghcr.io"),
    # tags
    ("tag-128", f"busybox:{TAG128}", HUB, "library/busybox", TAG128, None,
     f"docker.io/library/busybox:{TAG128}", HUB_API),
    ("tag-leading-underscore", "busybox:_x", HUB, "library/busybox", "_x", None,
     "docker.io/library/busybox:_x", HUB_API),
    ("tag-uppercase", "busybox:UPPER", HUB, "library/busybox", "UPPER", None,
     "docker.io/library/busybox:UPPER", HUB_API),
    ("tag-punctuation", "busybox:1.0-rc.1_build", HUB, "library/busybox", "1.0-rc.1_build",
     None, "docker.io/library/busybox:1.0-rc.1_build", HUB_API),
    ("tag-single-char", "busybox:a", HUB, "library/busybox", "a", None,
     "docker.io/library/busybox:a", HUB_API),
    ("tag-double-dot", "busybox:v1..2", HUB, "library/busybox", "v1..2", None,
     "docker.io/library/busybox:v1..2", HUB_API),
    ("tag-on-image-id-lookalike", f"{IMAGE_ID}:v1", HUB, f"library/{IMAGE_ID}", "v1", None,
     f"docker.io/library/{IMAGE_ID}:v1", HUB_API),
    # digests
    ("digest-hub", f"busybox@{D256}", HUB, "library/busybox", None, D256,
     f"docker.io/library/busybox@{D256}", HUB_API),
    ("digest-ghcr", f"ghcr.io/a/b@{D256}", "ghcr.io", "a/b", None, D256,
     f"ghcr.io/a/b@{D256}", "ghcr.io"),
    ("digest-sha512", f"ghcr.io/a/b@{D512}", "ghcr.io", "a/b", None, D512,
     f"ghcr.io/a/b@{D512}", "ghcr.io"),
    ("digest-sha384", f"ghcr.io/a/b@{D384}", "ghcr.io", "a/b", None, D384,
     f"ghcr.io/a/b@{D384}", "ghcr.io"),
    ("digest-ipv6-port", f"[::1]:5000/app@{D256}", "[::1]:5000", "app", None, D256,
     f"[::1]:5000/app@{D256}", "[::1]:5000"),
    ("tag-and-digest-hub", f"busybox:1.36@{D256}", HUB, "library/busybox", "1.36", D256,
     f"docker.io/library/busybox:1.36@{D256}", HUB_API),
    ("tag-and-digest-full", f"docker.io/library/busybox:latest@{D256}", HUB,
     "library/busybox", "latest", D256, f"docker.io/library/busybox:latest@{D256}", HUB_API),
    ("tag-and-digest-port", f"localhost:5000/app:v1@{D256}", "localhost:5000", "app", "v1",
     D256, f"localhost:5000/app:v1@{D256}", "localhost:5000"),
    # the 255-character limit, on the path alone (library/ included), not the registry
    ("path-255", "r.io/" + "a" * 255, "r.io", "a" * 255, "latest", None,
     "r.io/" + "a" * 255 + ":latest", "r.io"),
    ("hub-path-255", "a" * 247, HUB, "library/" + "a" * 247, "latest", None,
     "docker.io/library/" + "a" * 247 + ":latest", HUB_API),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest", "expected", "api_host"),
    [case[1:] for case in VALID],
    ids=[case[0] for case in VALID],
)
def test_parse_valid(
    text: str,
    registry: str,
    repository: str,
    tag: str | None,
    digest: str | None,
    expected: str,
    api_host: str,
) -> None:
    ref = parse_reference(text)
    assert ref.registry == registry
    assert ref.repository == repository
    assert ref.tag == tag
    assert ref.digest == digest
    assert str(ref) == expected
    assert ref.api_host == api_host
    assert ref.name == f"{registry}/{repository}"
    assert ref.identifier == (digest if digest is not None else tag)
    assert ref.is_docker_hub == (registry.lower() in {HUB, HUB_API, "index.docker.io"})


@pytest.mark.parametrize("text", [case[1] for case in VALID], ids=[case[0] for case in VALID])
def test_str_round_trips(text: str) -> None:
    ref = parse_reference(text)
    assert parse_reference(str(ref)) == ref


# (id, input, hostname, port)
HOSTS: list[tuple[str, str, str, int | None]] = [
    ("hub", "busybox", "docker.io", None),
    ("ghcr", "ghcr.io/a/b", "ghcr.io", None),
    ("localhost", "localhost/app", "localhost", None),
    ("localhost-port", "localhost:5000/app", "localhost", 5000),
    ("ipv4-port", "127.0.0.1:5000/app", "127.0.0.1", 5000),
    ("ipv6", "[::1]/app", "::1", None),
    ("ipv6-port", "[::1]:5000/app", "::1", 5000),
    ("ipv6-full", "[2001:db8::1]:443/app", "2001:db8::1", 443),
    ("leading-zero-port", "example.com:05000/app", "example.com", 5000),
]


@pytest.mark.parametrize(
    ("text", "hostname", "port"), [case[1:] for case in HOSTS], ids=[case[0] for case in HOSTS]
)
def test_hostname_and_port(text: str, hostname: str, port: int | None) -> None:
    ref = parse_reference(text)
    assert ref.hostname == hostname
    assert ref.port == port


UPPERCASE = "uppercase letters are not allowed in repository names"
SHA256_HEX = "sha256 digests are 64 lowercase hex characters"

# (id, input, a distinctive part of the reason)
INVALID: list[tuple[str, str, str]] = [
    # copy-and-paste mistakes
    ("empty", "", "empty reference"),
    ("leading-space", " busybox", "whitespace is not allowed"),
    ("trailing-space", "busybox ", "whitespace is not allowed"),
    ("trailing-newline", "busybox\n", "whitespace is not allowed"),
    ("inner-space", "bus box", "whitespace is not allowed"),
    ("tab", "busy\tbox:1", "whitespace is not allowed"),
    ("nbsp", "busybox\u00a0", "whitespace is not allowed"),
    ("scheme-https", "https://ghcr.io/a/b", "a scheme such as https:// is not part"),
    ("scheme-docker", "docker://busybox", "a scheme such as https:// is not part"),
    ("image-id", IMAGE_ID, "is an image ID, not a reference"),
    # repository names
    ("uppercase-hub", "Busybox", UPPERCASE),
    ("uppercase-first-component-and-path", "MyOrg/App", UPPERCASE),
    ("uppercase-path", "ghcr.io/Owner/repo", UPPERCASE),
    ("trailing-slash", "ghcr.io/a/b/", "repository name must not end with a slash"),
    ("registry-only-slash", "ghcr.io/", "repository name must not end with a slash"),
    ("trailing-slash-before-tag", "ghcr.io/a/:v1", "must not end with a slash"),
    ("leading-slash", "/busybox", "repository name must not start with a slash"),
    ("double-slash-after-registry", "ghcr.io//a", "empty path component"),
    ("double-slash", "a//b", "empty path component"),
    ("double-slash-deep", "ghcr.io/a//b", "empty path component"),
    ("missing-name-tag", ":latest", "missing repository name"),
    ("missing-name-digest", f"@{D256}", "missing repository name"),
    ("sep-underscore-dash", "a_-b", 'invalid path component "a_-b"'),
    ("sep-double-dot", "a..b", 'invalid path component "a..b"'),
    ("sep-triple-underscore", "a___b", 'invalid path component "a___b"'),
    ("leading-underscore", "_a", 'invalid path component "_a"'),
    ("trailing-dash", "ghcr.io/a-", 'invalid path component "a-"'),
    ("non-ascii", "büsybox", 'invalid path component "büsybox"'),
    ("plus-in-path", "ghcr.io/a+b", 'invalid path component "a+b"'),
    ("path-256", "r.io/" + "a" * 256, "repository path is longer than 255 characters"),
    ("hub-path-256", "a" * 248, "repository path is longer than 255 characters"),
    ("path-host-256", "a_b.io/" + "a" * 249, "repository path is longer than 255 characters"),
    # registries
    ("port-0", "localhost:0/app", "invalid port"),
    ("port-70000", "localhost:70000/app", "invalid port"),
    ("port-empty", "localhost:/app", "invalid port"),
    ("port-letters", "localhost:abc/app", "invalid port"),
    ("port-huge", "localhost:" + "9" * 5000 + "/app", "invalid port"),
    ("ipv6-port-0", "[::1]:0/app", "invalid port"),
    ("ipv6-unbracketed", "::1/app", "an IPv6 address must be in brackets"),
    ("ipv6-unbracketed-port", "fe80::1:5000/app", "an IPv6 address must be in brackets"),
    ("ipv6-unclosed", "[::1/app", "invalid IPv6 registry host"),
    ("ipv6-bad-hex", "[::g]:5000/app", "invalid IPv6 registry host"),
    ("ipv6-zone", "[fe80::1%eth0]:5000/app", "invalid IPv6 registry host"),
    ("ipv6-mapped-ipv4", "[::ffff:1.2.3.4]/app", "invalid IPv6 registry host"),
    ("ipv6-too-short", "[1:2:3]/app", "invalid IPv6 registry host"),
    ("ipv6-registry-only", "[::1]:5000", "a registry must be followed by /repository"),
    ("ipv6-junk-after", "[::1]x/app", "invalid IPv6 registry host"),
    ("host-leading-dash", "-bad.io/app", 'invalid registry host "-bad.io"'),
    ("host-trailing-dash", "bad-.io/app", 'invalid registry host "bad-.io"'),
    ("host-empty-label", "a..b.io/app", 'invalid registry host "a..b.io"'),
    ("host-underscore-port", "exa_mple.com:5000/app", 'invalid registry host "exa_mple.com"'),
    # tags
    ("tag-empty", "busybox:", "empty tag"),
    ("tag-129", "busybox:" + "t" * 129, "tag is longer than 128 characters"),
    ("tag-leading-dot", "busybox:.hidden", 'invalid tag ".hidden"'),
    ("tag-leading-dash", "busybox:-dash", 'invalid tag "-dash"'),
    ("tag-plus", "busybox:a+b", 'invalid tag "a+b"'),
    ("tag-two-colons", "ghcr.io/a/b:v1:v2", 'invalid tag "v1:v2"'),
    ("digest-after-colon", f"busybox:{D256}", "a digest goes after '@', not ':'"),
    # digests
    ("digest-empty", "busybox@", "empty digest after '@'"),
    ("digest-two-at", f"busybox@{D256}@{D256}", "only one '@' is allowed"),
    ("digest-credentials", "user@ghcr.io/a", "expected algorithm:encoded"),
    ("digest-no-colon", "busybox@sha256", "expected algorithm:encoded"),
    ("digest-no-algorithm", "busybox@:abc", "expected algorithm:encoded"),
    ("digest-no-encoded", "busybox@sha256:", "expected algorithm:encoded"),
    ("sha256-uppercase-hex", "busybox@sha256:" + "A" * 64, SHA256_HEX),
    ("sha256-short", "busybox@sha256:" + "a" * 63, SHA256_HEX),
    ("sha256-long", "busybox@sha256:" + "a" * 65, SHA256_HEX),
    ("sha256-not-hex", "busybox@sha256:" + "g" * 64, SHA256_HEX),
    ("sha512-too-short", "busybox@sha512:" + "a" * 64, "sha512 digests are 128 lowercase hex"),
    ("sha384-short", "busybox@sha384:" + "a" * 64, "sha384 digests are 96 lowercase hex"),
    ("blake3", f"busybox@{DBLAKE3}", 'unsupported digest algorithm "blake3"'),
    ("unregistered-b64u", f"ghcr.io/a/b@{DB64U}", 'unsupported digest algorithm "sha256+b64u"'),
    ("unregistered-multihash", f"x.io/a@{DMULTI}", "unsupported digest algorithm"),
    ("algorithm-uppercase", "busybox@SHA256:" + "a" * 64, "the algorithm must be lowercase"),
    ("algorithm-trailing-sep", "busybox@sha256+:abc", "the algorithm must be lowercase"),
    ("unregistered-bad-encoded", "busybox@foo:a.b", 'unsupported digest algorithm "foo"'),
]


@pytest.mark.parametrize(
    ("text", "reason"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID]
)
def test_parse_invalid(text: str, reason: str) -> None:
    with pytest.raises(InvalidReferenceError) as caught:
        parse_reference(text)
    assert reason in caught.value.reason
    assert caught.value.reference == text
    # One line, readable: no newline, no regular expression dumped on the user.
    assert "\n" not in caught.value.reason
    assert "[a-z" not in caught.value.reason
    assert len(caught.value.reason) < 200


def test_uppercase_reason_is_exact() -> None:
    with pytest.raises(InvalidReferenceError) as caught:
        parse_reference("ghcr.io/Owner/repo")
    assert caught.value.reason == UPPERCASE


def test_invalid_reference_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="invalid reference 'Busybox'"):
        parse_reference("Busybox")


def test_replace_changes_a_field() -> None:
    ref = parse_reference("ghcr.io/a/b:v1")
    pinned = dataclasses.replace(ref, digest=D256)
    assert str(pinned) == f"ghcr.io/a/b:v1@{D256}"
    assert pinned.identifier == D256
    assert str(ref) == "ghcr.io/a/b:v1"
    moved = dataclasses.replace(ref, registry="localhost:5000")
    assert moved.api_host == "localhost:5000"
    assert moved.port == 5000


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"tag": "-bad"}, 'invalid tag "-bad"'),
        ({"digest": "sha256:abc"}, SHA256_HEX),
        ({"repository": "A/b"}, UPPERCASE),
        ({"registry": "localhost:0"}, "invalid port"),
        ({"repository": "a/"}, "empty path component"),
        ({"tag": None}, "a reference needs a tag or a digest"),
    ],
    ids=["tag", "digest", "repository", "registry", "trailing-slash", "neither-tag-nor-digest"],
)
def test_replace_validates(changes: dict[str, str | None], reason: str) -> None:
    ref = parse_reference("ghcr.io/a/b:v1")
    with pytest.raises(InvalidReferenceError) as caught:
        dataclasses.replace(ref, **changes)  # type: ignore[arg-type]
    assert reason in caught.value.reason


def test_reference_is_frozen() -> None:
    ref = parse_reference("busybox")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.tag = "other"  # type: ignore[misc]


def test_reference_is_hashable() -> None:
    a = parse_reference("busybox")
    b = parse_reference("docker.io/library/busybox:latest")
    assert a == b
    assert hash(a) == hash(b)
    assert {a, b} == {a}
    assert {a: 1}[b] == 1
    assert a != parse_reference("busybox:1.36")


def test_identifier_prefers_digest() -> None:
    ref = parse_reference(f"busybox:1.36@{D256}")
    assert ref.tag == "1.36"
    assert ref.identifier == D256


def test_direct_construction_is_validated_not_normalised() -> None:
    ref = Reference("docker.io", "busybox", "latest", None)
    assert ref.repository == "busybox"
    assert ref.is_docker_hub
    assert ref.api_host == HUB_API
