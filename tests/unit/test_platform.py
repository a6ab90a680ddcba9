"""Platform parsing and matching, containerd-style normalization."""

from __future__ import annotations

import json

import pytest

from imagecheck.errors import ProtocolError, UsageError
from imagecheck.platform import (
    Platform,
    config_digest,
    index_platforms,
    parse_platform,
    schema1_platform,
)

MATCHES = [
    ("linux/amd64", Platform("linux", "amd64"), True),
    ("linux/amd64", Platform("linux", "x86_64"), True),
    ("linux/arm64", Platform("linux", "arm64", "v8"), True),
    ("linux/arm64/v8", Platform("linux", "arm64"), True),
    ("linux/aarch64", Platform("linux", "arm64"), True),
    ("linux/arm", Platform("linux", "arm", "v7"), True),
    ("linux/arm/v7", Platform("linux", "arm", "v6"), False),
    ("linux/armhf", Platform("linux", "arm", "v7"), True),
    ("linux/amd64", Platform("windows", "amd64"), False),
    ("linux/arm64", Platform("linux", "amd64"), False),
    ("LINUX/AMD64", Platform("linux", "amd64"), True),
]


@pytest.mark.parametrize(
    ("want", "offered", "ok"), MATCHES, ids=[f"{w}~{o}" for w, o, _ in MATCHES]
)
def test_satisfied_by(want: str, offered: Platform, ok: bool) -> None:
    assert parse_platform(want).satisfied_by(offered) is ok


@pytest.mark.parametrize("text", ["linux", "linux/", "/amd64", "a/b/c/d", ""])
def test_bad_platform(text: str) -> None:
    with pytest.raises(UsageError, match="expected OS/ARCH"):
        parse_platform(text)


def test_auto_is_a_normalized_linux_platform() -> None:
    auto = parse_platform("auto")
    assert auto.os == "linux"
    assert auto.architecture not in ("x86_64", "aarch64")


def test_index_platforms_skip_attestations() -> None:
    body = json.dumps(
        {
            "manifests": [
                {"platform": {"os": "linux", "architecture": "amd64"}},
                {"platform": {"os": "unknown", "architecture": "unknown"}},
                {"platform": {"os": "linux", "architecture": "arm", "variant": "v7"}},
                {"digest": "sha256:x"},
            ]
        }
    ).encode()
    assert [str(p) for p in index_platforms(body)] == ["linux/amd64", "linux/arm/v7"]


def test_schema1_and_config() -> None:
    assert str(schema1_platform(b'{"schemaVersion": 1, "architecture": "arm64"}')) == "linux/arm64"
    assert schema1_platform(b'{"schemaVersion": 2}') is None
    assert config_digest(b'{"config": {"digest": "sha256:abc"}}') == "sha256:abc"
    with pytest.raises(ProtocolError):
        config_digest(b'{"layers": []}')
    with pytest.raises(ProtocolError):
        index_platforms(b"<html>")
