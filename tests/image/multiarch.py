"""What the multi-arch image tests share (issue #16): building a layout with
scripts/image-build-multiarch.sh, reading it, and running its arm64 root as a container would.

The arm64 root runs under qemu-aarch64-static (the build script installs it; no binfmt) the
way scripts/image-run.sh runs the amd64 image: read-only, as the image's user (65532, no
supplementary groups, no capabilities), with the image's entrypoint, environment and working
directory, seeing nothing of the host (tests/support/contained.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.contained import contained_command
from tests.support.images import SampleImages
from tests.support.tools import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "scripts" / "image-build-multiarch.sh"
PLATFORMS = ("linux/amd64", "linux/arm64")
INDEX = "application/vnd.oci.image.index.v1+json"
QEMU = "qemu-aarch64-static"
RUN_TIMEOUT = 300


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


def arm64_command(
    build: Build,
    *args: str,
    entrypoint: list[str] | None = None,
    mounts: dict[Path, str] | None = None,
) -> list[str]:
    """The arm64 image as a container: its entrypoint (or ``entrypoint``) with ``args``,
    ``mounts`` (host directory -> path in the container) bound read-only."""
    config = build.config("linux/arm64")
    if entrypoint is not None:
        config = config | {"Entrypoint": entrypoint}
    # Each run mounts its own tmpfs here, in its own mount namespace: it stays empty.
    scratch = build.layout.parent / "scratch"
    scratch.mkdir(exist_ok=True)
    return contained_command(build.arm64_root, config, scratch, list(args), QEMU, mounts)


def arm64(
    build: Build,
    *args: str,
    entrypoint: list[str] | None = None,
    mounts: dict[Path, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run :func:`arm64_command` to its end."""
    return subprocess.run(
        arm64_command(build, *args, entrypoint=entrypoint, mounts=mounts),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
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


def assert_runs_contained(build: Build) -> None:
    """The arm64 root runs as 65532:65532, no groups, no capabilities, on a read-only root."""
    done = arm64(build, "-c", WHO_AND_WRITE, entrypoint=["/usr/bin/python3"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "aarch64 65532 65532 []",
        "0000000000000000",
        "/tmp/written EROFS",
        "/usr/lib/imagecheck/written EROFS",
        "/written EROFS",
    ]
