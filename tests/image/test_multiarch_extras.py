"""The multi-arch webhook and cluster images (issue #16): ``scripts/image-build-multiarch.sh
--webhook`` and ``--cluster``, each linux/amd64 + linux/arm64 as one OCI index, as the release
publishes them (ghcr.io/imagecheck/imagecheck-webhook, -cluster).

Their arm64 images run here under containerd + runc as on an arm64 node
(tests/image/multiarch.py: read-only, 65532:65532, no capabilities, under qemu-aarch64 through
binfmt_misc): every extension module of the dependencies imported (a dependency without an
aarch64 wheel fails here, not on a node), ``serve`` answering over TLS and reviewing against a
real registry, ``audit`` reading the Kubernetes API stand-in over HTTPS. Sizes as for the amd64
images: webhook 45 MB, cluster 40 MB uncompressed, for each platform.

Needs root (buildah mounts, namespaces); not root: skip, except under CI=true.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.image.images import KUBE_DIR, review
from tests.image.multiarch import (
    PLATFORMS,
    Build,
    Registry,
    arm64,
    arm64_container,
    assert_runs_contained,
    build_layout,
    into_containerd,
)
from tests.image.sizes import CLUSTER_MAX_SIZE, MULTIARCH_EXTRA_SIZE_KEYS, WEBHOOK_MAX_SIZE
from tests.support.images import seed_samples
from tests.support.kubeapi import KubeAPI
from tests.support.kubeapi import objects as k8s
from tests.support.net import free_port
from tests.support.pki import make_tls_material
from tests.support.registry import LocalRegistry, find_registry_binary
from tests.support.runc import Runner, Running
from tests.support.tools import system_tool

MAX_SIZE = {"webhook": WEBHOOK_MAX_SIZE, "cluster": CLUSTER_MAX_SIZE}
# The packages whose extension modules each image must carry for aarch64 (the amd64 image's
# set, docker/README.md): without one, a dependency would fall back to pure Python or fail.
EXTENSIONS = {
    "webhook": {"aiohttp", "frozenlist", "httptools", "multidict", "propcache", "uvloop", "yarl"},
    "cluster": {"aiohttp", "frozenlist", "httptools", "msgspec", "multidict", "propcache", "yarl"},
}
APP = Path("usr/lib/imagecheck")
START_TIMEOUT = 180.0  # serve under emulation: imports take a while
STOP_TIMEOUT = 60.0

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="session")
def webhook_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    return build_layout(tmp_path_factory.mktemp("multiarch-webhook") / "out", "--webhook")


@pytest.fixture(scope="session")
def cluster_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    return build_layout(tmp_path_factory.mktemp("multiarch-cluster") / "out", "--cluster")


@pytest.fixture(scope="session")
def ctr_webhook(webhook_build: Build, runner: Runner) -> str:
    return into_containerd(runner, webhook_build, "localhost/imagecheck-webhook-multiarch:dev")


@pytest.fixture(scope="session")
def ctr_cluster(cluster_build: Build, runner: Runner) -> str:
    return into_containerd(runner, cluster_build, "localhost/imagecheck-cluster-multiarch:dev")


@pytest.fixture(params=["webhook", "cluster"])
def variant(request: pytest.FixtureRequest) -> tuple[str, Build]:
    return request.param, request.getfixturevalue(f"{request.param}_build")


@pytest.fixture(params=["webhook", "cluster"])
def ctr_variant(request: pytest.FixtureRequest) -> tuple[str, Build, str]:
    """A variant's name, build and image in containerd."""
    name = request.param
    return name, request.getfixturevalue(f"{name}_build"), request.getfixturevalue(f"ctr_{name}")


@pytest.fixture(scope="session")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    if find_registry_binary() is None:
        system_tool("docker-registry")
    with (
        LocalRegistry(tmp_path_factory.mktemp("multiarch-extras-registry")) as running,
        httpx.Client(timeout=60) as client,
    ):
        yield Registry(running.host, running.url, seed_samples(client, running.url))


def extension_modules(root: Path) -> list[str]:
    """The dependencies' extension modules in an image root, by module name."""
    return sorted(
        ".".join([*p.relative_to(root / APP).parts[:-1], p.name.split(".", 1)[0]])
        for p in (root / APP).rglob("*.so")
    )


# -- both images --------------------------------------------------------------------------


