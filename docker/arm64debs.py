"""Debian packages of another architecture for docker/arm64root.py (issue #16): which ones
the amd64 root holds (its ``/var/lib/dpkg/status.d``), the same versions for ``arch`` fetched
by ``apt-get download`` under a private apt state (this machine's sources; nothing of the
host's apt configuration or package state changes), unpacked with ``dpkg-deb -x`` (no
maintainer scripts), and their dpkg records for the new root.
"""

# A build tool: it runs fixed system tools (apt-get, dpkg-deb) on paths it makes.
# ruff: noqa: S603

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

STATUS_D = Path("var/lib/dpkg/status.d")
# Exit status when a version the amd64 root holds is gone from the mirror (Debian keeps only
# the newest of each suite): the amd64 build base is older than the mirror, and
# scripts/image-build-multiarch.sh rebuilds it once and tries again.
EXIT_VERSION_GONE = 3
_GONE = re.compile(r"^E: Version '([^']+)' for '([^']+)' was not found$", re.MULTILINE)


def read_status(root: Path) -> dict[str, str]:
    """Package -> version, from the dpkg records prune.py wrote into the amd64 root."""
    packages = {}
    for record in sorted((root / STATUS_D).iterdir()):
        fields = dict(
            line.split(": ", 1) for line in record.read_text().splitlines() if ": " in line
        )
        packages[fields["Package"]] = fields["Version"]
    return packages


def fetch_debs(packages: dict[str, str], arch: str, dest: Path) -> list[Path]:
    """The ``arch`` .debs of ``packages`` at their versions, by apt with its own state directory."""
    state = dest.parent / "apt"
    for sub in ("lists/partial", "cache/archives/partial"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    (state / "status").touch()
    dest.mkdir(parents=True, exist_ok=True)
    options = [
        f"-oAPT::Architecture={arch}",
        f"-oAPT::Architectures::={arch}",
        f"-oDir::State::Lists={state / 'lists'}",
        f"-oDir::State::Status={state / 'status'}",
        f"-oDir::Cache={state / 'cache'}",
        "-oDebug::NoLocking=1",
        "-oAPT::Sandbox::User=root",
        "-qq",
    ]
    run(["apt-get", *options, "update"])
    wanted = [f"{name}:{arch}={version}" for name, version in sorted(packages.items())]
    download = ["apt-get", *options, "download", *wanted]
    done = subprocess.run(download, cwd=dest, capture_output=True, text=True, check=False)
    gone = versions_gone(done.stderr)
    if gone:
        print(f"arm64debs: no longer on the mirror: {', '.join(gone)} (the amd64 build base "
              "is older than the mirror: rebuild it)", file=sys.stderr)  # fmt: skip
        raise SystemExit(EXIT_VERSION_GONE)
    if done.returncode != 0:
        raise SystemExit(f"arm64debs: apt-get download failed:\n{done.stderr[-3000:]}")
    debs = sorted(dest.glob("*.deb"))
    if len(debs) != len(packages):
        raise SystemExit(f"arm64debs: fetched {len(debs)} of {len(packages)} packages")
    return debs


def versions_gone(stderr: str) -> list[str]:
    """``package=version`` of each version apt says it cannot find, from its error output."""
    return [f"{package}={version}" for version, package in _GONE.findall(stderr)]


def unpack_debs(debs: list[Path], dest: Path, loader: str) -> Path:
    """``dpkg-deb -x`` each into one tree, then merge /lib into /usr/lib as bookworm's
    merged-/usr systems have it (libc6 ships /lib/aarch64-linux-gnu)."""
    dest.mkdir(parents=True)
    for deb in debs:
        run(["dpkg-deb", "-x", str(deb), str(dest)])
    merged = dest / "usr" / "lib"
    for top in ("lib", "bin"):
        unmerged = dest / top
        if unmerged.is_dir() and not unmerged.is_symlink():
            shutil.copytree(unmerged, dest / "usr" / top, symlinks=True, dirs_exist_ok=True)
            shutil.rmtree(unmerged)
    if not (merged / loader).is_symlink():
        raise SystemExit(f"arm64debs: no /lib/{loader} in the libc6 unpacked")
    return dest


def write_status(root: Path, debs: Path) -> None:
    """The fetched packages' records replace the amd64 ones (scanners read these)."""
    status = root / STATUS_D
    shutil.rmtree(status)
    status.mkdir()
    for deb in sorted(debs.glob("*.deb")):
        fields = run(["dpkg-deb", "-f", str(deb)]).splitlines()
        name = fields[0].split(": ", 1)[1]
        record = [fields[0], "Status: install ok installed", *fields[1:]]
        (status / name).write_text("\n".join(record) + "\n")


def run(cmd: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"arm64debs: {' '.join(cmd[:3])} ... failed:\n{done.stderr[-3000:]}")
    return done.stdout
