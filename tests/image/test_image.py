"""The container image (docker/Dockerfile, issue #5), built with buildah and run against a real
registry under containerd + runc (tests/support/runc.py) as the kubelet starts
``examples/job.yaml``'s initContainer: read-only root, UID/GID 65532, no capabilities,
``no_new_privs``, the runtime's default seccomp profile, the example's memory limit, the
termination log and the pull secret mounted.

The session builds the image (or reuses buildah's cache) with scripts/image-build.sh, which
installs buildah and debootstrap when they are missing; docker-registry, containerd and runc
missing are installed by scripts/system-deps.sh. Not root, or an install that fails: skip,
except under ``CI=true`` where that fails, so that CI cannot go green by running nothing.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.image.images import NONROOT, Image, Registry, built_image, into_containerd
from tests.image.sizes import IMAGE_SIZE_KEY
from tests.support.jobexample import init_container
from tests.support.registry import LocalRegistry, TLSFiles, bcrypt_line
from tests.support.runc import Container, Exited, Runner

IMAGE = os.environ.get("IMAGECHECK_IMAGE", "localhost/imagecheck:dev")
MAX_SIZE = 30_000_000
USER = "puller"

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="session")
def image() -> Iterator[Image]:
    yield from built_image(IMAGE)


@pytest.fixture(scope="session")
def ctr_image(image: Image, runner: Runner) -> str:
    return into_containerd(runner, image)


@dataclass(frozen=True)
class Private:
    """A registry over TLS with Basic auth (htpasswd): what the example's pull secret is for."""

    registry: Registry
    ca_file: Path
    password: str

    def secret(self, password: str | None = None) -> dict[str, bytes]:
        """The pull secret's files, as the kubelet mounts a kubernetes.io/dockerconfigjson."""
        token = base64.b64encode(f"{USER}:{password or self.password}".encode()).decode()
        auths = {"auths": {self.registry.host: {"auth": token}}}
        return {".dockerconfigjson": json.dumps(auths).encode()}


@pytest.fixture(scope="session")
def private(storage: Path) -> Iterator[Private]:
    work = storage.parent / "tls"
    work.mkdir()
    ca = trustme.CA(organization_name="imagecheck image test CA")
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    ca_file, cert, key = work / "ca.pem", work / "server.pem", work / "server-key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    key.write_bytes(leaf.private_key_pem.bytes())
    ca_file.chmod(0o644)  # read by 65532 in the container
    password = secrets.token_hex(8)
    htpasswd = work / "htpasswd"
    htpasswd.write_text(bcrypt_line(USER, password))
    tls = TLSFiles(cert=cert, key=key)
    with LocalRegistry(work, storage=storage, tls=tls, htpasswd=htpasswd) as running:
        yield Private(Registry(running.host, ca_file), ca_file, password)


def run_image(runner: Runner, image: str, *args: str, **options: Any) -> Exited:
    """``image`` with ``args`` after its entrypoint, as the kubelet starts a container."""
    return runner.run(Container(image, args=args, **options))


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


def test_version(ctr_image: str, runner: Runner) -> None:
    done = run_image(runner, ctr_image, "--version")
    assert done.code == 0, done.output
    assert "imagecheck" in done.stdout


def test_found_exits_0(ctr_image: str, runner: Runner, registry: Registry) -> None:
    done = run_image(runner, ctr_image, "check", registry.ref("sample/app:1.0.0"))
    assert done.code == 0, done.output
    assert done.stdout.startswith("found ")


def test_json_output_parses(ctr_image: str, runner: Runner, registry: Registry) -> None:
    refs = [registry.ref("sample/app:1.0.0"), registry.ref("sample/app:9.9.9")]
    done = run_image(runner, ctr_image, "check", "-o", "json", *refs)
    assert done.code == 1, done.stderr
    results = json.loads(done.stdout)
    assert [(r["image"], r["status"]) for r in results] == [
        (refs[0], "found"),
        (refs[1], "missing"),
    ]
    assert results[0]["digest"].startswith("sha256:")


def test_host_name_resolves(ctr_image: str, runner: Runner, registry: Registry) -> None:
    """``localhost``: /etc/hosts through nsswitch, resolved in asyncio's thread pool."""
    port = registry.host.rsplit(":", 1)[1]
    done = run_image(runner, ctr_image, "check", f"localhost:{port}/sample/app:multi")
    assert done.code == 0, done.output


def test_verbose_logs_each_request(ctr_image: str, runner: Runner, registry: Registry) -> None:
    done = run_image(runner, ctr_image, "check", "--verbose", registry.ref("sample/app:1.0.0"))
    assert done.code == 0, done.stderr
    assert f"HEAD http://{registry.host}/v2/sample/app/manifests/1.0.0" in done.stderr


# -- examples/job.yaml's initContainer: every exit code, its message, its limits ----------

CA_PATH = "/ca/ca.pem"
# (image, password or None for the right one, extra args, exit code, termination message)
EXAMPLE_CASES = {
    "found": ("sample/app:1.0.0", None, (), 0, r"\Z"),
    "missing": ("sample/app:9.9.9", None, (), 1, r"imagecheck: missing {ref} \(tag '9.9.9'"),
    # Bad arguments end before the file is written: the kubelet shows the log's tail.
    "invalid": ("sample/App:1.0.0", None, (), 2, r"(?s).*{ref}"),
    "denied": ("sample/app:1.0.0", "wrong", (), 3, r"imagecheck: denied {ref} "),
    "unreachable": ("127.0.0.1:1/sample/app:1.0.0", None, ("--retries=0",), 4,
                    r"imagecheck: error {ref} \(cannot talk to 127.0.0.1:1"),
}  # fmt: skip


