"""The kubelet's accept/refuse decisions, case for case (issue #11).

The kubelet and containerd parse an image with ``ParseNormalizedNamed`` of
distribution/reference v0.6.0, whose digest is checked by go-digest v1.0.0. The vectors below
are the inputs of that module's own tests (normalize_test.go: TestValidateReferenceName,
TestValidateRemoteName, TestParseRepositoryInfo, TestNormalizedSplitHostname,
TestParseDockerRef; reference_test.go: TestReferenceParse), each with what
``ParseNormalizedNamed`` answers for it: the domain and path it splits, or an error. Those
answers were taken from the Go code itself (v0.6.0 with go-digest v1.0.0, built with
crypto/sha256 and crypto/sha512 linked, as they are in the kubelet through crypto/tls), not
worked out by hand.
"""

from __future__ import annotations

import pytest

from imagecheck.errors import InvalidReferenceError
from imagecheck.reference import parse_reference

F64 = "f" * 64
DIGEST = f"sha256:{F64}"
LONG_NAMESPACE = (
    "this_is_not_a_valid_namespace_because_its_lenth_is_greater_than_255_" * 4
).rstrip("_") + "/docker"

# (input, registry, repository, tag, digest): the domain and path ParseNormalizedNamed gives;
# imagecheck adds the tag "latest" when there is neither tag nor digest, as ParseDockerRef does.
ACCEPTED: list[tuple[str, str, str, str | None, str | None]] = [
    # normalize_test.go, TestValidateReferenceName (valid)
    ("docker/docker", "docker.io", "docker/docker", "latest", None),
    ("library/debian", "docker.io", "library/debian", "latest", None),
    ("debian", "docker.io", "library/debian", "latest", None),
    ("localhost/library/debian", "localhost", "library/debian", "latest", None),
    ("localhost/debian", "localhost", "debian", "latest", None),
    ("LOCALDOMAIN/library/debian", "LOCALDOMAIN", "library/debian", "latest", None),
    ("LOCALDOMAIN/debian", "LOCALDOMAIN", "debian", "latest", None),
    ("docker.io/docker/docker", "docker.io", "docker/docker", "latest", None),
    ("docker.io/library/debian", "docker.io", "library/debian", "latest", None),
    ("docker.io/debian", "docker.io", "library/debian", "latest", None),
    ("index.docker.io/docker/docker", "docker.io", "docker/docker", "latest", None),
    ("index.docker.io/library/debian", "docker.io", "library/debian", "latest", None),
    ("index.docker.io/debian", "docker.io", "library/debian", "latest", None),
    ("127.0.0.1:5000/docker/docker", "127.0.0.1:5000", "docker/docker", "latest", None),
    ("127.0.0.1:5000/library/debian", "127.0.0.1:5000", "library/debian", "latest", None),
    ("127.0.0.1:5000/debian", "127.0.0.1:5000", "debian", "latest", None),
    ("192.168.0.1", "docker.io", "library/192.168.0.1", "latest", None),
    ("192.168.0.1:80", "docker.io", "library/192.168.0.1", "80", None),
    ("192.168.0.1:8/debian", "192.168.0.1:8", "debian", "latest", None),
    ("192.168.0.2:25000/debian", "192.168.0.2:25000", "debian", "latest", None),
    ("thisisthesongthatneverendsitgoesonandonandonthisisthesongthatnev", "docker.io",
     "library/thisisthesongthatneverendsitgoesonandonandonthisisthesongthatnev", "latest", None),
    ("[fc00::1]:5000/docker", "[fc00::1]:5000", "docker", "latest", None),
    ("[fc00::1]:5000/docker/docker", "[fc00::1]:5000", "docker/docker", "latest", None),
    ("[fc00:1:2:3:4:5:6:7]:5000/library/debian", "[fc00:1:2:3:4:5:6:7]:5000", "library/debian",
     "latest", None),
    ("docker.io/1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a", "docker.io",
     "library/1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a", "latest", None),
    # An uppercase first component is a domain (splitDockerDomain).
    ("Docker/docker", "Docker", "docker", "latest", None),
    ("DOCKER/docker", "DOCKER", "docker", "latest", None),
    # normalize_test.go, TestValidateRemoteName (valid)
    ("docker-rules/docker", "docker.io", "docker-rules/docker", "latest", None),
    ("docker---rules/docker", "docker.io", "docker---rules/docker", "latest", None),
    ("doc/docker", "docker.io", "doc/docker", "latest", None),
    ("d/docker", "docker.io", "d/docker", "latest", None),
    ("jess/t", "docker.io", "jess/t", "latest", None),
    ("dock__er/docker", "docker.io", "dock__er/docker", "latest", None),
    # normalize_test.go, TestParseRepositoryInfo
    ("Foo/bar", "Foo", "bar", "latest", None),
    ("FOO/bar", "FOO", "bar", "latest", None),
    ("127.0.0.1:8000/private/moonbase", "127.0.0.1:8000", "private/moonbase", "latest", None),
    ("example.com:8000/privatebasee", "example.com:8000", "privatebasee", "latest", None),
    ("ubuntu-12.04-base", "docker.io", "library/ubuntu-12.04-base", "latest", None),
    ("library/foo/bar", "docker.io", "library/foo/bar", "latest", None),
    ("store/foo/bar", "docker.io", "store/foo/bar", "latest", None),
    # normalize_test.go, TestNormalizedSplitHostname
    ("test.com/foo", "test.com", "foo", "latest", None),
    ("test_com/foo", "docker.io", "test_com/foo", "latest", None),
    ("test.com:8080/foo", "test.com:8080", "foo", "latest", None),
    ("test-com:8080/foo", "test-com:8080", "foo", "latest", None),
    ("xn--n3h.com:18080/foo", "xn--n3h.com:18080", "foo", "latest", None),
    # reference_test.go, TestReferenceParse (as ParseNormalizedNamed reads them)
    ("test_com", "docker.io", "library/test_com", "latest", None),
    ("test.com:tag", "docker.io", "library/test.com", "tag", None),
    ("test.com:5000", "docker.io", "library/test.com", "5000", None),
    ("test.com/repo:tag", "test.com", "repo", "tag", None),
    ("test:5000/repo", "test:5000", "repo", "latest", None),
    (f"test:5000/repo:tag@{DIGEST}", "test:5000", "repo", "tag", DIGEST),
    # sha512 is refused in that test only because its binary does not link crypto/sha512;
    # the kubelet's does (crypto/tls), so it is accepted there, and here.
    ("validname@sha512:" + "f" * 128, "docker.io", "library/validname", None,
     "sha512:" + "f" * 128),
    # The FIXME in that test: "Uppercase" is a domain here, so this passes.
    ("Uppercase/lowercase:tag", "Uppercase", "lowercase", "tag", None),
    ("lowercase:Uppercase", "docker.io", "library/lowercase", "Uppercase", None),
    # 255 characters of path: 127 "a/" and an "a", on Docker Hub (no library/ prefix added).
    ("a/" * 127 + "a:tag-puts-this-over-max", "docker.io", "a/" * 127 + "a",
     "tag-puts-this-over-max", None),
    ("b.gcr.io/test.example.com/my-app:test.example.com", "b.gcr.io", "test.example.com/my-app",
     "test.example.com", None),
    (f"xn--7o8h.com/myimage:xn--7o8h.com@{DIGEST}", "xn--7o8h.com", "myimage", "xn--7o8h.com",
     DIGEST),
    ("foo_bar.com:8080", "docker.io", "library/foo_bar.com", "8080", None),
    ("foo/foo_bar.com:8080", "docker.io", "foo/foo_bar.com", "8080", None),
    ("192.168.1.1:5000/repo:5050", "192.168.1.1:5000", "repo", "5050", None),
    ("[2001:db8::1]/repo", "[2001:db8::1]", "repo", "latest", None),
    ("[2001:db8:1:2:3:4:5:6]/repo:tag", "[2001:db8:1:2:3:4:5:6]", "repo", "tag", None),
    (f"[2001:db8::1]:5000/repo:tag@{DIGEST}", "[2001:db8::1]:5000", "repo", "tag", DIGEST),
    ("[2001:db8::]:5000/repo", "[2001:db8::]:5000", "repo", "latest", None),
    # The 255-character limit is on the path only, not on domain + path.
    ("example.com/" + "a" * 255 + ":tag", "example.com", "a" * 255, "tag", None),
    # normalize_test.go, TestParseReferenceWithTagAndDigest and TestParseDockerRef
    ("busybox:latest@sha256:86e0e091d0da6bde2456dbb48306f3956bbeb2eae1b5b9a43045843f69fe4aaa",
     "docker.io", "library/busybox", "latest",
     "sha256:86e0e091d0da6bde2456dbb48306f3956bbeb2eae1b5b9a43045843f69fe4aaa"),
    ("gcr.io/library/busybox:latest@sha256:"
     "e6693c20186f837fc393390135d8a598a96a833917917789d63766cab6c59582",
     "gcr.io", "library/busybox", "latest",
     "sha256:e6693c20186f837fc393390135d8a598a96a833917917789d63766cab6c59582"),
]  # fmt: skip

