"""The files docker/prune.py writes into the root, other than ELF libraries.

The stdlib zip (the kept modules as ``.pyc``), imagecheck and its dependencies as sourceless
``.pyc`` (certifi's bundle a link to the system one), ``/usr/bin/python3`` and the ``._pth``
file that fixes ``sys.path``, the CA certificates and OpenSSL's configuration, the system
files (``/etc/passwd``, ``group``, ``nsswitch.conf``, ``/home/nonroot``, ``/tmp``) and the
dpkg records of the Debian packages the copied files come from.
"""

# A build tool: it runs dpkg-query on paths it copied, never input from outside the build.
# ruff: noqa: S603, S607

from __future__ import annotations

import os
import py_compile
import shutil
import ssl
import subprocess
import tempfile
import zipfile
from pathlib import Path

from prune_elf import strip_extensions
from prune_layout import Layout, Root, dropped

# Files in dependency packages that only a C compiler or a type checker reads (aiohttp,
# multidict, yarl ship Cython sources and headers; attrs .pyi stubs).
BUILD_ONLY = ("*.pyx", "*.pxd", "*.pxi", "*.c", "*.h", "*.pyi")
NONROOT = 65532
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def write_stdlib_zip(root: Root, layout: Layout, modules: set[str]) -> None:
    target = root.target(layout.zip_path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name in sorted(modules):
            source, arcname = stdlib_source(layout, name)
            if source is not None:
                info = zipfile.ZipInfo(arcname, ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, compile_pyc(source))


def stdlib_source(layout: Layout, name: str) -> tuple[Path | None, str]:
    rel = Path(*name.split("."))
    package = layout.stdlib / rel / "__init__.py"
    if package.exists():
        return package, f"{rel.as_posix()}/__init__.pyc"
    module = layout.stdlib / f"{rel}.py"
    return (module if module.exists() else None), f"{rel.as_posix()}.pyc"


def copy_app(root: Root, layout: Layout, src: Path) -> None:
    target = root.target(layout.app_dir)
    shutil.copytree(
        src / "imagecheck",
        target / "imagecheck",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    for entry in sorted(layout.site.iterdir()):
        if dropped(entry.name) or entry.name == "__pycache__" or entry.suffix == ".pth":
            continue
        if entry.is_dir():
            ignore = shutil.ignore_patterns(
                "__pycache__", "*.pyc", "RECORD", "INSTALLER", *BUILD_ONLY
            )
            shutil.copytree(entry, target / entry.name, ignore=ignore)
        else:
            shutil.copy2(entry, target / entry.name)
    strip_extensions(target)
    # certifi is only the fallback when there is no system store; point it at the system
    # bundle rather than ship a second, separately aging copy of the Mozilla roots.
    cacert = target / "certifi" / "cacert.pem"
    bundle = ssl.get_default_verify_paths().openssl_cafile
    if cacert.exists() and os.path.exists(bundle):
        cacert.unlink()
        cacert.symlink_to(bundle)
    for source in sorted(target.rglob("*.py")):
        shown = layout.app_dir / source.relative_to(target)
        source.with_suffix(".pyc").write_bytes(compile_pyc(source, shown))
        source.unlink()


def link_python3(root: Root, interpreter: Path) -> Path:
    """``/usr/bin/python3``, the entrypoint's fixed name, whatever the base calls it."""
    launcher = Path("/usr/bin/python3")
    dest = root.target(launcher)
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(os.path.relpath(interpreter, launcher.parent))
    return launcher


def write_pth(root: Root, layout: Layout, interpreter: Path) -> None:
    bindir = interpreter.parent
    entries = [layout.zip_path, layout.dynload, layout.app_dir]
    lines = [os.path.relpath(root.target(p), root.target(bindir)) for p in entries]
    pth = root.target(bindir) / f"{interpreter.name}._pth"
    pth.write_text("".join(f"{line}\n" for line in lines))


def copy_certificates(root: Root) -> None:
    paths = ssl.get_default_verify_paths()
    for name in (paths.openssl_cafile, paths.openssl_capath):
        root.copy_path(Path(name))
    config = Path(paths.openssl_cafile).parent / "openssl.cnf"
    if config.exists():
        root.copy_path(config)
    capath = Path(os.path.realpath(paths.openssl_capath))
    for entry in sorted(capath.iterdir()):
        root.copy_path(entry)


def write_system_files(root: Root) -> None:
    etc = root.target(Path("/etc"))
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/sbin/nologin\n"
        f"nonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n"
    )
    (etc / "group").write_text(f"root:x:0:\nnonroot:x:{NONROOT}:\n")
    # /etc/hosts first, as Docker and Kubernetes expect; then DNS.
    (etc / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files dns\n")
    if Path("/etc/os-release").exists():
        root.copy_path(Path("/etc/os-release"))
    home = root.target(Path("/home/nonroot"))
    home.mkdir(parents=True)
    home.chmod(0o755)
    tmp = root.target(Path("/tmp"))  # noqa: S108 - the image's /tmp, not ours
    tmp.mkdir()
    tmp.chmod(0o1777)


def write_dpkg_records(root: Root) -> None:
    """One dpkg status record per Debian package a copied file came from."""
    if shutil.which("dpkg-query") is None:
        return
    # dpkg knows merged-/usr files by their old names: /lib/x86_64-linux-gnu/libc.so.6.
    paths = {str(p) for p in root.copied}
    paths |= {p.removeprefix("/usr") for p in paths if p.startswith("/usr/lib/")}
    found = subprocess.run(
        ["dpkg-query", "-S", *sorted(paths)], capture_output=True, text=True, check=False
    )
    packages: set[str] = set()
    for line in found.stdout.splitlines():
        if ": " in line and not line.startswith("diversion"):
            names = line.split(": ", 1)[0]
            packages |= {n.strip().split(":")[0] for n in names.split(",")}
    status = root.target(Path("/var/lib/dpkg/status.d"))
    status.mkdir(parents=True)
    for package in sorted(packages):
        record = subprocess.run(
            ["dpkg-query", "-s", package], capture_output=True, text=True, check=True
        ).stdout
        (status / package).write_text(record)


def compile_pyc(source: Path, shown: Path | None = None) -> bytes:
    """The .pyc bytes of ``source`` (hash-based and unchecked: reproducible, never stale,
    since the image holds no source to compare with)."""
    with tempfile.TemporaryDirectory() as tmp:
        cfile = Path(tmp) / "out.pyc"
        py_compile.compile(
            str(source),
            cfile=str(cfile),
            dfile=str(shown) if shown else None,
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        return cfile.read_bytes()
