"""The cluster image (docker/Dockerfile with ``--build-arg EXTRAS=cluster``, built by
``scripts/image-build.sh --cluster``; examples/reap-*.yaml and audit-*.yaml run it):
``imagecheck audit`` and ``reap`` run by scripts/image-run.sh as a runtime would (read-only
root, UID 65532, no capabilities, PID 1), talking to the Kubernetes API stand-in
(tests/support/kubeapi, over HTTPS with a test CA) and a real registry (issue #15).

Built, skipped or failed as test_image.py says (its helpers and registry fixtures are reused).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.image.test_image import (
    BUILDAH_ENV,
    NONROOT,
    RUN,
    Image,
    Registry,
    built_image,
    registry,  # noqa: F401 - a fixture, used by name
    storage,  # noqa: F401 - a fixture, used by registry
)
from tests.support.kubeapi import KubeAPI
from tests.support.kubeapi import objects as k8s
from tests.support.pki import make_tls_material

CLUSTER_IMAGE = os.environ.get("IMAGECHECK_CLUSTER_IMAGE", "localhost/imagecheck-cluster:dev")
# Measured 36.0 MB (36,004,864 bytes; 15.9 MB as the gzip layer a registry stores): the
# default image (25.1 MB) plus 10.4 MB of files: lightkube 2.1, httpx2 and msgspec 2.2,
# aiohttp and prometheus-client 3.8, libstdc++ and libgcc_s 2.3 (frozenlist loads them;
# docker/README.md has the table). A tenth of headroom, as for the other two images: a new
# dependency has to be noticed.
MAX_SIZE = 40_000_000
CLUSTER_IMAGE_SIZE_KEY = "cluster_image_size_bytes"
# Where the container finds the stand-in's kubeconfig and CA (mounted read-only).
KUBE_DIR = "/kube"

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="session")
def cluster_image() -> Iterator[Image]:
    yield from built_image(CLUSTER_IMAGE, "--cluster")


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


def run_cluster(kube_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``docker run --read-only -v KUBE_DIR:/kube:ro IMAGE ARGS --kubeconfig /kube/config``."""
    return subprocess.run(
        [RUN, "-v", f"{kube_dir}:{KUBE_DIR}:ro", "--", *args, "--kubeconfig", f"{KUBE_DIR}/config"],
        env=os.environ | BUILDAH_ENV | {"IMAGECHECK_IMAGE": CLUSTER_IMAGE},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _ago(seconds: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- what is in the image ---------------------------------------------------------------


def test_config_as_the_default_image(cluster_image: Image) -> None:
    assert cluster_image.config["User"] == NONROOT
    assert cluster_image.config["Entrypoint"] == ["/usr/bin/python3", "-m", "imagecheck"]


def test_size_is_at_most_40_mb(cluster_image: Image, record_property: Any) -> None:
    record_property(CLUSTER_IMAGE_SIZE_KEY, cluster_image.size)
    assert cluster_image.size <= MAX_SIZE, f"{cluster_image.size / 1e6:.1f} MB"


@pytest.mark.parametrize(
    "path", ["bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/bash", "bin/busybox"]
)
def test_no_shell(cluster_image: Image, path: str) -> None:
    assert not (cluster_image.rootfs / path).exists()
    assert not (cluster_image.rootfs / path).is_symlink()


@pytest.mark.parametrize("package", ["lightkube", "httpx2", "msgspec", "aiohttp"])
def test_cluster_packages_are_in_and_uvloop_is_not(cluster_image: Image, package: str) -> None:
    """The cluster extra, and not the webhook's event loop, which reap and audit never run."""
    site = cluster_image.rootfs / "usr/lib/imagecheck"
    assert (site / package / "__init__.pyc").is_file()
    assert not (site / "uvloop").exists()


@pytest.mark.parametrize("command", ["reap", "audit"])
def test_help_exits_0(cluster_image: Image, command: str) -> None:
    done = subprocess.run(
        [RUN, "--", command, "--help"],
        env=os.environ | BUILDAH_ENV | {"IMAGECHECK_IMAGE": CLUSTER_IMAGE},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--kubeconfig" in done.stdout


# -- against the Kubernetes API stand-in and a real registry -----------------------------


def test_audit_reports_found_and_missing(
    cluster_image: Image,
    kube_api: KubeAPI,
    kube_dir: Path,
    registry: Registry,  # noqa: F811 - the imported fixture
) -> None:
    found, missing = registry.ref("sample/app:1.0.0"), registry.ref("sample/app:9.9.9")
    kube_api.add(k8s.deployment("web", "shop", found), k8s.cronjob("nightly", "ci", missing))
    done = run_cluster(kube_dir, "audit", "-o", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    uses = {
        (u["namespace"], u["kind"], u["name"], u["image"], u["result"]["status"])
        for u in json.loads(done.stdout)["uses"]
    }
    assert uses == {
        ("shop", "Deployment", "web", found, "found"),
        ("ci", "CronJob", "nightly", missing, "missing"),
    }
    assert kube_api.writes == []  # audit only reads
    assert "Traceback" not in done.stderr


def test_reap_once_fails_the_job_whose_image_is_missing(
    cluster_image: Image,
    kube_api: KubeAPI,
    kube_dir: Path,
    registry: Registry,  # noqa: F811 - the imported fixture
) -> None:
    missing = registry.ref("sample/app:9.9.9")
    job = k8s.job("train", "ci", missing)
    job["status"]["startTime"] = _ago(600)
    pod = k8s.pod("train-abcde", "ci", missing, job_name="train")
    pod["status"]["startTime"] = _ago(600)
    kube_api.add(job, pod)
    done = run_cluster(kube_dir, "reap", "--once")
    assert done.returncode == 0, done.stdout + done.stderr
    patch, *events = kube_api.writes
    assert (patch.method, patch.path) == ("PATCH", "/apis/batch/v1/namespaces/ci/jobs/train")
    reason = patch.body["metadata"]["annotations"]["imagecheck.io/reaped"]
    assert reason.startswith(f"missing {missing}")
    assert [(e.method, e.body["reason"]) for e in events] == [("POST", "ImageMissing")] * 2
    assert "Traceback" not in done.stderr
