"""The container image (docker/Dockerfile, issue #5), built with buildah and run against a real
registry by scripts/image-run.sh: read-only root, the image's user (65532), no capabilities,
the entrypoint as PID 1.

The session builds the image (or reuses buildah's cache) with scripts/image-build.sh, which
installs buildah and debootstrap when they are missing; docker-registry missing is installed by
scripts/system-deps.sh. Not root (mount and chroot need it), or an install that fails: skip,
except under ``CI=true`` where that fails, so that CI cannot go green by running nothing.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.image.images import (
    BUILDAH_ENV,
    NONROOT,
    RUN,
    Image,
    Registry,
    built_image,
    find_entrypoint,
)
from tests.image.sizes import IMAGE_SIZE_KEY
from tests.support.registry import LocalRegistry, TLSFiles

IMAGE = os.environ.get("IMAGECHECK_IMAGE", "localhost/imagecheck:dev")
MAX_SIZE = 30_000_000

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="session")
def image() -> Iterator[Image]:
    yield from built_image(IMAGE)


@pytest.fixture(scope="session")
def tls_registry(storage: Path) -> Iterator[Registry]:
    work = storage.parent / "tls"
    work.mkdir()
    ca = trustme.CA(organization_name="imagecheck image test CA")
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    ca_file, cert, key = work / "ca.pem", work / "server.pem", work / "server-key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    key.write_bytes(leaf.private_key_pem.bytes())
    ca_file.chmod(0o644)  # read by 65532 in the container
    tls = TLSFiles(cert=cert, key=key)
    with LocalRegistry(work, storage=storage, tls=tls) as running:
        yield Registry(running.host, ca_file)


def run_image(
    *args: str,
    volumes: Sequence[str] = (),
    env: Sequence[str] = (),
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``docker run --read-only --user 65532:65532 --network host IMAGE ARGS...``, here."""
    options = [opt for v in volumes for opt in ("-v", v)] + [o for e in env for o in ("-e", e)]
    return subprocess.run(
        [RUN, *options, "--", *args],
        env=os.environ | BUILDAH_ENV | {"IMAGECHECK_IMAGE": IMAGE},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# -- what is in the image ---------------------------------------------------------------


def test_config_user_is_nonroot(image: Image) -> None:
    assert image.config["User"] == NONROOT


def test_entrypoint_is_imagecheck(image: Image) -> None:
    assert image.config["Entrypoint"] == ["/usr/bin/python3", "-m", "imagecheck"]


def test_size_is_at_most_30_mb(image: Image, record_property: Any) -> None:
    record_property(IMAGE_SIZE_KEY, image.size)
    assert image.size <= MAX_SIZE, f"{image.size / 1e6:.1f} MB"


@pytest.mark.parametrize(
    "path", ["bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/bash", "bin/busybox"]
)
def test_no_shell(image: Image, path: str) -> None:
    assert not (image.rootfs / path).exists()
    assert not (image.rootfs / path).is_symlink()


def test_no_pip_no_setuid_no_world_writable(image: Image) -> None:
    offenders = []
    for path in image.rootfs.rglob("*"):
        if path.is_symlink():
            continue
        mode = path.lstat().st_mode
        if path.name.startswith(("pip", "setuptools", "ensurepip")):
            offenders.append(f"{path}: packaging tool")
        if mode & 0o6000:
            offenders.append(f"{path}: setuid/setgid")
        if mode & 0o002 and path != image.rootfs / "tmp":
            offenders.append(f"{path}: world-writable")
    assert offenders == []


def test_ca_certificates_with_hash_links(image: Image) -> None:
    certs = image.rootfs / "etc/ssl/certs"
    assert (certs / "ca-certificates.crt").stat().st_size > 100_000
    hashed = [p for p in certs.iterdir() if p.suffix == ".0"]
    assert len(hashed) > 100
    dangling = [p.name for p in hashed if not _resolve_in(image.rootfs, p).is_file()]
    assert dangling == []


def _resolve_in(rootfs: Path, path: Path) -> Path:
    """Follow symlinks as they resolve inside the image, not on this host."""
    for _ in range(40):
        if not path.is_symlink():
            return path
        link = os.readlink(path)
        path = rootfs / link.lstrip("/") if link.startswith("/") else path.parent / link
    raise AssertionError(f"symlink loop at {path}")


# -- the entrypoint against a real registry ---------------------------------------------


def test_version(image: Image) -> None:
    done = run_image("--version")
    assert done.returncode == 0, done.stderr
    assert "imagecheck" in done.stdout


def test_found_exits_0(image: Image, registry: Registry) -> None:
    done = run_image("check", registry.ref("sample/app:1.0.0"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("found ")


def test_missing_exits_1(image: Image, registry: Registry) -> None:
    done = run_image("check", registry.ref("sample/app:9.9.9"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("missing ")


def test_json_output_parses(image: Image, registry: Registry) -> None:
    refs = [registry.ref("sample/app:1.0.0"), registry.ref("sample/app:9.9.9")]
    done = run_image("check", "-o", "json", *refs)
    assert done.returncode == 1, done.stderr
    results = json.loads(done.stdout)
    assert [(r["image"], r["status"]) for r in results] == [
        (refs[0], "found"),
        (refs[1], "missing"),
    ]
    assert results[0]["digest"].startswith("sha256:")


def test_host_name_resolves(image: Image, registry: Registry) -> None:
    """``localhost``: /etc/hosts through nsswitch, resolved in asyncio's thread pool."""
    port = registry.host.rsplit(":", 1)[1]
    done = run_image("check", f"localhost:{port}/sample/app:multi")
    assert done.returncode == 0, done.stdout + done.stderr


def test_verbose_logs_each_request(image: Image, registry: Registry) -> None:
    done = run_image("check", "--verbose", registry.ref("sample/app:1.0.0"))
    assert done.returncode == 0, done.stderr
    assert f"HEAD http://{registry.host}/v2/sample/app/manifests/1.0.0" in done.stderr


def test_tls_with_ca_file(image: Image, tls_registry: Registry) -> None:
    assert tls_registry.ca_file is not None
    done = run_image(
        "check",
        "--ca-file",
        "/ca/ca.pem",
        tls_registry.ref("sample/app:1.0.0"),
        volumes=[f"{tls_registry.ca_file}:/ca/ca.pem:ro"],
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_tls_untrusted_certificate_is_reported(image: Image, tls_registry: Registry) -> None:
    done = run_image("check", "--retries", "0", tls_registry.ref("sample/app:1.0.0"))
    assert done.returncode == 4, done.stdout + done.stderr
    assert "--ca-file" in done.stdout + done.stderr


HELPER_OK = """#!/usr/bin/python3
import json, sys
sys.stdin.read()
print(json.dumps({"Username": "someone", "Secret": "s3cret"}))
"""
HELPER_FAILS = """#!/usr/bin/python3
import sys
sys.stdin.read()
print("helper says no", file=sys.stderr)
sys.exit(1)
"""


@pytest.mark.parametrize(
    ("helper", "expected"), [(HELPER_OK, 0), (HELPER_FAILS, 2)], ids=["answers", "fails"]
)
def test_credential_helper_runs_as_subprocess(
    image: Image, registry: Registry, tmp_path: Path, helper: str, expected: int
) -> None:
    """A ``credHelpers`` helper (here a Python script, since the image has no shell) runs
    before any request: its answer is used, its failure is a one-line error naming it."""
    script = tmp_path / "docker-credential-imagetest"
    script.write_text(helper)
    script.chmod(0o755)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"credHelpers": {registry.host: "imagetest"}}))
    config.chmod(0o644)
    done = run_image(
        "check",
        registry.ref("sample/app:1.0.0"),
        volumes=[
            f"{script}:/usr/local/bin/docker-credential-imagetest:ro",
            f"{config}:/docker/config.json:ro",
        ],
        env=["DOCKER_CONFIG=/docker"],
    )
    assert done.returncode == expected, done.stdout + done.stderr
    if expected:
        assert "docker-credential-imagetest" in done.stderr
    assert "s3cret" not in done.stdout + done.stderr


def test_sigterm_exits_143(image: Image) -> None:
    """The entrypoint is PID 1 and still ends promptly on SIGTERM, mid-check."""
    accepted = threading.Event()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        held: list[socket.socket] = []

        def hold() -> None:  # accept and never answer: the TLS handshake waits
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                held.append(conn)
                accepted.set()

        threading.Thread(target=hold, daemon=True).start()
        args = ["--", "check", "--timeout", "60", "--deadline", "60", f"127.0.0.1:{port}/a/b:1"]
        proc = subprocess.Popen(
            [RUN, *args],
            env=os.environ | BUILDAH_ENV | {"IMAGECHECK_IMAGE": IMAGE},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert accepted.wait(30), "imagecheck never connected"
            target = find_entrypoint(proc.pid)
            started = time.monotonic()
            os.kill(target, signal.SIGTERM)
            _, stderr = proc.communicate(timeout=30)
        finally:
            proc.kill()
            for conn in held:
                conn.close()
    assert proc.returncode == 143, stderr
    assert time.monotonic() - started < 10
