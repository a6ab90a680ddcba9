"""Platform parsing and matching, containerd-style normalization."""

from __future__ import annotations

import json

import pytest

from imagecheck.errors import ProtocolError, UsageError
from imagecheck.registry import Platform, parse_platform
from imagecheck.registry._platform import (
    config_digest,
    config_platform,
    index_platforms,
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


# A registry's document of another shape than the spec's: a ProtocolError (exit 4), never a
# TypeError that ends the run as "missing" (issue #10).
BAD_INDEXES: list[tuple[str, object, str]] = [
    ("manifests-a-number", {"manifests": 5}, "'manifests' is not a list"),
    ("manifests-an-object", {"manifests": {"a": 1}}, "'manifests' is not a list"),
    ("entry-a-number", {"manifests": [5]}, "entry of 'manifests' is not an object"),
    ("platform-a-string", {"manifests": [{"platform": "linux/amd64"}]}, "'platform' is not"),
    ("os-a-list", {"manifests": [{"platform": {"os": ["linux"]}}]}, "'os' is not a string"),
    ("variant-a-number", {"manifests": [{"platform": {"os": "linux", "variant": 7}}]},
     "'variant' is not a string"),
    ("not-an-object", [1, 2], "index is not a JSON object"),
    ("60000-deep", "[" * 60000 + "]" * 60000, "index is nested too deeply"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("document", "words"), [c[1:] for c in BAD_INDEXES], ids=[c[0] for c in BAD_INDEXES]
)
def test_index_of_another_shape_is_a_protocol_error(document: object, words: str) -> None:
    body = document.encode() if isinstance(document, str) else json.dumps(document).encode()
    with pytest.raises(ProtocolError, match=words):
        index_platforms(body)


def test_index_without_manifests_or_platforms_offers_none() -> None:
    assert index_platforms(b"{}") == []
    assert index_platforms(b'{"manifests": null}') == []
    assert index_platforms(b'{"manifests": [{"digest": "sha256:x", "platform": null}]}') == []


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"os": 5, "architecture": "amd64"}', "'os' is not a string"),
        (b'{"os": "linux", "architecture": {"a": 1}}', "'architecture' is not a string"),
        (b'{"os":' * 60000, "image config is nested too deeply"),
        (b'{"os": "linux", "size": ' + b"9" * 5000 + b"}", "image config is not valid JSON"),
    ],
    ids=["os-a-number", "architecture-an-object", "60000-deep", "5000-digit-number"],
)
def test_config_of_another_shape_is_a_protocol_error(body: bytes, words: str) -> None:
    with pytest.raises(ProtocolError, match=words):
        config_platform(body)


def test_config_platform_fields_may_be_absent() -> None:
    assert config_platform(b'{"os": "linux", "architecture": "arm64"}') == Platform(
        "linux", "arm64"
    )
    assert config_platform(b"{}") == Platform("", "")


def test_schema1_architecture_must_be_a_string() -> None:
    with pytest.raises(ProtocolError, match="'architecture' is not a string"):
        schema1_platform(b'{"schemaVersion": 1, "architecture": 64}')