@pytest.mark.parametrize("case", EXAMPLE_CASES)
def test_job_example_exit_code_and_message(
    ctr_image: str, runner: Runner, private: Private, case: str, record_property: Any
) -> None:
    """Run with the example's args, limit, user and pull secret (and the test CA): the exit
    code and termination message it documents; nothing written to the root; the memory peak
    (from the cgroup) under the example's limit."""
    name, password, extra, code, message = EXAMPLE_CASES[case]
    ref = name if name.startswith("127.") else private.registry.ref(name)
    container = init_container(
        ctr_image,
        ref,
        private.secret(password),
        extra_args=("--ca-file", CA_PATH, *extra),
        volumes={CA_PATH: private.ca_file},
    )
    done = runner.run(container)
    record_property(f"memory_peak_{case}", done.memory_peak)
    assert done.code == code, done.output
    assert re.match(message.format(ref=re.escape(ref)), done.termination_message), (
        done.termination_message
    )
    assert done.written == ()
    assert 0 < done.memory_peak < container.memory_limit
    assert private.password not in done.output + done.termination_message


def test_tls_untrusted_certificate_is_reported(
    ctr_image: str, runner: Runner, private: Private
) -> None:
    ref = private.registry.ref("sample/app:1.0.0")
    done = runner.run(init_container(ctr_image, ref, private.secret(), extra_args=("--retries=0",)))
    assert done.code == 4, done.output
    assert "--ca-file" in done.output


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
    ctr_image: str,
    runner: Runner,
    registry: Registry,
    tmp_path: Path,
    helper: str,
    expected: int,
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
        runner,
        ctr_image,
        "check",
        registry.ref("sample/app:1.0.0"),
        volumes={
            "/usr/local/bin/docker-credential-imagetest": script,
            "/docker/config.json": config,
        },
        env={"DOCKER_CONFIG": "/docker"},
    )
    assert done.code == expected, done.output
    if expected:
        assert "docker-credential-imagetest" in done.stderr
    assert "s3cret" not in done.output


# -- the running process, read from inside; SIGTERM ----------------------------------------

# Run as a container of the image: its own credentials and limits, and what a write does.
INSIDE = """
import errno
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
for key in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
            "NoNewPrivs", "Seccomp"):
    print(key, " ".join(status[key].split()))
for path in ("/tmp/written", "/usr/lib/imagecheck/written", "/written"):
    try:
        open(path, "w").close()
    except OSError as e:
        print(path, errno.errorcode[e.errno])
    else:
        print(path, "written")
"""
STATUS = [
    "Uid 65532 65532 65532 65532",
    "Gid 65532 65532 65532 65532",
    "Groups 65532",
    *(f"{cap} 0000000000000000" for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")),
    "NoNewPrivs 1",
    "Seccomp 2",  # a filter: the runtime's default profile
]


def _status(text: str) -> list[str]:
    fields = dict(line.split(":", 1) for line in text.splitlines())
    return [f"{key} {' '.join(fields[key].split())}" for key in (s.split()[0] for s in STATUS)]


def test_inside_the_container(ctr_image: str, runner: Runner) -> None:
    """From inside: the process's credentials, capabilities, no_new_privs, seccomp; every
    write to the root refused."""
    container = init_container(ctr_image, "unused", {})
    done = runner.run(replace(container, command=("/usr/bin/python3",), args=("-c", INSIDE)))
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == [
        *STATUS,
        "/tmp/written EROFS",
        "/usr/lib/imagecheck/written EROFS",
        "/written EROFS",
    ]
    assert done.written == ()


@pytest.fixture
def silent_registry() -> Iterator[tuple[int, threading.Event]]:
    """A port that accepts and never answers: a check against it waits (TLS handshake)."""
    accepted = threading.Event()
    held: list[socket.socket] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def hold() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                held.append(conn)
                accepted.set()

        threading.Thread(target=hold, daemon=True).start()
        yield server.getsockname()[1], accepted
    for conn in held:
        conn.close()


def test_process_as_the_kubelet_starts_it_then_sigterm(
    ctr_image: str, runner: Runner, silent_registry: tuple[int, threading.Event]
) -> None:
    """PID 1 is imagecheck, as 65532 with no capabilities, no_new_privs and seccomp on;
    mid-check, ``ctr task kill`` (SIGTERM) ends it promptly with 143."""
    port, accepted = silent_registry
    ref = f"127.0.0.1:{port}/a/b:1"
    no_auths = {".dockerconfigjson": b'{"auths": {}}'}
    container = init_container(
        ctr_image, ref, no_auths, extra_args=("--timeout=60", "--deadline=60")
    )
    with runner.started(container) as running:
        assert accepted.wait(30), "imagecheck never connected"
        pid = running.pid()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert cmdline[:3] == [b"/usr/bin/python3", b"-m", b"imagecheck"]
        assert _status(Path(f"/proc/{pid}/status").read_text()) == STATUS
        started = time.monotonic()
        running.kill("SIGTERM")
        done = running.wait(30)
    assert done.code == 143, done.output
    assert time.monotonic() - started < 10
    assert done.written == ()
