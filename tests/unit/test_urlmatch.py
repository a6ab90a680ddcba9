"""The kubelet's image matching, proven on the kubelet's own test tables.

Every case below is copied, inputs and expected result, from kubernetes/kubernetes
``pkg/credentialprovider/keyring_test.go`` at commit
6fbbec6ac5711b8c65a2420394b2bb2a2ccf5bff (``TestUrlsMatch``, ``TestDockerKeyringForGlob``,
``TestKeyringMiss``, ``TestIsDefaultRegistryMatch``, ``TestDockerKeyringLookup``,
``TestIssue3797``), and from ``pkg/credentialprovider/plugin/plugin_test.go`` at commit
2b02db1be88b09193d96585c4b6dd796d6b2e06c (``Test_Provide``), against the rules of
``keyring.go`` at commit 4f3d0e3bde114269650781020d9b05cbd428d4ba. The Go tests append
``/foo/bar`` to the image in the keyring lookups; so do these.
"""

from __future__ import annotations

import pytest

from imagecheck.authn._urlmatch import (
    BadURL,
    is_default_registry_match,
    keyring_lookup,
    parse_schemeless_url,
    urls_match,
)

# TestUrlsMatch: (globUrl, targetUrl, matchExpected)
URLS_MATCH = [
    ("*.kubernetes.io", "prefix.kubernetes.io", True),
    ("prefix.*.io", "prefix.kubernetes.io", True),
    ("prefix.kubernetes.*", "prefix.kubernetes.io", True),
    ("*-good.kubernetes.io", "prefix-good.kubernetes.io", True),
    ("*.kubernetes.io/blah", "prefix.kubernetes.io/blah", True),
    ("prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", True),
    ("*.kubernetes.io:1111/blah", "prefix.kubernetes.io:1111/blah", True),
    ("prefix.*.io:1111/foo", "prefix.kubernetes.io:1111/foo/bar", True),
    ("*.kubernetes.io", "kubernetes.io", False),
    ("*.*.kubernetes.io", "prefix.kubernetes.io", False),
    ("*.*.kubernetes.io", "kubernetes.io", False),
    ("kubernetes.io", "kubernetes.com", False),
    ("k*.io", "quay.io", False),
    ("*.kubernetes.io:1234/blah", "prefix.kubernetes.io:1111/blah", False),
    ("prefix.*.io/foo", "prefix.kubernetes.io:1111/foo/bar", False),
]

# TestDockerKeyringForGlob: (globUrl, targetUrl); each must be found for targetUrl + "/foo/bar"
KEYRING_HITS = [
    ("https://hello.kubernetes.io", "hello.kubernetes.io"),
    ("https://*.docker.io", "prefix.docker.io"),
    ("https://prefix.*.io", "prefix.docker.io"),
    ("https://prefix.docker.*", "prefix.docker.io"),
    ("https://*.docker.io/path", "prefix.docker.io/path"),
    ("https://prefix.*.io/path", "prefix.docker.io/path/subpath"),
    ("https://prefix.docker.*/path", "prefix.docker.io/path"),
    ("https://*.docker.io:8888", "prefix.docker.io:8888"),
    ("https://prefix.*.io:8888", "prefix.docker.io:8888"),
    ("https://prefix.docker.*:8888", "prefix.docker.io:8888"),
    ("https://*.docker.io/path:1111", "prefix.docker.io/path:1111"),
    ("https://*.docker.io/v1/", "prefix.docker.io/path:1111"),
    ("https://*.docker.io/v2/", "prefix.docker.io/path:1111"),
    ("https://prefix.docker.*/path:1111", "prefix.docker.io/path:1111"),
    ("prefix.docker.io:1111", "prefix.docker.io:1111/path"),
    ("*.docker.io:1111", "prefix.docker.io:1111/path"),
]

# TestKeyringMiss: (globUrl, lookupUrl); none may be found for lookupUrl + "/foo/bar"
KEYRING_MISSES = [
    ("https://hello.kubernetes.io", "world.mesos.org/foo/bar"),
    ("https://*.docker.com", "prefix.docker.io"),
    ("https://suffix.*.io", "prefix.docker.io"),
    ("https://prefix.docker.c*", "prefix.docker.io"),
    ("https://prefix.*.io/path:1111", "prefix.docker.io/path/subpath:1111"),
    ("suffix.*.io", "prefix.docker.io"),
]

# TestIsDefaultRegistryMatch
DEFAULT_REGISTRY = [
    ("foo/bar", True),
    ("docker.io/foo/bar", True),
    ("index.docker.io/foo/bar", True),
    ("foo", True),
    ("", False),
    ("registry.tld/foo/bar", False),
    ("registry:5000/foo/bar", False),
    ("myhostdocker.io/foo/bar", False),
]

