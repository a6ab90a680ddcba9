"""The ELF files of docker/prune.py's root: extension modules, their libraries, stripping.

The kept standard-library extension modules are copied from ``lib-dynload``; every shared
library the interpreter and the extension modules load is found with ``ldd`` and copied with
its symlinks (a wheel's own ``<dist>.libs`` ship with the wheel instead); a library outside
the loader's default directories gets an ``ld.so.conf`` and an ``ldconfig`` cache. The
dependencies' extension modules are stripped of symbols nothing loads.
"""

# A build tool: it runs fixed system tools (ldd, ldconfig, strip), never input from outside.
# ruff: noqa: S603, S607

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path

from prune_layout import Layout, Root


def copy_extensions(root: Root, layout: Layout, modules: set[str]) -> list[Path]:
    """The standard library's extension modules among ``modules``, copied into ``root``."""
    copied = []
    for name in sorted(modules):
        for path in layout.dynload.glob(f"{name}.*.so"):
            copied.append(root.copy_path(path))
    return copied


def strip_extensions(target: Path) -> None:
    """Strip the dependencies' extension modules of symbols nothing loads: uvloop's, built
    with libuv and its debug symbols, is 13.6 MB as the wheel ships it and 1.6 MB stripped.
    ``strip`` (binutils) is in the build stage (Dockerfile); without it, the size test says."""
    strip = shutil.which("strip")
    if strip is None:
        print("prune: no strip (binutils): extension modules left unstripped", file=sys.stderr)
        return
    for path in sorted(target.rglob("*.so")):
        subprocess.run([strip, "--strip-unneeded", str(path)], check=True)


def copy_libraries(root: Root, layout: Layout, elves: Iterable[Path]) -> None:
    """Every shared library ``elves`` load, transitively, copied into ``root``."""
    pending, seen = list(elves), set()
    while pending:
        elf = pending.pop()
        if elf in seen:
            continue
        seen.add(elf)
        for lib in ldd(elf):
            # a wheel's own <dist>.libs are shipped with it by copy_app
            pending.append(lib if lib.is_relative_to(layout.site) else root.copy_path(lib))
    defaults = {Path("/lib"), Path("/usr/lib")}
    multiarch = sysconfig.get_config_var("MULTIARCH")
    defaults |= {d / str(multiarch) for d in list(defaults)} if multiarch else set()
    lib_dirs = {str(p.parent) for p in seen if p.name.startswith("lib")}
    extra = sorted(lib_dirs - {str(d) for d in defaults})
    if extra:  # e.g. libpython in /usr/local/lib: the loader needs a cache to find it
        root.target(Path("/etc/ld.so.conf")).write_text("\n".join(extra) + "\n")
        subprocess.run(["ldconfig", "-r", str(root.out)], check=True)


def ldd(elf: Path) -> list[Path]:
    """The shared libraries ``elf`` loads, as the loader resolves them."""
    out = subprocess.run(["ldd", str(elf)], capture_output=True, text=True, check=True).stdout
    libs = []
    for line in out.splitlines():
        match = re.search(r"(?:=> )?(/\S+) \(0x", line)
        if match:
            libs.append(Path(match.group(1)))
    return libs
