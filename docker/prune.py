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
imports inside functions) of imagecheck and every module of its dependencies, plus what a
traced run imports (names imported by string, such as codecs), plus every codec, minus
a short list of large modules that are reachable only from code paths the command never
takes (``DENY``). The result is then smoke-tested with the pruned interpreter itself, so a
module pruned by mistake fails the build instead of a check. With the ``webhook`` extra the
traced and smoke-tested runs also include ``serve`` (plain HTTP on a loopback port: readyz,
one review, metrics, SIGTERM); with the ``cluster`` extra, ``reap`` and ``audit`` against a
stub Kubernetes API, ``audit --serve`` included (``prune_cluster.py``, next to this file).
"""

# A build tool: it runs fixed system tools (ldd, ldconfig, dpkg-query) and the interpreter it
# assembles, never input from outside the build; it opens only http://127.0.0.1 URLs it makes.
# ruff: noqa: S310, S603, S607

from __future__ import annotations

import argparse
import json
import os
import py_compile
import re
import shutil
import ssl
import subprocess
import sys
import sysconfig
import tempfile
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator
from modulefinder import ModuleFinder
from pathlib import Path

# Next to this file (sys.path[0] when run as a script): the cluster extra's runs.
from prune_cluster import cluster_runs, serve_and_stop

# Never in the image: tooling the build needed and the command does not.
DROP_DISTS = ("pip", "setuptools", "wheel", "_distutils_hack", "pkg_resources")
# Standard-library packages reachable by static analysis only through code the command never
# runs (anyio's test plugin, click.testing, httpx's optional CLI, doctest via pdb, ...).
DENY = (
    "asyncio.windows_events",
    "asyncio.windows_utils",
    "concurrent.futures.process",
    "ctypes",
    "curses",
    "dbm",
    "distutils",
    "doctest",
    "ensurepip",
    "idlelib",
    "lib2to3",
    "multiprocessing",
    "pdb",
    "pydoc",
    "pydoc_data",
    "sqlite3",
    "test",
    "tkinter",
    "turtle",
    "turtledemo",
    "unittest",
    "venv",
    "xmlrpc",
)
# Files in dependency packages that only a C compiler or a type checker reads (aiohttp,
# multidict, yarl ship Cython sources and headers; attrs .pyi stubs).
BUILD_ONLY = ("*.pyx", "*.pxd", "*.pxi", "*.c", "*.h", "*.pyi")
NONROOT = 65532
ZIP_DATE = (1980, 1, 1, 0, 0, 0)

# What the traced run and the smoke test execute: every path that imports lazily (help,
# version, an invalid reference, JSON and verbose output, HTTPS then HTTP to a closed
# loopback port, a credential helper run as a subprocess).
SMOKE = (
    (["--version"], 0),
    (["check", "--help"], 0),
    (["check", "-o", "json", "Not/Valid"], 2),
    (["check", "-v", "-o", "json", "--timeout", "1", "--retries", "0", "127.0.0.1:9/a/b:1"], 4),
    (["check", "--timeout", "1", "--retries", "0", "127.0.0.1:9/a/b:1"], 4),
    # a host name: asyncio resolves it in a thread pool (concurrent.futures.thread)
    (["check", "--timeout", "1", "--retries", "0", "localhost:9/a/b:1"], 4),
)
# The webhook extra's run: serve on a free loopback port, /readyz, one review of a pod whose
# image is on a closed port (--on-error pass: allowed, with a warning), /metrics, SIGTERM.
SERVE_ARGS = ("serve", "--insecure-http", "--timeout", "1", "--retries", "0")
SERVE_REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "prune-smoke",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default",
        "operation": "CREATE",
        "object": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "smoke", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "127.0.0.1:9/a/b:1"}]},
        },
    },
}
# Imports every extension module named on the command line (the pruned interpreter's check
# that each loads with the image's libraries and standard library).
IMPORT_ALL = (
    "import importlib, json, os, sys\n"
    "for name in sys.argv[1:]:\n"
    "    importlib.import_module(name)\n"
    "if os.environ.get('PRUNE_TRACE'):\n"
    "    with open(os.environ['PRUNE_TRACE'], 'a') as f:\n"
    "        f.write(json.dumps(sorted(sys.modules)) + '\\n')\n"
)
HELPER_CONFIG = '{"credHelpers": {"127.0.0.1:9": "imagecheck-smoke"}}'
HELPER = (
    "#!{python}\nimport json, sys\nsys.stdin.read()\n"
    'print(json.dumps({{"Username": "u", "Secret": "s"}}))\n'
)
TRACE = (
    "import atexit, json, os, runpy, sys\n"
    "def dump():\n"
    "    with open(os.environ['PRUNE_TRACE'], 'a') as f:\n"
    "        f.write(json.dumps(sorted(sys.modules)) + '\\n')\n"
    "atexit.register(dump)\n"
    "_exit = os._exit\n"  # the CLI ends with os._exit (no teardown), which skips atexit
    "def exit_after_dump(code):\n"
    "    dump()\n"
    "    _exit(code)\n"
    "os._exit = exit_after_dump\n"
    "sys.argv[0] = 'imagecheck'\n"
    "runpy.run_module('imagecheck', run_name='__main__', alter_sys=True)\n"
)


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
    Runtime(args.src, args.out, extras).build()


class Runtime:
    def __init__(self, src: Path, out: Path, extras: frozenset[str] = frozenset()) -> None:
        self.src = src
        self.out = out
        self.extras = extras
        self.prefix = Path(sys.base_prefix)
        self.stdlib = Path(sysconfig.get_path("stdlib"))
        self.dynload = Path(str(sysconfig.get_config_var("DESTSHARED")))
        self.site = Path(sysconfig.get_path("purelib"))
        self.version = f"{sys.version_info.major}{sys.version_info.minor}"
        self.python = Path(getattr(sys, "_base_executable", sys.executable))
        self.libdir = self.prefix / "lib"
        self.app_dir = self.libdir / "imagecheck"
        self.zip_path = self.libdir / f"python{self.version}.zip"
        self.copied: set[Path] = set()

    def build(self) -> None:
        if self.out.exists():
            shutil.rmtree(self.out)
        self.out.mkdir(parents=True)
        modules = self.stdlib_modules()
        self.write_stdlib_zip(modules)
        extensions = self.copy_extensions(modules)
        self.copy_app()
        interpreter = self.copy_path(self.python)
        launcher = self.link_python3(interpreter)
        self.write_pth(interpreter)
        # The libraries every C extension loads, the dependencies' too (PyYAML's _yaml needs
        # libpthread): an extension that cannot load falls back to slow pure Python silently.
        app_extensions = [path for path, _ in self.app_extensions()]
        self.copy_libraries([interpreter, *extensions, *app_extensions])
        self.copy_certificates()
        self.write_system_files()
        self.write_dpkg_records()
        self.smoke_test(launcher)
        print(f"prune: {len(modules)} stdlib modules, {self.size() / 1e6:.1f} MB in {self.out}")

    # -- which modules -------------------------------------------------------------------

    def stdlib_modules(self) -> set[str]:
        names = self.static_closure() | self.traced_modules() | self.codecs()
        keep = {n for n in names if not _denied(n) and self.is_stdlib(n)}
        # A kept module needs its parent packages' __init__ too.
        keep |= {".".join(n.split(".")[:i]) for n in keep for i in range(1, n.count(".") + 1)}
        return keep

    def static_closure(self) -> set[str]:
        finder = ModuleFinder(
            path=[str(self.src), str(self.site), *sys.path[1:]],
            excludes=[*DENY, *DROP_DISTS],
        )
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
            roots = ["runpy", "imagecheck", "imagecheck.__main__", *self.app_modules()]
            script.write("".join(f"import {name}\n" for name in roots))
        try:
            finder.run_script(script.name)
        finally:
            os.unlink(script.name)
        return set(finder.modules)

    def app_modules(self) -> Iterator[str]:
        """Every module of every installed dependency (whose imports are all kept)."""
        for path in sorted(self.site.rglob("*.py")):
            rel = path.relative_to(self.site).with_suffix("")
            if not _dropped(rel.parts[0]) and all(p.isidentifier() for p in rel.parts):
                parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
                if parts:
                    yield ".".join(parts)

    def app_extensions(self) -> list[tuple[Path, str]]:
        """The dependencies' extension modules: (file, module name)."""
        found = []
        for path in sorted(self.site.rglob("*.so")):
            rel = path.relative_to(self.site)
            if not _dropped(rel.parts[0]):
                name = ".".join([*rel.parts[:-1], rel.name.split(".", 1)[0]])
                if all(p.isidentifier() for p in name.split(".")):
                    found.append((path, name))
        return found

    def traced_modules(self) -> set[str]:
        runs = len(SMOKE)
        with tempfile.TemporaryDirectory() as tmp:
            trace = Path(tmp) / "trace.jsonl"
            env = self.smoke_env(Path(tmp), sys.executable) | {"PRUNE_TRACE": str(trace)}
            env["PYTHONPATH"] = str(self.src)
            for argv, _ in SMOKE:
                cmd = [sys.executable, "-c", TRACE, *argv]
                subprocess.run(cmd, env=env, check=False, capture_output=True, cwd=tmp)
            # Every dependency extension is imported, so its stdlib imports are traced
            names = [name for _, name in self.app_extensions()]
            cmd = [sys.executable, "-c", IMPORT_ALL, *names]
            subprocess.run(cmd, env=env, check=False, capture_output=True, cwd=tmp)
            runs += 1
            if "webhook" in self.extras:
                self.serve_run([sys.executable, "-c", TRACE], env, Path(tmp))
                runs += 1
            if "cluster" in self.extras:
                runs += cluster_runs([sys.executable, "-c", TRACE], env, Path(tmp))
            lines = trace.read_text().splitlines() if trace.exists() else []
        if len(lines) != runs:
            raise SystemExit(f"prune: traced {len(lines)} of {runs} runs")
        return {name for line in lines for name in json.loads(line)}

    def codecs(self) -> set[str]:
        # Codecs are imported by name (codecs.lookup), from any charset a registry sends.
        folder = self.stdlib / "encodings"
        return {"encodings"} | {
            f"encodings.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"
        }

    def is_stdlib(self, name: str) -> bool:
        top = name.split(".", maxsplit=1)[0]
        if top in sys.builtin_module_names:
            return False
        return (
            (self.stdlib / top).is_dir()
            or (self.stdlib / f"{top}.py").exists()
            or any(self.dynload.glob(f"{top}.*.so"))
        )

    # -- writing the runtime -------------------------------------------------------------

    def write_stdlib_zip(self, modules: set[str]) -> None:
        target = self.target(self.zip_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
            for name in sorted(modules):
                source, arcname = self.stdlib_source(name)
                if source is not None:
                    info = zipfile.ZipInfo(arcname, ZIP_DATE)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    archive.writestr(info, _compile(source))

    def stdlib_source(self, name: str) -> tuple[Path | None, str]:
        rel = Path(*name.split("."))
        package = self.stdlib / rel / "__init__.py"
        if package.exists():
            return package, f"{rel.as_posix()}/__init__.pyc"
        module = self.stdlib / f"{rel}.py"
        return (module if module.exists() else None), f"{rel.as_posix()}.pyc"

    def copy_extensions(self, modules: set[str]) -> list[Path]:
        copied = []
        for name in sorted(modules):
            for path in self.dynload.glob(f"{name}.*.so"):
                copied.append(self.copy_path(path))
        return copied

    def strip_extensions(self, target: Path) -> None:
        """Strip the dependencies' extension modules of symbols nothing loads: uvloop's, built
        with libuv and its debug symbols, is 13.6 MB as the wheel ships it and 1.6 MB stripped.
        ``strip`` (binutils) is in the build stage (Dockerfile); without it, the size test says."""
        strip = shutil.which("strip")
        if strip is None:
            print("prune: no strip (binutils): extension modules left unstripped", file=sys.stderr)
            return
        for path in sorted(target.rglob("*.so")):
            subprocess.run([strip, "--strip-unneeded", str(path)], check=True)

    def copy_app(self) -> None:
        target = self.target(self.app_dir)
        shutil.copytree(
            self.src / "imagecheck",
            target / "imagecheck",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        for entry in sorted(self.site.iterdir()):
            if _dropped(entry.name) or entry.name == "__pycache__" or entry.suffix == ".pth":
                continue
            if entry.is_dir():
                ignore = shutil.ignore_patterns(
                    "__pycache__", "*.pyc", "RECORD", "INSTALLER", *BUILD_ONLY
                )
                shutil.copytree(entry, target / entry.name, ignore=ignore)
            else:
                shutil.copy2(entry, target / entry.name)
        self.strip_extensions(target)
        # certifi is only the fallback when there is no system store; point it at the system
        # bundle rather than ship a second, separately aging copy of the Mozilla roots.
        cacert = target / "certifi" / "cacert.pem"
        bundle = ssl.get_default_verify_paths().openssl_cafile
        if cacert.exists() and os.path.exists(bundle):
            cacert.unlink()
            cacert.symlink_to(bundle)
        for source in sorted(target.rglob("*.py")):
            shown = self.app_dir / source.relative_to(target)
            source.with_suffix(".pyc").write_bytes(_compile(source, shown))
            source.unlink()

    def link_python3(self, interpreter: Path) -> Path:
        """``/usr/bin/python3``, the entrypoint's fixed name, whatever the base calls it."""
        launcher = Path("/usr/bin/python3")
        dest = self.target(launcher)
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(os.path.relpath(interpreter, launcher.parent))
        return launcher

    def write_pth(self, interpreter: Path) -> None:
        bindir = interpreter.parent
        entries = [self.zip_path, self.dynload, self.app_dir]
        lines = [os.path.relpath(self.target(p), self.target(bindir)) for p in entries]
        pth = self.target(bindir) / f"{interpreter.name}._pth"
        pth.write_text("".join(f"{line}\n" for line in lines))

    def copy_libraries(self, elves: Iterable[Path]) -> None:
        pending, seen = list(elves), set()
        while pending:
            elf = pending.pop()
            if elf in seen:
                continue
            seen.add(elf)
            for lib in _ldd(elf):
                # a wheel's own <dist>.libs are shipped with it by copy_app
                pending.append(lib if lib.is_relative_to(self.site) else self.copy_path(lib))
        defaults = {Path("/lib"), Path("/usr/lib")}
        multiarch = sysconfig.get_config_var("MULTIARCH")
        defaults |= {d / str(multiarch) for d in list(defaults)} if multiarch else set()
        lib_dirs = {str(p.parent) for p in seen if p.name.startswith("lib")}
        extra = sorted(lib_dirs - {str(d) for d in defaults})
        if extra:  # e.g. libpython in /usr/local/lib: the loader needs a cache to find it
            self.target(Path("/etc/ld.so.conf")).write_text("\n".join(extra) + "\n")
            subprocess.run(["ldconfig", "-r", str(self.out)], check=True)

    def copy_certificates(self) -> None:
        paths = ssl.get_default_verify_paths()
        for name in (paths.openssl_cafile, paths.openssl_capath):
            self.copy_path(Path(name))
        config = Path(paths.openssl_cafile).parent / "openssl.cnf"
        if config.exists():
            self.copy_path(config)
        capath = Path(os.path.realpath(paths.openssl_capath))
        for entry in sorted(capath.iterdir()):
            self.copy_path(entry)

    def write_system_files(self) -> None:
        etc = self.target(Path("/etc"))
        etc.mkdir(exist_ok=True)
        (etc / "passwd").write_text(
            "root:x:0:0:root:/root:/sbin/nologin\n"
            f"nonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n"
        )
        (etc / "group").write_text(f"root:x:0:\nnonroot:x:{NONROOT}:\n")
        # /etc/hosts first, as Docker and Kubernetes expect; then DNS.
        (etc / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files dns\n")
        if Path("/etc/os-release").exists():
            self.copy_path(Path("/etc/os-release"))
        home = self.target(Path("/home/nonroot"))
        home.mkdir(parents=True)
        home.chmod(0o755)
        tmp = self.target(Path("/tmp"))  # noqa: S108 - the image's /tmp, not ours
        tmp.mkdir()
        tmp.chmod(0o1777)

    def write_dpkg_records(self) -> None:
        """One dpkg status record per Debian package a copied file came from."""
        if shutil.which("dpkg-query") is None:
            return
        # dpkg knows merged-/usr files by their old names: /lib/x86_64-linux-gnu/libc.so.6.
        paths = {str(p) for p in self.copied}
        paths |= {p.removeprefix("/usr") for p in paths if p.startswith("/usr/lib/")}
        found = subprocess.run(
            ["dpkg-query", "-S", *sorted(paths)], capture_output=True, text=True, check=False
        )
        packages: set[str] = set()
        for line in found.stdout.splitlines():
            if ": " in line and not line.startswith("diversion"):
                names = line.split(": ", 1)[0]
                packages |= {n.strip().split(":")[0] for n in names.split(",")}
        status = self.target(Path("/var/lib/dpkg/status.d"))
        status.mkdir(parents=True)
        for package in sorted(packages):
            record = subprocess.run(
                ["dpkg-query", "-s", package], capture_output=True, text=True, check=True
            ).stdout
            (status / package).write_text(record)

    def smoke_test(self, interpreter: Path) -> None:
        """Run the command with the pruned interpreter and stdlib (the build's libraries)."""
        python = str(self.target(interpreter))
        with tempfile.TemporaryDirectory() as tmp:
            for argv, expected in SMOKE:
                env = self.smoke_env(Path(tmp), python)
                cmd = [python, "-m", "imagecheck", *argv]
                done = subprocess.run(
                    cmd, env=env, capture_output=True, text=True, cwd=tmp, check=False
                )
                if done.returncode != expected or "Traceback" in done.stderr:
                    raise SystemExit(
                        f"prune: smoke test {argv} exited {done.returncode}, wanted {expected}:\n"
                        f"{done.stdout}{done.stderr}"
                    )
                if "-o" in argv:
                    json.loads(done.stdout)
            # And must load with the pruned runtime: a missing library fails the build
            names = [name for _, name in self.app_extensions()]
            env = self.smoke_env(Path(tmp), python)
            done = subprocess.run(
                [python, "-c", IMPORT_ALL, *names],
                env=env,
                capture_output=True,
                text=True,
                cwd=tmp,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"prune: extension modules do not load:\n{done.stderr}")
            if "webhook" in self.extras:
                self.serve_run(
                    [python, "-m", "imagecheck"], self.smoke_env(Path(tmp), python), Path(tmp)
                )
            if "cluster" in self.extras:
                env = self.smoke_env(Path(tmp), python)
                cluster_runs([python, "-m", "imagecheck"], env, Path(tmp))

    def serve_run(self, command: list[str], env: dict[str, str], cwd: Path) -> None:
        """``serve`` on a free loopback port: ready, one review, metrics, SIGTERM -> 0."""
        argv = [*command, *SERVE_ARGS, "--listen"]
        serve_and_stop(argv, env, cwd, _serve_exchange, "serve")

    def smoke_env(self, tmp: Path, python: str) -> dict[str, str]:
        """A credential helper on PATH (a Python script) named by a config.json."""
        bindir = tmp / "bin"
        helper = bindir / "docker-credential-imagecheck-smoke"
        if not helper.exists():
            bindir.mkdir()
            helper.write_text(HELPER.format(python=python))
            helper.chmod(0o755)
            (tmp / "config.json").write_text(HELPER_CONFIG)
        return {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp), "DOCKER_CONFIG": str(tmp)}

    # -- helpers -------------------------------------------------------------------------

    def target(self, path: Path) -> Path:
        return self.out / path.relative_to("/")

    def copy_path(self, path: Path) -> Path:
        """Copy ``path`` into the root, recreating every symlink on the way (``/lib`` ->
        ``usr/lib``, ``libz.so.1`` -> ``libz.so.1.2.13``); return the real path."""
        current = Path("/")
        for part in path.absolute().parts[1:]:
            current = current / part
            dest = self.target(current)
            if current.is_symlink():
                link = os.readlink(current)
                if not dest.is_symlink():
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.symlink_to(link)
                resolved = self.copy_path((current.parent / link).resolve(strict=False))
                current = resolved
            elif current.is_file() and not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(current, dest)
                self.copied.add(current)
        return current

    def size(self) -> int:
        return sum(p.lstat().st_size for p in self.out.rglob("*"))


def _compile(source: Path, shown: Path | None = None) -> bytes:
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


def _serve_exchange(base: str) -> str | None:
    """What went wrong talking to a ready ``serve`` (None: reviewed, counted)."""
    request = urllib.request.Request(
        f"{base}/validate",
        data=json.dumps(SERVE_REVIEW).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        review = json.loads(answer.read())
    if review.get("response", {}).get("uid") != "prune-smoke":
        return f"unexpected review answer {review}"
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as answer:
        if b"imagecheck_reviews_total" not in answer.read():
            return "no imagecheck_reviews_total in /metrics"
    return None


def _ldd(elf: Path) -> list[Path]:
    out = subprocess.run(["ldd", str(elf)], capture_output=True, text=True, check=True).stdout
    libs = []
    for line in out.splitlines():
        match = re.search(r"(?:=> )?(/\S+) \(0x", line)
        if match:
            libs.append(Path(match.group(1)))
    return libs


def _denied(name: str) -> bool:
    return any(name == d or name.startswith(f"{d}.") for d in DENY)


def _dropped(name: str) -> bool:
    base = re.split(r"[-.]", name, maxsplit=1)[0]
    return base in DROP_DISTS or name.startswith("distutils-precedence")


if __name__ == "__main__":
    main()
