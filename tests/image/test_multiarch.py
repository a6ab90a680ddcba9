"""The multi-arch image (issue #16): linux/amd64 and linux/arm64 as one OCI index, built by
scripts/image-build-multiarch.sh without an emulated build.

The arm64 image runs here under containerd + runc as on an arm64 node, its programs under
qemu-aarch64 through binfmt_misc (tests/image/multiarch.py: read-only root, UID/GID 65532, no
capabilities), including real checks against a Distribution registry. The index is pushed to
that registry over the HTTP API and then found by imagecheck itself for each platform, and by
skopeo.

Needs root (buildah mounts, as the other image tests); not root: skip, except under CI=true.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.image.multiarch import (
    INDEX,
    PLATFORMS,
    Build,
    Registry,
    arm64,
    assert_runs_contained,
    build_layout,
    into_containerd,
)
from tests.image.sizes import MULTIARCH_SIZE_KEYS
from tests.support.images import push_blob, push_manifest, seed_samples
from tests.support.registry import LocalRegistry, find_registry_binary
from tests.support.runc import Runner
from tests.support.tools import system_tool

MAX_SIZE = 30_000_000
AARCH64 = 183  # ELF e_machine
REPO, TAG = "imagecheck", "dev"

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    return build_layout(tmp_path_factory.mktemp("multiarch") / "out")


@pytest.fixture(scope="session")
def ctr_multiarch(build: Build, runner: Runner) -> str:
    return into_containerd(runner, build, "localhost/imagecheck-multiarch:dev")


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory, build: Build) -> Iterator[Registry]:
    """A Distribution registry with the samples and the index pushed as imagecheck:dev."""
    if find_registry_binary() is None:
        system_tool("docker-registry")
    work = tmp_path_factory.mktemp("multiarch-registry")
    with LocalRegistry(work) as running, httpx.Client(timeout=60) as client:
        samples = seed_samples(client, running.url)
        push_layout(client, running.url, build)
        yield Registry(running.host, running.url, samples)


def push_layout(client: httpx.Client, url: str, build: Build) -> None:
    """Children first (blobs, then each manifest by digest), then the index under its tag."""
    index = build.index()
    for child in index["manifests"]:
        manifest = json.loads(build.blob(child["digest"]))
        for blob in [manifest["config"], *manifest["layers"]]:
            push_blob(client, url, REPO, build.blob(blob["digest"]))
        body = build.blob(child["digest"])
        push_manifest(client, url, REPO, child["digest"], body, child["mediaType"])
    body = json.dumps(index, separators=(",", ":"), sort_keys=True).encode()
    push_manifest(client, url, REPO, TAG, body, index["mediaType"])


def host_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "imagecheck", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# -- the arm64 root -----------------------------------------------------------------------


def _machine(path: Path) -> int | None:
    with path.open("rb") as file:
        header = file.read(20)
    return int.from_bytes(header[18:20], "little") if header[:4] == b"\x7fELF" else None


def test_every_arm64_elf_is_aarch64(build: Build) -> None:
    files = [p for p in build.arm64_root.rglob("*") if p.is_file() and not p.is_symlink()]
    machines = {p.relative_to(build.arm64_root).as_posix(): _machine(p) for p in files}
    elves = {path: m for path, m in machines.items() if m is not None}
    assert "usr/bin/python3.11" in elves
    assert set(elves.values()) == {AARCH64}


def test_arm64_root_records_arm64_packages(build: Build) -> None:
    status = build.arm64_root / "var/lib/dpkg/status.d"
    arches = {
        line.split(": ", 1)[1]
        for record in status.iterdir()
        for line in record.read_text().splitlines()
        if line.startswith("Architecture: ")
    }
    assert arches == {"arm64", "all"}


def test_arm64_runs_as_65532_on_a_read_only_root(ctr_multiarch: str, runner: Runner) -> None:
    assert_runs_contained(runner, ctr_multiarch)


def test_arm64_version_under_qemu(ctr_multiarch: str, runner: Runner) -> None:
    done = arm64(runner, ctr_multiarch, "--version")
    assert done.code == 0, done.stderr
    assert done.stdout == host_cli("--version").stdout


def test_arm64_checks_a_real_registry(
    ctr_multiarch: str, runner: Runner, registry: Registry
) -> None:
    found = registry.ref("sample/app:1.0.0")
    missing = registry.ref("sample/app:9.9.9")
    done = arm64(runner, ctr_multiarch, "check", "-o", "json", found, missing)
    assert done.code == 1, done.output
    results = {r["reference"]: r for r in json.loads(done.stdout)}
    assert results[found]["status"] == "found"
    assert results[found]["digest"] == registry.samples["sample/app:1.0.0"].digest
    assert results[missing]["status"] == "missing"


# -- the index in the registry ------------------------------------------------------------


def test_skopeo_shows_the_index(build: Build, registry: Registry) -> None:
    skopeo = system_tool("skopeo")
    ref = f"docker://{registry.ref(f'{REPO}:{TAG}')}"
    done = subprocess.run(
        [skopeo, "inspect", "--raw", "--tls-verify=false", ref],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    raw = json.loads(done.stdout)
    assert raw["mediaType"] == INDEX
    platforms = {f"{m['platform']['os']}/{m['platform']['architecture']}" for m in raw["manifests"]}
    assert platforms == set(PLATFORMS)


def _index_digest(build: Build) -> str:
    digest: str = json.loads((build.layout / "index.json").read_text())["manifests"][0]["digest"]
    return digest


@pytest.mark.parametrize("platform", PLATFORMS)
def test_imagecheck_finds_each_platform(build: Build, registry: Registry, platform: str) -> None:
    ref = registry.ref(f"{REPO}:{TAG}")
    done = host_cli("check", "-o", "json", "--platform", platform, ref)
    assert done.returncode == 0, done.stdout + done.stderr
    [result] = json.loads(done.stdout)
    assert result["status"] == "found"
    # The result names the index (the tag's manifest) and the platform it holds.
    assert result["digest"] == _index_digest(build)
    assert result["media_type"] == INDEX
    assert platform in result["message"]


def test_arm64_image_finds_itself(ctr_multiarch: str, runner: Runner, registry: Registry) -> None:
    ref = registry.ref(f"{REPO}:{TAG}")
    done = arm64(runner, ctr_multiarch, "check", "--platform", "linux/arm64", ref)
    assert done.code == 0, done.output


def test_platform_absent_from_the_index_is_not_found(registry: Registry) -> None:
    done = host_cli("check", "--platform", "linux/s390x", registry.ref(f"{REPO}:{TAG}"))
    assert done.returncode == 1, done.stdout + done.stderr


# -- size ---------------------------------------------------------------------------------


@pytest.mark.parametrize("platform", PLATFORMS)
def test_size_is_at_most_30_mb(build: Build, platform: str, record_property: Any) -> None:
    size = build.sizes[platform]
    raw_key, gz_key = MULTIARCH_SIZE_KEYS[platform]
    record_property(raw_key, size["uncompressed"])
    record_property(gz_key, size["compressed"])
    assert size["uncompressed"] <= MAX_SIZE, f"{size['uncompressed'] / 1e6:.1f} MB"
    assert size["compressed"] < size["uncompressed"]
