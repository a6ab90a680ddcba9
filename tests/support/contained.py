"""Run an image root filesystem the way a container runtime would, without one (issue #16).

The arm64 roots of the multi-arch images cannot go through scripts/image-run.sh (which runs a
buildah image) and are not run by a runtime here at all; run with ``qemu-aarch64-static -L
ROOT`` they would see the host's files and run as root. This runs them the way image-run.sh
runs the amd64 image, with qemu-user started from outside the root:

* private mount and PID namespaces (``unshare``), the host network;
* the root as the lower layer of an overlay whose upper layer (a tmpfs, thrown away) holds the
  ``/proc`` and ``/dev`` mount points, as a runtime's init layer does; that overlay bound
  READ-ONLY as the new root; ``/proc`` and a minimal ``/dev`` mounted in it;
* ``no_new_privs`` (``setpriv``); then chroot, the image's working directory, no supplementary
  groups, the image's GID and UID (65532: every capability is dropped with root), and the
  entrypoint with exactly the image's environment, by ``qemu`` opened BEFORE the chroot and
  executed from its file descriptor (``fexecve``: the emulator is not in the image, and
  nothing of the host is visible to the program).

This file runs twice: imported by the tests (:func:`contained_command`), and as a script inside
the namespaces (``__main__``), where it uses the standard library only. Needs root.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

DEVICES = ("null", "zero", "random", "urandom")
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def contained_command(
    root: Path,
    config: dict[str, Any],
    scratch: Path,
    args: list[str],
    qemu: str | None = None,
    mounts: dict[Path, str] | None = None,
) -> list[str]:
    """The command line that runs ``root`` as a container of the OCI image ``config`` (its
    ``config`` object: User, Env, WorkingDir, Entrypoint) with ``args`` after the entrypoint.
    ``scratch`` is an empty directory for the namespace's tmpfs; ``qemu`` the emulator to run
    the entrypoint with (found on the host's PATH), if any; ``mounts`` host paths bound
    read-only at container paths (``docker run -v HOST:PATH:ro``)."""
    emulator = shutil.which(qemu) if qemu else None
    if qemu and emulator is None:
        raise FileNotFoundError(f"{qemu} is not on PATH")
    spec = {
        "root": str(root.absolute()),
        "scratch": str(scratch.absolute()),
        "user": config["User"],
        "env": config.get("Env") or [],
        "workdir": config.get("WorkingDir") or "/",
        "argv": [*config["Entrypoint"], *args],
        "qemu": emulator,
        "mounts": {str(host.absolute()): path for host, path in (mounts or {}).items()},
    }
    # --kill-child: the container goes when unshare does (a test's terminate() stops it).
    unshare = ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private"]
    return [*unshare, "setpriv", "--no-new-privs", sys.executable, __file__, json.dumps(spec)]


# -- inside the namespaces ----------------------------------------------------------------


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def _read_only_view(root: str, scratch: Path, mounts: dict[str, str]) -> Path:
    """The root, read-only, with /proc, /dev and ``mounts`` mounted; returns where."""
    _mount("-t", "tmpfs", "-o", "mode=700", "tmpfs", str(scratch))
    upper, work, merged, view = (scratch / name for name in ("upper", "work", "merged", "view"))
    for directory in (upper, work, merged, view):
        directory.mkdir()
    _mount("-t", "overlay", "-o", f"lowerdir={root},upperdir={upper},workdir={work}",
           "overlay", str(merged))  # fmt: skip
    for name in ("proc", "dev"):
        (merged / name).mkdir(exist_ok=True)
    for host, target in mounts.items():  # mount points, in the upper layer
        point = merged / target.lstrip("/")
        point.parent.mkdir(parents=True, exist_ok=True)
        if Path(host).is_dir():
            point.mkdir(exist_ok=True)
        else:
            point.touch()
    _mount("--bind", str(merged), str(view))
    _mount("-o", "remount,bind,ro", str(view))
    _mount("-t", "proc", "-o", "nosuid,nodev,noexec", "proc", str(view / "proc"))
    _mount("-t", "tmpfs", "-o", "nosuid,noexec,mode=755,size=64k", "tmpfs", str(view / "dev"))
    for device in DEVICES:
        (view / "dev" / device).touch()
        _mount("--bind", f"/dev/{device}", str(view / "dev" / device))
    for host, target in mounts.items():
        _mount("--bind", host, str(view / target.lstrip("/")))
        _mount("-o", "remount,bind,ro", str(view / target.lstrip("/")))
    return view


def _enter(spec: dict[str, Any]) -> None:
    view = _read_only_view(spec["root"], Path(spec["scratch"]), spec["mounts"])
    qemu = os.open(spec["qemu"], os.O_RDONLY) if spec["qemu"] else None
    uid, gid = (int(part) for part in spec["user"].split(":"))
    env = dict(entry.split("=", 1) for entry in spec["env"])
    os.chroot(view)
    os.chdir(spec["workdir"])
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    # unshare --kill-child's parent-death signal is cleared by the change of credentials: set
    # it again, so that the container goes when unshare does (prctl(2), PR_SET_PDEATHSIG).
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    argv: list[str] = spec["argv"]
    if qemu is None:
        os.execve(argv[0], argv, env)
    os.execve(qemu, [Path(spec["qemu"]).name, *argv], env)


if __name__ == "__main__":
    _enter(json.loads(sys.argv[1]))
