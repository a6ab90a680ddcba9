"""Which registry hosts may fall back to plain HTTP without --insecure-registry: the ones
containerd's ``docker.IsLocalhost`` names (remotes/docker/resolver.go)."""

from __future__ import annotations

import pytest

from imagecheck.reference import parse_reference
from imagecheck.registry._tls import is_loopback

# (id, image reference, loopback?)
CASES = [
    ("localhost", "localhost/app", True),
    ("localhost-port", "localhost:5000/app", True),
    ("ipv4-loopback", "127.0.0.1:5000/app", True),
    ("ipv4-loopback-other", "127.23.34.52:5000/app", True),
    ("ipv6-loopback", "[::1]:5000/app", True),
    ("ipv6-mapped-loopback", "[::ffff:7f00:1]:5000/app", True),
    # containerd compares host == "localhost": any other spelling is a host like any other.
    ("mixed-case", "LocalHost:5000/app", False),
    ("uppercase", "LOCALHOST:5000/app", False),
    ("capitalised-no-port", "Localhost/app", False),
    ("localhost-subdomain", "localhost.localdomain:5000/app", False),
    ("private-address", "10.0.0.1:5000/app", False),
    ("unspecified", "0.0.0.0:5000/app", False),
    ("name", "registry.example.com/app", False),
]


@pytest.mark.parametrize(
    ("image", "loopback"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_is_loopback_as_containerd(image: str, loopback: bool) -> None:
    assert is_loopback(parse_reference(image).hostname) is loopback
