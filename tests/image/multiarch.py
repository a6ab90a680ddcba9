"""What the multi-arch image tests share (issue #16): building a layout with
scripts/image-build-multiarch.sh, reading it, importing it into the tests' containerd, and
running its arm64 image there under runc, as on an arm64 node: its programs run under
qemu-aarch64 through binfmt_misc (tests/support/binfmt.py), with everything else as for the
amd64 image (tests/support/runc.py: read-only root, 65532, no capabilities, seccomp).
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.binfmt import ensure_qemu_aarch64
from tests.support.images import SampleImages
from tests.support.runc import Container, Exited, MiB, Runner
from tests.support.tools import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "scripts" / "image-build-multiarch.sh"
PLATFORMS = ("linux/amd64", "linux/arm64")
INDEX = "application/vnd.oci.image.index.v1+json"
RUN_TIMEOUT = 300
# Emulated, the interpreter needs more than on a native node.
ARM64_MEMORY = 512 * MiB
REF_NAME = "org.opencontainers.image.ref.name"


@dataclass(frozen=True)
class Build:
    layout: Path
    arm64_root: Path
    sizes: dict[str, dict[str, int]]

    def blob(self, digest: str) -> bytes:
        return (self.layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes()

    def index(self) -> dict[str, Any]:
        top = json.loads((self.layout / "index.json").read_text())["manifests"][0]
        index: dict[str, Any] = json.loads(self.blob(top["digest"]))
        return index

    def platforms(self) -> set[str]:
        return {
            f"{m['platform']['os']}/{m['platform']['architecture']}"
            for m in self.index()["manifests"]
        }

    def config(self, platform: str) -> dict[str, Any]:
        """The image configuration's ``config`` object (User, Env, Entrypoint...)."""
        [child] = [
            m
            for m in self.index()["manifests"]
            if f"{m['platform']['os']}/{m['platform']['architecture']}" == platform
        ]
        manifest = json.loads(self.blob(child["digest"]))
        config: dict[str, Any] = json.loads(self.blob(manifest["config"]["digest"]))["config"]
        return config


@dataclass(frozen=True)
class Registry:
    """A Distribution registry on loopback, seeded with tests/support/images.py's samples."""

    host: str
    url: str
    samples: SampleImages

    def ref(self, name: str) -> str:
        return f"{self.host}/{name}"


def build_layout(out: Path, *flags: str) -> Build:
    """Run the build script (``--webhook``, ``--cluster`` or nothing) into ``out``."""
    if os.geteuid() != 0:
        skip_or_fail("building the images here needs root (buildah mount, chroot)")
    env = os.environ | {"IMAGECHECK_MULTIARCH_OUT": str(out)}
    done = subprocess.run([BUILD, *flags], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"scripts/image-build-multiarch.sh {' '.join(flags)} failed:\n"
                    f"{done.stderr[-4000:]}")  # fmt: skip
    sizes = json.loads((out / "sizes.json").read_text())
    return Build(out / "layout", out / "rootfs-arm64", sizes)


def into_containerd(runner: Runner, build: Build, name: str) -> str:
    """The layout's index into containerd as ``name``, every platform's content with it; and
    binfmt_misc ready to run its arm64 programs."""
    ensure_qemu_aarch64()
    index = json.loads((build.layout / "index.json").read_text())
    index["manifests"] = [
        m | {"annotations": m.get("annotations", {}) | {REF_NAME: name}}
        for m in index["manifests"][:1]
    ]
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "layout.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(build.layout / "oci-layout", "oci-layout")
            tar.add(build.layout / "blobs", "blobs")
            listing = Path(tmp) / "index.json"
            listing.write_text(json.dumps(index))
            tar.add(listing, "index.json")
        runner.ctr("images", "import", "--all-platforms", str(archive))
    return name


def arm64(
    runner: Runner,
    image: str,
    *args: str,
    command: tuple[str, ...] | None = None,
    volumes: dict[str, Path] | None = None,
) -> Exited:
    """The arm64 image as a container under runc: its entrypoint (or ``command``) with
    ``args``, ``volumes`` (path in the container -> host path) bound read-only."""
    return runner.run(arm64_container(image, *args, command=command, volumes=volumes))


def arm64_container(
    image: str,
    *args: str,
    command: tuple[str, ...] | None = None,
    volumes: dict[str, Path] | None = None,
) -> Container:
    return Container(
        image,
        args=args,
        command=command,
        volumes=volumes or {},
        memory_limit=ARM64_MEMORY,
        platform="linux/arm64",
        timeout=RUN_TIMEOUT,
    )


# Run by the arm64 interpreter in the container: who it runs as, and what a write does.
WHO_AND_WRITE = """
import errno, os, platform
print(platform.machine(), os.getuid(), os.getgid(), os.getgroups())
print(open("/proc/self/status").read().split("CapEff:")[1].split()[0])
for path in ("/tmp/written", "/usr/lib/imagecheck/written", "/written"):
    try:
        open(path, "w").close()
    except OSError as e:
        print(path, errno.errorcode[e.errno])
    else:
        print(path, "written")
"""


def assert_runs_contained(runner: Runner, image: str) -> None:
    """The arm64 image runs as 65532:65532, no capabilities, on a read-only root."""
    done = arm64(runner, image, "-c", WHO_AND_WRITE, command=("/usr/bin/python3",))
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == [
        "aarch64 65532 65532 [65532]",
        "0000000000000000",
        "/tmp/written EROFS",
        "/usr/lib/imagecheck/written EROFS",
        "/written EROFS",
    ]
    assert done.written == ()
