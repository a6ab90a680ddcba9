"""Assemble the linux/arm64 root filesystem of the imagecheck image from the linux/amd64 one,
without emulating a build (issue #16, "A multi-arch image").

The runtime stage only copies files, so the arm64 root is the amd64 root (what prune.py
assembled and smoke-tested) file for file, with every machine-code file swapped for its arm64
counterpart:

* files of Debian packages (the interpreter, the shared libraries, ``lib-dynload``): from the
  arm64 ``.deb`` of the same package at the same version, which the amd64 root records in
  ``/var/lib/dpkg/status.d``; fetched with ``apt-get download`` under a private apt state
  (this machine's sources, architecture arm64; nothing of the host's apt changes) and unpacked
  with ``dpkg-deb -x`` (no maintainer scripts run);
* extension modules of the dependencies: from their ``manylinux2014_aarch64`` wheels at the
  versions of ``docker/constraints.txt`` (``pip install --platform ... --only-binary=:all:
  --target``), stripped like prune.py strips the amd64 ones.

Everything else (the standard library zip, imagecheck and its dependencies as ``.pyc``, the
CA certificates, ``/etc``) is copied as it is. Reusing the amd64 module list rather than
tracing again under emulation is sound because nothing in it depends on the CPU: the
``.pyc`` are the same bytes on both (the arm64 python3.11 packages are fetched at
the amd64 root's exact versions, the dependencies at the same pins), and neither imagecheck
nor the stdlib modules it reaches import differently by machine (the platform branches are
by OS). The arm64 root is then smoke-tested with the same runs as prune.py's, under Debian's
``qemu-aarch64-static`` (no binfmt: the interpreter is run by qemu directly).

Every ELF file in the result is checked to be AArch64: an amd64 file left behind fails the
build, not a node.
"""

# A build tool: it runs fixed system tools (apt-get, dpkg-deb, pip, strip, qemu) on paths it
# makes, never input from outside the build.
# ruff: noqa: S603

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

# Next to this file (sys.path[0] when run as a script): the amd64 build's smoke runs.
from arm64debs import fetch_debs, read_status, run, unpack_debs, write_status
from prune_cluster import cluster_runs, serve_and_stop
from prune_smoke import IMPORT_ALL, SERVE_ARGS, SMOKE, serve_exchange

APP_DIR = Path("usr/lib/imagecheck")
ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class Arch:
    """One target architecture: the names each tool knows it by."""

    debian: str  # dpkg's architecture
    triplet: str  # Debian's multiarch directory
    loader: str  # the dynamic loader, as in /lib/<loader>
    elf_machine: int  # e_machine in the ELF header
    wheel_platform: str  # pip --platform
    qemu: str  # qemu-user-static's binary
    strip: str  # binutils' cross strip


AMD64 = Arch("amd64", "x86_64-linux-gnu", "ld-linux-x86-64.so.2", 62, "", "", "strip")
ARM64 = Arch(
    "arm64",
    "aarch64-linux-gnu",
    "ld-linux-aarch64.so.1",
    183,
    "manylinux2014_aarch64",
    "qemu-aarch64-static",
    "aarch64-linux-gnu-strip",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--from-root", type=Path, required=True, help="the amd64 root")
    parser.add_argument("--out", type=Path, required=True, help="the arm64 root to write")
    parser.add_argument("--src", type=Path, required=True, help="the imagecheck checkout")
    parser.add_argument("--work", type=Path, required=True, help="downloads and unpacking")
    parser.add_argument("--extras", default="", help="the extras the amd64 image has")
    parser.add_argument("--pip", default=f"{sys.executable} -m pip", help="pip to download with")
    args = parser.parse_args()
    args.out = args.out.absolute()  # qemu -L and the interpreter's path, from any cwd
    if args.out.exists():
        raise SystemExit(f"arm64root: {args.out} exists")
    packages = read_status(args.from_root)
    debs = fetch_debs(packages, ARM64.debian, args.work / "debs")
    debroot = unpack_debs(debs, args.work / "debroot", ARM64.loader)
    wheels = install_wheels(args.src, args.extras, args.work / "wheels", args.pip.split())
    Mirror(args.from_root, args.out, debroot, wheels).run()
    write_status(args.out, args.work / "debs")
    check_machine(args.out, ARM64)
    smoke_test(args.out, args.extras)
    print(f"arm64root: {args.out}: {len(packages)} Debian packages, smoke-tested under qemu")


# -- wheels -------------------------------------------------------------------------------


def install_wheels(src: Path, extras: str, dest: Path, pip: list[str]) -> Path:
    """The image's dependencies as aarch64 wheels, at the pinned versions, unpacked in
    ``dest`` (no extension module is built here: --only-binary)."""
    requirements = dest.parent / "requirements.txt"
    requirements.write_text("\n".join(_requirements(src / "pyproject.toml", extras)) + "\n")
    run(
        [
            *pip,
            "install",
            "--quiet",
            "--no-compile",
            "--target",
            str(dest),
            "--platform",
            ARM64.wheel_platform,
            "--python-version",
            "3.11",
            "--implementation",
            "cp",
            "--abi",
            "cp311",
            "--only-binary=:all:",
            "-c",
            str(src / "docker" / "constraints.txt"),
            "-r",
            str(requirements),
        ]
    )
    return dest


def _requirements(pyproject: Path, extras: str) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    names = [e.strip() for e in extras.split(",") if e.strip()]
    optional = [d for e in names for d in project["optional-dependencies"][e]]
    return [*project["dependencies"], *optional]


# -- the mirror ---------------------------------------------------------------------------


def arm64_path(path: str) -> str:
    """The arm64 name of an amd64 path or symlink target."""
    path = path.replace(AMD64.loader, ARM64.loader)
    return path.replace(AMD64.triplet, ARM64.triplet)


@dataclass
class Mirror:
    """Copy the amd64 root to ``out`` with machine code taken from the arm64 sources."""

    source: Path
    out: Path
    debroot: Path
    wheels: Path

    def run(self) -> None:
        for dirpath, dirnames, filenames in os.walk(self.source):
            here = Path(dirpath)
            for name in sorted(dirnames + filenames):
                path = here / name
                rel = path.relative_to(self.source)
                if rel.parts[0] == "lib64" or rel.parts[:2] == ("usr", "lib64"):
                    continue  # x86-64's loader path; arm64's is /lib (below)
                self.copy_entry(path, self.out / arm64_path(str(rel)))
        loader = Path("usr/lib") / ARM64.loader
        self.copy_entry(self.debroot / loader, self.out / loader)
        self.copy_wheel_libs()

    def copy_entry(self, path: Path, dest: Path) -> None:
        if path.is_symlink():
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(arm64_path(os.readlink(path)))
        elif path.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.arm64_file(path, dest) if _is_elf(path) else path, dest)
            if dest.is_relative_to(self.out / APP_DIR) and _is_elf(dest):
                run([ARM64.strip, "--strip-unneeded", str(dest)])
        shutil.copystat(path, dest, follow_symlinks=False)
        st = path.lstat()
        os.chown(dest, st.st_uid, st.st_gid, follow_symlinks=False)

    def arm64_file(self, path: Path, dest: Path) -> Path:
        rel = dest.relative_to(self.out)
        if rel.is_relative_to(APP_DIR):
            found = self.wheels / rel.relative_to(APP_DIR)
        else:
            found = self.debroot / rel
        if not found.is_file():
            raise SystemExit(f"arm64root: no arm64 counterpart of /{path.relative_to(self.source)}")
        return found

    def copy_wheel_libs(self) -> None:
        """Libraries auditwheel vendored into a wheel (``<dist>.libs``): names differ by
        architecture, so they are taken as the aarch64 wheels have them."""
        for libs in sorted(self.wheels.glob("*.libs")):
            dest = self.out / APP_DIR / libs.name
            if not dest.exists():
                shutil.copytree(libs, dest, symlinks=True)