def test_index_holds_both_platforms(variant: tuple[str, Build]) -> None:
    _, build = variant
    assert build.platforms() == set(PLATFORMS)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_size(variant: tuple[str, Build], platform: str, record_property: Any) -> None:
    name, build = variant
    size = build.sizes[platform]
    raw_key, gz_key = MULTIARCH_EXTRA_SIZE_KEYS[name][platform]
    record_property(raw_key, size["uncompressed"])
    record_property(gz_key, size["compressed"])
    assert size["uncompressed"] <= MAX_SIZE[name], f"{size['uncompressed'] / 1e6:.1f} MB"
    assert size["compressed"] < size["uncompressed"]


def test_arm64_runs_as_65532_on_a_read_only_root(
    ctr_variant: tuple[str, Build, str], runner: Runner
) -> None:
    assert_runs_contained(runner, ctr_variant[2])


def test_arm64_imports_every_extension_module(
    ctr_variant: tuple[str, Build, str], runner: Runner
) -> None:
    name, build, image = ctr_variant
    modules = extension_modules(build.arm64_root)
    assert {m.split(".")[0] for m in modules} >= EXTENSIONS[name]
    imports = [*modules, "lightkube"] if name == "cluster" else modules
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)\nprint('ok')"
    done = arm64(runner, image, "-c", code, *imports, command=("/usr/bin/python3",))
    assert (done.code, done.stdout) == (0, "ok\n"), done.stderr


# -- the webhook --------------------------------------------------------------------------


def _wait_ready(running: Running, client: httpx.Client) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if running.process.poll() is not None:
            done = running.wait(10)
            pytest.fail(f"serve exited {done.code}:\n{done.stderr}")
        try:
            if client.get("/readyz").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.5)
    pytest.fail(f"/readyz not 200 within {START_TIMEOUT}s")


def test_arm64_serve_reviews_over_tls(
    ctr_webhook: str, runner: Runner, samples: Registry, tmp_path: Path
) -> None:
    tls = make_tls_material(tmp_path / "tls")
    for path in (tls.server.cert.parent, tls.server.cert, tls.server.key):
        path.chmod(0o755 if path.is_dir() else 0o644)  # read by 65532 in the container
    port = free_port()
    args = ["serve", "--listen", f"127.0.0.1:{port}"]
    args += [
        "--tls-cert",
        f"/tls/{tls.server.cert.name}",
        "--tls-key",
        f"/tls/{tls.server.key.name}",
    ]
    container = arm64_container(ctr_webhook, *args, volumes={"/tls": tls.server.cert.parent})
    context = ssl.create_default_context(cafile=str(tls.ca_file))
    client = httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=context, timeout=60)
    with client, runner.started(container) as running:
        _wait_ready(running, client)
        assert client.get("/healthz").status_code == 200
        assert review(client, samples.ref("sample/app:1.0.0"))["allowed"] is True
        assert review(client, samples.ref("sample/app:9.9.9"))["allowed"] is False
        running.kill("SIGTERM")  # as the kubelet stops a container
        done = running.wait(STOP_TIMEOUT)
    assert done.code == 0, done.stderr
    assert "Traceback" not in done.stderr


# -- the cluster image --------------------------------------------------------------------


@pytest.mark.parametrize("command", ["reap", "audit"])
def test_arm64_cluster_help(ctr_cluster: str, runner: Runner, command: str) -> None:
    done = arm64(runner, ctr_cluster, command, "--help")
    assert done.code == 0, done.stderr
    assert "--kubeconfig" in done.stdout


def test_arm64_audit_reads_the_api_over_https(
    ctr_cluster: str,
    runner: Runner,
    kube_api: KubeAPI,
    kube_dir: Path,
    samples: Registry,
) -> None:
    found, missing = samples.ref("sample/app:1.0.0"), samples.ref("sample/app:9.9.9")
    kube_api.add(k8s.deployment("web", "shop", found), k8s.cronjob("nightly", "ci", missing))
    args = ["audit", "-o", "json", "--kubeconfig", f"{KUBE_DIR}/config"]
    done = arm64(runner, ctr_cluster, *args, volumes={KUBE_DIR: kube_dir})
    assert done.code == 1, done.output
    statuses = {u["image"]: u["result"]["status"] for u in json.loads(done.stdout)["uses"]}
    assert statuses == {found: "found", missing: "missing"}
    assert kube_api.writes == []
