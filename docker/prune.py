"""Assemble the runtime root filesystem of the imagecheck image from the build stage.

Runs in docker/Dockerfile's build stage with the venv's interpreter (a Debian python3.11)
and writes a complete root filesystem to ``--out``:

* the interpreter binary and the shared libraries it and the kept extension modules load
  (as ``ldd`` resolves them, symlinks kept as symlinks);
* the standard library as ``<prefix>/lib/python311.zip``: only the modules imagecheck, its
  dependencies and ``python -m`` can import, compiled to ``.pyc``;
* with ``--extras`` (the optional extras the venv was installed with, e.g. ``webhook``): the
  shared libraries every extension module of the dependencies loads, too (frozenlist needs
  libstdc++; most need libpthread), each extension imported by the smoke test, since a
  package that falls back to pure Python on an ImportError would hide a missing library;
* imagecheck and its installed dependencies (without pip and setuptools) as sourceless
  ``.pyc`` in ``<prefix>/lib/imagecheck``;
* a ``._pth`` file next to the interpreter naming exactly those three places on ``sys.path``;
  its presence also means isolated mode and no ``site`` (so no ``PYTHON*`` variable, user
  site-packages or working directory can change what runs);
* the CA certificates (the bundle, the hashed directory OpenSSL and imagecheck look up, the
  files they link to) and OpenSSL's configuration;
* ``/etc/passwd`` and ``/etc/group`` with ``nonroot`` (65532), ``/etc/nsswitch.conf``,
  ``/home/nonroot``, ``/tmp``, and the dpkg records of the Debian packages the files come from
  (``/var/lib/dpkg/status.d``, as distroless does) so image scanners see them.

Which standard-library modules: the static import closure (``modulefinder``, which also sees
imports inside functions) of every module of imagecheck (the cloud credential sources are
imported by name, which no analysis follows) and of its dependencies, plus what a traced run
imports (names imported by string, such as codecs), plus every codec, minus
a short list of large modules that are reachable only from code paths the command never
takes (``DENY``). The result is then smoke-tested with the pruned interpreter itself (the
modules imported by name included), so a module pruned by mistake fails the build instead of
a check. With the ``webhook`` extra the
traced and smoke-tested runs also include ``serve`` (plain HTTP on a loopback port: readyz,
one review, metrics, SIGTERM); with the ``cluster`` extra, ``reap`` and ``audit`` against a
stub Kubernetes API, ``audit --serve`` included (``prune_cluster.py``, next to this file).

The steps live next to this file: ``prune_trace.py`` (which stdlib modules),
``prune_files.py`` (the stdlib zip, the app, ``._pth``, certificates, system files, dpkg
records), ``prune_elf.py`` (extension modules, ``ldd``, ``strip``), ``prune_smoke.py`` (the
runs traced and smoke-tested), ``prune_layout.py`` (the paths and the root they share).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

# Next to this file (sys.path[0] when run as a script): the steps.
from prune_elf import copy_extensions, copy_libraries
from prune_files import (
    copy_app,
    copy_certificates,
    link_python3,
    write_dpkg_records,
    write_pth,
    write_stdlib_zip,
    write_system_files,
)
from prune_layout import Layout, Root
from prune_smoke import smoke_test
from prune_trace import stdlib_modules


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, required=True, help="the checkout (has imagecheck/)")
    parser.add_argument("--out", type=Path, required=True, help="root filesystem to write")
    parser.add_argument(
        "--extras",
        default="",
        help="the optional extras the venv was installed with, comma-separated (webhook, cluster)",
    )
    args = parser.parse_args()
    extras = frozenset(e.strip() for e in args.extras.split(",") if e.strip())
    build(args.src, args.out, extras)


def build(src: Path, out: Path, extras: frozenset[str] = frozenset()) -> None:
    """Write the runtime root filesystem to ``out`` from the checkout ``src``, smoke-test it."""
    layout, root = Layout.current(), Root(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    modules = stdlib_modules(layout, src, extras)
    write_stdlib_zip(root, layout, modules)
    extensions = copy_extensions(root, layout, modules)
    copy_app(root, layout, src)
    interpreter = root.copy_path(layout.python)
    launcher = link_python3(root, interpreter)
    write_pth(root, layout, interpreter)
    # The libraries every C extension loads, the dependencies' too (PyYAML's _yaml needs
    # libpthread): an extension that cannot load falls back to slow pure Python silently.
    app_extensions = [path for path, _ in layout.app_extensions()]
    copy_libraries(root, layout, [interpreter, *extensions, *app_extensions])
    copy_certificates(root)
    write_system_files(root)
    write_dpkg_records(root)
    smoke_test(layout, str(root.target(launcher)), extras, src)
    print(f"prune: {len(modules)} stdlib modules, {root.size() / 1e6:.1f} MB in {out}")


if __name__ == "__main__":
    main()