# Inputs ParseNormalizedNamed refuses.
REFUSED: list[str] = [
    # normalize_test.go, TestValidateReferenceName (invalid)
    "https://github.com/docker/docker",
    "docker/Docker",
    "-docker",
    "-docker/docker",
    "-docker.io/docker/docker",
    "docker///docker",
    "docker.io/docker/Docker",
    "docker.io/docker///docker",
    "[fc00::1]",
    "[fc00::1]:5000",
    "fc00::1:5000/debian",
    "[fe80::1%eth0]:5000/debian",
    "[2001:db8:3:4::192.0.2.33]:5000/debian",
    "1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a",
    # normalize_test.go, TestValidateRemoteName (invalid)
    "docker-/docker",
    "-docker-/docker",
    "____/____",
    "_docker/_docker",
    "dock..er/docker",
    "dock_.er/docker",
    "dock-.er/docker",
    "docker/",
    LONG_NAMESPACE,
    # reference_test.go, TestReferenceParse (errors)
    "",
    ":justtag",
    f"@{DIGEST}",
    "repo@sha256:" + "f" * 34,
    f"validname@invaliddigest:{F64}",
    "Uppercase:tag",
    "test:5000/Uppercase/lowercase:tag",
    "domain/" + "a" * 256 + ":tag",
    "aa/asdf$$^/aa",
    "[2001:db8::1]",
    "[2001:db8::1]:5000",
    "[2001:db8::1]:tag",
    "[fe80::1%@invalidzone]:5000/repo",
    # normalize_test.go, TestInvalidReferenceComponents
    "-foo",
    # One more "a" than the accepted case above: 256 characters of path.
    "example.com/" + "a" * 256 + ":tag",
]