def check_machine(root: Path, arch: Arch) -> None:
    wrong = [
        str(p.relative_to(root))
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and _is_elf(p) and _machine(p) != arch.elf_machine
    ]
    if wrong:
        raise SystemExit(f"arm64root: not {arch.debian} code: {', '.join(wrong)}")


def _is_elf(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(4) == ELF_MAGIC


def _machine(path: Path) -> int:
    with path.open("rb") as file:
        header = file.read(20)
    return int.from_bytes(header[18:20], "little")


# -- the smoke test -----------------------------------------------------------------------


def qemu_command(root: Path) -> list[str]:
    """The image's entrypoint, run by qemu-user on this machine (libraries from ``root``)."""
    return [ARM64.qemu, "-L", str(root), str(root / "usr/bin/python3"), "-m", "imagecheck"]


def smoke_test(root: Path, extras: str = "") -> None:
    """prune.py's runs (help, version, an invalid reference, JSON, HTTPS and HTTP to a closed
    port, a credential helper as a subprocess) with the arm64 interpreter under qemu; every
    dependency extension module imported; with the extras, their runs too (``serve``;
    ``reap`` and ``audit`` against the stub Kubernetes API)."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        bindir = home / "bin"
        bindir.mkdir()
        # A host program: an arm64 helper would need binfmt to be spawned by the emulated one.
        helper = bindir / "docker-credential-imagecheck-smoke"
        helper.write_text('#!/bin/sh\ncat >/dev/null\necho \'{"Username":"u","Secret":"s"}\'\n')
        helper.chmod(0o755)
        (home / "config.json").write_text('{"credHelpers": {"127.0.0.1:9": "imagecheck-smoke"}}')
        env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": tmp, "DOCKER_CONFIG": tmp}
        python = qemu_command(root)[:-2]
        runs = [([*qemu_command(root), *argv], expected) for argv, expected in SMOKE]
        runs.append(([*python, "-c", IMPORT_ALL, *extension_modules(root)], 0))
        for command, expected in runs:
            done = subprocess.run(
                command, env=env, cwd=tmp, capture_output=True, text=True, check=False, timeout=300
            )
            if done.returncode != expected or "Traceback" in done.stderr:
                raise SystemExit(
                    f"arm64root: smoke test {command[4:]} exited {done.returncode}, "
                    f"wanted {expected}:\n{done.stdout}{done.stderr}"
                )
        if "webhook" in extras:
            argv = [*qemu_command(root), *SERVE_ARGS, "--listen"]
            serve_and_stop(argv, env, home, serve_exchange, "serve")
        if "cluster" in extras:
            cluster_runs(qemu_command(root), env, home)


def extension_modules(root: Path) -> list[str]:
    """The dependencies' extension modules in the root, by module name."""
    app = root / APP_DIR
    names = []
    for path in sorted(app.rglob("*.so")):
        rel = path.relative_to(app)
        name = ".".join([*rel.parts[:-1], rel.name.split(".", 1)[0]])
        if all(part.isidentifier() for part in name.split(".")):
            names.append(name)
    return names


if __name__ == "__main__":
    main()
