"""The webhook image (docker/Dockerfile with ``--build-arg EXTRAS=webhook``, built by
``scripts/image-build.sh --webhook``): ``imagecheck serve`` run under containerd + runc
(tests/support/runc.py: read-only root, UID 65532, no capabilities, seccomp, PID 1) answering
real ``AdmissionReview`` requests about images in a real registry, stopped as the kubelet stops
it (SIGTERM).

Same rules as test_image.py (whose helpers and registry fixtures this reuses): the build
installs its tools; not root, or an install that fails: skip, except under ``CI=true`` where
that fails.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.image.images import NONROOT, Image, Registry, built_image, into_containerd, review
from tests.image.sizes import WEBHOOK_MAX_SIZE as MAX_SIZE
from tests.support.net import free_port
from tests.support.runc import Container, MiB, Runner, Running

WEBHOOK_IMAGE = os.environ.get("IMAGECHECK_WEBHOOK_IMAGE", "localhost/imagecheck-webhook:dev")
WEBHOOK_IMAGE_SIZE_KEY = "webhook_image_size_bytes"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
MEMORY_LIMIT = 256 * MiB

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="session")
def webhook_image() -> Iterator[Image]:
    yield from built_image(WEBHOOK_IMAGE, "--webhook")


@pytest.fixture(scope="session")
def ctr_webhook(webhook_image: Image, runner: Runner) -> str:
    return into_containerd(runner, webhook_image)


# -- what is in the image ---------------------------------------------------------------


def test_config_as_the_default_image(webhook_image: Image) -> None:
    assert webhook_image.config["User"] == NONROOT
    assert webhook_image.config["Entrypoint"] == ["/usr/bin/python3", "-m", "imagecheck"]


def test_size_is_at_most_45_mb(webhook_image: Image, record_property: Any) -> None:
    record_property(WEBHOOK_IMAGE_SIZE_KEY, webhook_image.size)
    assert webhook_image.size <= MAX_SIZE, f"{webhook_image.size / 1e6:.1f} MB"


@pytest.mark.parametrize(
    "path", ["bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/bash", "bin/busybox"]
)
def test_no_shell(webhook_image: Image, path: str) -> None:
    assert not (webhook_image.rootfs / path).exists()
    assert not (webhook_image.rootfs / path).is_symlink()


def test_no_packaging_tools_no_setuid_no_world_writable(webhook_image: Image) -> None:
    rootfs = webhook_image.rootfs
    offenders = []
    for path in rootfs.rglob("*"):
        if path.is_symlink():
            continue
        mode = path.lstat().st_mode
        if path.name.startswith(("pip", "setuptools", "ensurepip")):
            offenders.append(f"{path}: packaging tool")
        if mode & 0o6000:
            offenders.append(f"{path}: setuid/setgid")
        if mode & 0o002 and path != rootfs / "tmp":
            offenders.append(f"{path}: world-writable")
    assert offenders == []


@pytest.mark.parametrize("library", ["libpthread.so.0", "libstdc++.so.6", "libgcc_s.so.1"])
def test_extension_libraries_are_in(webhook_image: Image, library: str) -> None:
    """What the dependencies' C extensions load (frozenlist: libstdc++); without them they
    would silently fall back to pure Python."""
    assert (webhook_image.rootfs / "usr/lib/x86_64-linux-gnu" / library).exists()


# -- serve against a real registry ------------------------------------------------------


def _wait_ready(running: Running, client: httpx.Client) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if running.process.poll() is not None:
            done = running.wait(10)
            pytest.fail(f"serve exited {done.code} before it was ready:\n{done.stderr}")
        try:
            if client.get("/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"/readyz not 200 within {START_TIMEOUT}s")


def test_serve_reviews_a_job_then_stops_on_sigterm(
    ctr_webhook: str, runner: Runner, registry: Registry
) -> None:
    port = free_port()
    args = ("serve", "--insecure-http", "--listen", f"127.0.0.1:{port}")
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, trust_env=False)
    with client, runner.started(Container(ctr_webhook, args, memory_limit=MEMORY_LIMIT)) as running:
        _wait_ready(running, client)
        assert client.get("/healthz").status_code == 200

        found = review(client, registry.ref("sample/app:1.0.0"))
        assert found["allowed"] is True, found

        missing_ref = registry.ref("sample/app:9.9.9")
        missing = review(client, missing_ref)
        assert missing["allowed"] is False, missing
        assert missing["status"]["code"] == 403
        assert missing_ref in missing["status"]["message"]

        metrics = client.get("/metrics")
        assert metrics.status_code == 200
        assert "imagecheck_reviews_total" in metrics.text

        running.kill("SIGTERM")
        done = running.wait(STOP_TIMEOUT)
    assert done.code == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.written == ()
    assert done.memory_peak < MEMORY_LIMIT