def _id(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:30]}...({len(text)})"


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest"),
    ACCEPTED,
    ids=[_id(case[0]) for case in ACCEPTED],
)
def test_accepted_as_the_kubelet_does(
    text: str, registry: str, repository: str, tag: str | None, digest: str | None
) -> None:
    ref = parse_reference(text)
    assert (ref.registry, ref.repository) == (registry, repository)
    assert (ref.tag, ref.digest) == (tag, digest)


@pytest.mark.parametrize("text", REFUSED, ids=[_id(text) for text in REFUSED])
def test_refused_as_the_kubelet_does(text: str) -> None:
    with pytest.raises(InvalidReferenceError):
        parse_reference(text)


# Found by comparing the two parsers on generated inputs, beyond the vectors above.
# (input, registry, repository, tag, digest)
ALSO_ACCEPTED: list[tuple[str, str, str, str | None, str | None]] = [
    # "docker.io" and "index.docker.io" are Docker Hub only when spelled exactly so: other
    # spellings are registries of their own, asked as written (containerd maps exactly
    # "docker.io" to registry-1.docker.io), and get no library/ prefix.
    ("DOCKER.IO/busybox", "DOCKER.IO", "busybox", "latest", None),
    ("Index.Docker.Io/team/app", "Index.Docker.Io", "team/app", "latest", None),
    ("registry-1.docker.io/busybox", "registry-1.docker.io", "busybox", "latest", None),
    # The Hub's limit counts library/: 8 + 247 = 255.
    ("a" * 247, "docker.io", "library/" + "a" * 247, "latest", None),
    # sha384 is known to go-digest v1.0.0.
    ("busybox@sha384:" + "b" * 96, "docker.io", "library/busybox", None, "sha384:" + "b" * 96),
    # Not a domain for distribution's grammar (an underscore), but a valid path as a whole: the
    # kubelet accepts it, and containerd asks "my_host.lan" as the host.
    ("my_host.lan/app:1", "my_host.lan", "app", "1", None),
    ("LOCALHOST/app", "LOCALHOST", "app", "latest", None),
    ("Localhost:5000/app", "Localhost:5000", "app", "latest", None),
]  # fmt: skip

ALSO_REFUSED: list[str] = [
    "a" * 248,  # library/ + 248 = 256
    "my_host.lan/" + "a" * 244,  # the path is "my_host.lan/aaa...": 256
    "my_host.lan:5000/app",  # with a port, neither a domain nor a path
    "busybox@blake3:" + "d" * 64,  # go-digest v1.0.0 knows no blake3
    "busybox@md5:" + "e" * 32,
    "busybox@sha384:" + "b" * 95,
    "busybox@sha256:" + "A" * 64,
    "MyOrg/App",  # the domain is MyOrg; the path App is uppercase
]


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest"),
    ALSO_ACCEPTED,
    ids=[_id(case[0]) for case in ALSO_ACCEPTED],
)
def test_also_accepted(
    text: str, registry: str, repository: str, tag: str | None, digest: str | None
) -> None:
    ref = parse_reference(text)
    assert (ref.registry, ref.repository) == (registry, repository)
    assert (ref.tag, ref.digest) == (tag, digest)


@pytest.mark.parametrize("text", ALSO_REFUSED, ids=[_id(text) for text in ALSO_REFUSED])
def test_also_refused(text: str) -> None:
    with pytest.raises(InvalidReferenceError):
        parse_reference(text)


# Deliberately stricter than the kubelet, which accepts these names; containerd then cannot
# connect (a port outside 1-65535, a bracketed host that is no IPv6 address), so the pull fails
# either way. imagecheck says so before sending anything, as an invalid reference (exit 2).
STRICTER = ["localhost:0/app", "localhost:70000/app", "[::1]:0/app", "[1:2:3]/app", "[:::]/app"]


@pytest.mark.parametrize("text", STRICTER)
def test_deliberately_stricter(text: str) -> None:
    with pytest.raises(InvalidReferenceError):
        parse_reference(text)
