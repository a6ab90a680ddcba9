"""The images under test: built with scripts/image-build.sh and mounted (:func:`built_image`),
imported into the tests' containerd to run under runc (:func:`into_containerd`), the registry
they pull from (:class:`Registry`), and what runs inside them."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.admission import admission_review, workload
from tests.support.runc import Runner
from tests.support.tools import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "scripts" / "image-build.sh"
NONROOT = "65532:65532"
BUILDAH_ENV = {"STORAGE_DRIVER": "vfs", "BUILDAH_ISOLATION": "chroot"}


def _buildah(*args: str) -> str:
    env = os.environ | BUILDAH_ENV
    return subprocess.run(
        ["buildah", *args], env=env, check=True, capture_output=True, text=True
    ).stdout


@dataclass(frozen=True)
class Image:
    name: str
    config: dict[str, Any]
    rootfs: Path
    size: int


def built_image(name: str, *flags: str) -> Iterator[Image]:
    """Build ``name`` with scripts/image-build.sh ``flags`` (or reuse buildah's cache) and
    yield it mounted; the image fixtures of the other test modules use it too."""
    if os.geteuid() != 0:
        skip_or_fail("building and running the image here needs root (mount, chroot)")
    env = os.environ | {"IMAGECHECK_IMAGE": name}
    built = subprocess.run([BUILD, *flags], env=env, capture_output=True, text=True, check=False)
    if built.returncode != 0:
        script = " ".join(["scripts/image-build.sh", *flags])
        pytest.fail(f"{script} failed:\n{built.stdout}{built.stderr[-4000:]}")
    inspected = json.loads(_buildah("inspect", "--type", "image", name))
    container = _buildah("from", "--pull=never", "--quiet", name).strip()
    try:
        rootfs = Path(_buildah("mount", container).strip())
        yield Image(name, inspected["OCIv1"]["config"], rootfs, _uncompressed_size(name))
    finally:
        _buildah("rm", container)


def _uncompressed_size(name: str) -> int:
    """The sum of the layers as uncompressed tar files (what ``docker images`` shows)."""
    with tempfile.TemporaryDirectory() as tmp:
        _buildah("push", "--quiet", "--disable-compression", name, f"dir:{tmp}")
        manifest = json.loads((Path(tmp) / "manifest.json").read_text())
    return sum(int(layer["size"]) for layer in manifest["layers"])


@dataclass(frozen=True)
class Registry:
    host: str
    ca_file: Path | None = None

    def ref(self, name: str) -> str:
        return f"{self.host}/{name}"


def into_containerd(runner: Runner, image: Image) -> str:
    """``image`` from buildah's storage into containerd (an OCI archive, ``ctr images
    import``); its name there."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "image.tar"
        _buildah("push", "--quiet", image.name, f"oci-archive:{archive}:{image.name}")
        runner.ctr("images", "import", str(archive))
    return image.name


# Where the container finds the stand-in's kubeconfig and CA (mounted read-only).
KUBE_DIR = "/kube"


def job(*images: str) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    return workload("Job", {"containers": containers, "restartPolicy": "Never"})


def review(client: httpx.Client, image: str) -> dict[str, Any]:
    body = admission_review(job(image))
    answer = client.post("/validate", json=body)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["kind"] == "AdmissionReview"
    response: dict[str, Any] = data["response"]
    assert response["uid"] == body["request"]["uid"]
    return response
