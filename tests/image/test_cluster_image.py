"""The cluster image (docker/Dockerfile with ``--build-arg EXTRAS=cluster``, built by
``scripts/image-build.sh --cluster``; examples/reap-*.yaml and audit-*.yaml run it):
``imagecheck audit`` and ``reap`` run under containerd + runc (tests/support/runc.py: read-only
root, UID 65532, no capabilities, seccomp, PID 1, examples/audit-cronjob.yaml's memory limit),
talking to the Kubernetes API stand-in
(tests/support/kubeapi, over HTTPS with a test CA) and a real registry (issue #15).

Built, skipped or failed as test_image.py says (its helpers and registry fixtures are reused).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.image.images import KUBE_DIR, NONROOT, Image, Registry, built_image, into_containerd
from tests.image.sizes import CLUSTER_MAX_SIZE as MAX_SIZE
from tests.support.kubeapi import KubeAPI
from tests.support.kubeapi import objects as k8s
from tests.support.runc import Container, Exited, MiB, Runner

CLUSTER_IMAGE = os.environ.get("IMAGECHECK_CLUSTER_IMAGE", "localhost/imagecheck-cluster:dev")
CLUSTER_IMAGE_SIZE_KEY = "cluster_image_size_bytes"
MEMORY_LIMIT = 256 * MiB

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="session")
def cluster_image() -> Iterator[Image]:
    yield from built_image(CLUSTER_IMAGE, "--cluster")


@pytest.fixture(scope="session")
def ctr_cluster(cluster_image: Image, runner: Runner) -> str:
    return into_containerd(runner, cluster_image)


def run_cluster(runner: Runner, image: str, kube_dir: Path, *args: str) -> Exited:
    """The image with ``ARGS --kubeconfig /kube/config``, ``kube_dir`` mounted at /kube."""
    argv = (*args, "--kubeconfig", f"{KUBE_DIR}/config")
    container = Container(image, argv, volumes={KUBE_DIR: kube_dir}, memory_limit=MEMORY_LIMIT)
    done = runner.run(container)
    assert done.written == ()
    return done


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
def test_help_exits_0(ctr_cluster: str, runner: Runner, command: str) -> None:
    done = runner.run(Container(ctr_cluster, (command, "--help"), memory_limit=MEMORY_LIMIT))
    assert done.code == 0, done.stderr
    assert "--kubeconfig" in done.stdout


# -- against the Kubernetes API stand-in and a real registry -----------------------------


def test_audit_reports_found_and_missing(
    ctr_cluster: str,
    runner: Runner,
    kube_api: KubeAPI,
    kube_dir: Path,
    registry: Registry,
) -> None:
    found, missing = registry.ref("sample/app:1.0.0"), registry.ref("sample/app:9.9.9")
    kube_api.add(k8s.deployment("web", "shop", found), k8s.cronjob("nightly", "ci", missing))
    done = run_cluster(runner, ctr_cluster, kube_dir, "audit", "-o", "json")
    assert done.code == 1, done.output
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
    ctr_cluster: str,
    runner: Runner,
    kube_api: KubeAPI,
    kube_dir: Path,
    registry: Registry,
) -> None:
    missing = registry.ref("sample/app:9.9.9")
    job = k8s.job("train", "ci", missing)
    job["status"]["startTime"] = _ago(600)
    pod = k8s.pod("train-abcde", "ci", missing, job_name="train")
    pod["status"]["startTime"] = _ago(600)
    kube_api.add(job, pod)
    done = run_cluster(runner, ctr_cluster, kube_dir, "reap", "--once")
    assert done.code == 0, done.output
    patch, *events = kube_api.writes
    assert (patch.method, patch.path) == ("PATCH", "/apis/batch/v1/namespaces/ci/jobs/train")
    reason = patch.body["metadata"]["annotations"]["imagecheck.io/reaped"]
    assert reason.startswith(f"missing {missing}")
    assert [(e.method, e.body["reason"]) for e in events] == [("POST", "ImageMissing")] * 2
    assert "Traceback" not in done.stderr