# TestDockerKeyringLookup: keys "bar.example.com/pong" -> grace, "bar.example.com" -> ada
LOOKUP_KEYS = [("bar.example.com/pong", "grace"), ("bar.example.com", "ada")]
LOOKUPS = [
    ("bar.example.com", ["ada"]),
    ("bar.example.com/pong", ["grace", "ada"]),
    ("bar.example.com/ping", ["ada"]),
    ("bar.example.com/pongz", ["grace", "ada"]),
    ("bar.example.com/pong/pang", ["grace", "ada"]),
    ("example.com", []),
    ("foo.example.com", []),
]

# TestIssue3797: the key "https://quay.io/v1/" -> rex
QUAY_V1 = [("quay.io", ["rex"]), ("quay.io/foo", ["rex"]), ("quay.io/foo/bar", ["rex"])]


# plugin_test.go Test_Provide: (matchImages entry, the answer's auth key, image); the provider
# is run for the image, and its one auth entry is what the image gets.
PROVIDE = [
    ("test.registry.io", "test.registry.io", "test.registry.io/foo/bar"),
    ("test.registry.io/foo/bar", "test.registry.io/foo/bar", "test.registry.io/foo/bar"),
    ("test.registry.io", "test.registry.io", "test.registry.io"),
    ("*.registry.io:8080", "*.registry.io:8080", "test.registry.io:8080/foo"),
    ("*.*.registry.io", "*.*.registry.io", "foo.bar.registry.io/foo/bar"),
    ("*.registry.io", "*.registry.io", "test.registry.io"),
]


@pytest.mark.parametrize(("match", "key", "image"), PROVIDE)
def test_provide(match: str, key: str, image: str) -> None:
    assert urls_match(match, image)
    assert keyring_lookup([(key, "user")], image) == ["user"]


@pytest.mark.parametrize(("glob", "target", "expected"), URLS_MATCH, ids=str)
def test_urls_match(glob: str, target: str, expected: bool) -> None:
    assert urls_match(glob, target) is expected


@pytest.mark.parametrize(("glob", "target"), KEYRING_HITS)
def test_keyring_finds_a_glob_key(glob: str, target: str) -> None:
    assert keyring_lookup([(glob, "foo:bar")], target + "/foo/bar") == ["foo:bar"]


@pytest.mark.parametrize(("glob", "lookup"), KEYRING_MISSES)
def test_keyring_misses(glob: str, lookup: str) -> None:
    assert keyring_lookup([(glob, "foo:bar")], lookup + "/foo/bar") == []


@pytest.mark.parametrize(("image", "expected"), DEFAULT_REGISTRY)
def test_is_default_registry_match(image: str, expected: bool) -> None:
    assert is_default_registry_match(image) is expected


@pytest.mark.parametrize(("image", "expected"), LOOKUPS)
def test_keyring_lookup_most_specific_first(image: str, expected: list[str]) -> None:
    assert keyring_lookup(LOOKUP_KEYS, image) == expected


@pytest.mark.parametrize(("image", "expected"), QUAY_V1)
def test_keyring_v1_key_is_the_bare_host(image: str, expected: list[str]) -> None:
    assert keyring_lookup([("https://quay.io/v1/", "rex")], image) == expected


# TestKeyringMissWithDockerHubCredentials, TestKeyringHitWithUnqualifiedDockerHub,
# TestKeyringHitWithUnqualifiedLibraryDockerHub, TestKeyringHitWithQualifiedDockerHub:
# the key "https://index.docker.io/v1/".
@pytest.mark.parametrize(
    ("image", "found"),
    [
        ("world.mesos.org/foo/bar", False),
        ("google/docker-registry", True),
        ("jenkins", True),
        ("index.docker.io/google/docker-registry", True),
    ],
)
def test_docker_hub_fallback(image: str, found: bool) -> None:
    assert keyring_lookup([("https://index.docker.io/v1/", "foo")], image) == (
        ["foo"] if found else []
    )


# Beyond the Go tables: the EKS pattern, and what url.Parse and filepath.Match refuse.
@pytest.mark.parametrize(
    ("glob", "target", "expected"),
    [
        ("*.dkr.ecr.*.amazonaws.com", "123.dkr.ecr.us-east-1.amazonaws.com/app", True),
        ("*.dkr.ecr.*.amazonaws.com", "a.123.dkr.ecr.us-east-1.amazonaws.com/app", False),
        ("*.dkr.ecr.*.amazonaws.com", "123.dkr.ecr.us-east-1.amazonaws.com:443/app", False),
        ("registry.example.com/team", "registry.example.com/teams/app", True),
        ("reg[0-9].example.com", "reg7.example.com/app", True),
        ("reg[^0-9].example.com", "reg7.example.com/app", False),
        ("reg[.example.com", "reg[.example.com/app", False),
        ("host:port", "host:port/app", False),
    ],
)
def test_beyond_the_tables(glob: str, target: str, expected: bool) -> None:
    assert urls_match(glob, target) is expected


@pytest.mark.parametrize("text", ["host:abc", "host/%zz", "bad host", "a\x00b"])
def test_unparseable(text: str) -> None:
    with pytest.raises(BadURL):
        parse_schemeless_url(text)
