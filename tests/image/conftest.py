"""The image tests' shared fixtures (the containerd the images run in, the registry they pull
from, the Kubernetes API stand-in the cluster image talks to), and each image's size reported
at the end of the run, whether or not its size test failed."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.image.images import KUBE_DIR, Registry
from tests.image.sizes import GZIP_KEYS, SIZE_KEYS
from tests.support.containerd import ContainerdDaemon
from tests.support.images import seed_samples
from tests.support.kubeapi import KubeAPI
from tests.support.pki import make_tls_material
from tests.support.registry import LocalRegistry, find_registry_binary
from tests.support.runc import Runner
from tests.support.tools import skip_or_fail, system_tool

# The same for the webhook and cluster images' layouts (scripts/image-build-multiarch.sh
# --webhook, --cluster).


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    sizes: dict[str, int] = {}
    for report in terminalreporter.getreports("passed") + terminalreporter.getreports("failed"):
        for key, value in report.user_properties:
            if key in SIZE_KEYS or key in GZIP_KEYS:
                sizes.setdefault(key, int(value))
    compressed = {GZIP_KEYS[key]: value for key, value in sizes.items() if key in GZIP_KEYS}
    for key, value in sizes.items():
        if key not in SIZE_KEYS:
            continue
        terminalreporter.write_sep("-", SIZE_KEYS[key])
        terminalreporter.write_line(f"uncompressed size: {value} bytes ({value / 1e6:.1f} MB)")
        if key in compressed:
            gz = compressed[key]
            terminalreporter.write_line(f"compressed size: {gz} bytes ({gz / 1e6:.1f} MB)")


@pytest.fixture(scope="session")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    """containerd + runc (scripts/system-deps.sh installs them), one namespace for the images."""
    if os.geteuid() != 0:
        skip_or_fail("running images under runc here needs root")
    daemon, ctr = system_tool("containerd"), system_tool("ctr")
    system_tool("runc")
    work = tmp_path_factory.mktemp("containerd")
    with ContainerdDaemon(work, containerd=daemon, ctr=ctr) as running:
        yield Runner(running, "images", work / "runs")


@pytest.fixture(scope="session")
def storage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One registry storage, seeded with the samples through a no-auth registry."""
    if find_registry_binary() is None:
        system_tool("docker-registry")
    work = tmp_path_factory.mktemp("image-registry")
    with LocalRegistry(work / "seed", storage=work / "storage") as seeder, httpx.Client() as c:
        seed_samples(c, seeder.url)
    return work / "storage"


@pytest.fixture(scope="session")
def registry(storage: Path) -> Iterator[Registry]:
    with LocalRegistry(storage.parent / "plain", storage=storage) as running:
        yield Registry(running.host)


@pytest.fixture(scope="session")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KubeAPI, Path]]:
    """The stand-in, and a directory holding a kubeconfig for the container: the same one,
    naming the CA where the container sees it (:data:`KUBE_DIR`)."""
    directory = tmp_path_factory.mktemp("kubeapi")
    tls = make_tls_material(directory / "pki")
    api = KubeAPI.start(tls.server_context(), tls.ca_file, directory)
    mounted = directory / "mounted"
    mounted.mkdir()
    config = json.loads(api.kubeconfig.read_text())  # written as JSON (JSON is YAML)
    config["clusters"][0]["cluster"]["certificate-authority"] = f"{KUBE_DIR}/ca.pem"
    (mounted / "config").write_text(json.dumps(config))
    (mounted / "ca.pem").write_bytes(tls.ca_file.read_bytes())
    for path in (mounted, *mounted.iterdir()):  # read by 65532 in the container
        path.chmod(0o755 if path.is_dir() else 0o644)
    yield api, mounted
    api.stop()


@pytest.fixture
def kube_api(standin: tuple[KubeAPI, Path]) -> KubeAPI:
    """The stand-in, emptied for this test (as tests/integration's ``kube_api``)."""
    standin[0].reset()
    return standin[0]


@pytest.fixture
def kube_dir(standin: tuple[KubeAPI, Path]) -> Path:
    """What the container mounts at :data:`KUBE_DIR`: its kubeconfig and the CA."""
    return standin[1]
