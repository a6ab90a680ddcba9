"""--deep against the real registry: after the manifest, the platform's manifest and its config
and layer blobs. Blobs are deleted through the registry's own API (``storage.delete``), in a
registry of the module's own so the shared samples stay whole."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from imagecheck.registry import Platform
from tests.support.clirun import run_cli, tls_args
from tests.support.endpoint import RegistryEndpoint
from tests.support.images import push_image, push_index
from tests.support.registry import LocalRegistry

AMD64, ARM64 = Platform("linux", "amd64"), Platform("linux", "arm64")
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@dataclass(frozen=True)
class Broken:
    """The module's registry and the digests of what was deleted from it."""

    registry: LocalRegistry
    deleted: dict[str, str]

    def ref(self, name: str) -> str:
        return f"{self.registry.host}/{name}"


def _manifest(client: httpx.Client, base: str, repo: str, ident: str) -> dict[str, object]:
    answer = client.get(f"{base}/v2/{repo}/manifests/{ident}", headers={"Accept": OCI_MANIFEST})
    answer.raise_for_status()
    body: dict[str, object] = answer.json()
    return body


def _delete_blob(client: httpx.Client, base: str, repo: str, digest: str) -> str:
    deleted = client.delete(f"{base}/v2/{repo}/blobs/{digest}")
    assert deleted.status_code == 202, deleted.text
    return digest


def _descriptor(manifest: dict[str, object], field: str) -> str:
    value = manifest[field]
    entry = value[0] if isinstance(value, list) else value
    assert isinstance(entry, dict)
    digest = entry["digest"]
    assert isinstance(digest, str)
    return digest


@pytest.fixture(scope="module")
def broken(registry_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broken]:
    with LocalRegistry(tmp_path_factory.mktemp("deep"), binary=registry_binary) as registry:
        base, deleted = registry.url, {}
        with httpx.Client(timeout=10.0, trust_env=False) as client:
            push_image(client, base, "deep/whole", "1")
            for repo, field in (("deep/no-layer", "layers"), ("deep/no-config", "config")):
                push_image(client, base, repo, "1")
                digest = _descriptor(_manifest(client, base, repo, "1"), field)
                deleted[repo] = _delete_blob(client, base, repo, digest)
            # An index whose arm64 image lost its config; its amd64 image is whole (the two
            # share their layer: push_index seeds both alike).
            index = push_index(client, base, "deep/multi", "1", [AMD64, ARM64])
            arm64 = next(c for c in index.children if c.platform == ARM64)
            config = _descriptor(_manifest(client, base, "deep/multi", arm64.digest), "config")
            deleted["deep/multi"] = _delete_blob(client, base, "deep/multi", config)
        yield Broken(registry, deleted)


DEEP_CASES = [
    ("whole", "deep/whole:1", (), 0, "its config and 1 layer(s) present"),
    ("layer-gone", "deep/no-layer:1", (), 1, "layer {deleted} of linux/"),
    ("config-gone", "deep/no-config:1", (), 1, "config {deleted} of linux/"),
    ("index-whole-platform", "deep/multi:1", ("--platform", "linux/amd64"), 0, "(linux/amd64)"),
    (
        "index-broken-platform",
        "deep/multi:1",
        ("--platform", "linux/arm64"),
        1,
        "config {deleted} of linux/arm64",
    ),
]


@pytest.mark.parametrize(
    ("name", "args", "code", "message"),
    [case[1:] for case in DEEP_CASES],
    ids=[case[0] for case in DEEP_CASES],
)
def test_deep(
    broken: Broken, tmp_path: Path, name: str, args: tuple[str, ...], code: int, message: str
) -> None:
    run = run_cli(["check", "-o", "json", "--deep", *args, broken.ref(name)], tmp_path)
    assert run.code == code, run.stdout + run.stderr
    [result] = run.json()
    repo = name.partition(":")[0]
    assert message.format(deleted=broken.deleted.get(repo, "")) in result["message"]


def test_without_deep_a_broken_image_is_found(broken: Broken, tmp_path: Path) -> None:
    run = run_cli(["check", broken.ref("deep/no-layer:1")], tmp_path)
    assert run.code == 0, run.stdout + run.stderr


def test_deep_costs_a_get_and_a_head_per_blob(broken: Broken, tmp_path: Path) -> None:
    before = broken.registry.request_count()
    run = run_cli(["check", "--deep", broken.ref("deep/whole:1")], tmp_path)
    assert run.code == 0, run.stdout + run.stderr
    # ping, GET of the manifest, HEAD of the config and of the one layer
    assert broken.registry.request_count() - before == 4


def test_deep_through_token_auth(registry_token: RegistryEndpoint, tmp_path: Path) -> None:
    """The blob requests go through the same challenge and token as the manifest's."""
    args = ["check", "-o", "json", *tls_args(registry_token), "--deep", "--platform", "auto"]
    run = run_cli([*args, registry_token.ref("sample/app:multi")], tmp_path)
    assert run.code == 0, run.stdout + run.stderr
    [result] = run.json()
    assert "layer(s) present" in result["message"]
