"""Which standard-library modules docker/prune.py keeps.

The union of the static import closure (``modulefinder``, which also sees imports inside
functions) of every module of imagecheck and of its dependencies, what traced runs import (the
smoke runs of ``prune_smoke.py`` and, with the extras, ``serve`` and ``prune_cluster.py``'s:
names imported by string, such as codecs), and every codec; minus ``DENY``, large packages
reachable only from code paths the command never takes; plus every kept module's parents.
"""

# A build tool: it runs the build's own interpreter on fixed arguments.
# ruff: noqa: S603

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from modulefinder import ModuleFinder
from pathlib import Path

from prune_cluster import cluster_runs
from prune_layout import DROP_DISTS, Layout, by_name_modules, dropped, package_modules
from prune_smoke import IMPORT_ALL, SMOKE, serve_run, smoke_env

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


def stdlib_modules(layout: Layout, src: Path, extras: frozenset[str]) -> set[str]:
    """The standard-library modules the image keeps (``src``: the checkout)."""
    names = static_closure(layout, src) | traced_modules(layout, src, extras) | codecs(layout)
    keep = {n for n in names if not _denied(n) and is_stdlib(layout, n)}
    # A kept module needs its parent packages' __init__ too.
    keep |= {".".join(n.split(".")[:i]) for n in keep for i in range(1, n.count(".") + 1)}
    return keep


def static_closure(layout: Layout, src: Path) -> set[str]:
    finder = ModuleFinder(
        path=[str(src), str(layout.site), *sys.path[1:]],
        excludes=[*DENY, *DROP_DISTS],
    )
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        # Every module of imagecheck, not only what "imagecheck" reaches: the cloud sources
        # are imported by name (importlib), and what they import must be kept all the same.
        roots = ["runpy", *package_modules(src), *app_modules(layout)]
        script.write("".join(f"import {name}\n" for name in roots))
    try:
        finder.run_script(script.name)
    finally:
        os.unlink(script.name)
    return set(finder.modules)


def app_modules(layout: Layout) -> Iterator[str]:
    """Every module of every installed dependency (whose imports are all kept)."""
    for path in sorted(layout.site.rglob("*.py")):
        rel = path.relative_to(layout.site).with_suffix("")
        if not dropped(rel.parts[0]) and all(p.isidentifier() for p in rel.parts):
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            if parts:
                yield ".".join(parts)


def traced_modules(layout: Layout, src: Path, extras: frozenset[str]) -> set[str]:
    runs = len(SMOKE)
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.jsonl"
        env = smoke_env(Path(tmp), sys.executable) | {"PRUNE_TRACE": str(trace)}
        env["PYTHONPATH"] = str(src)
        for argv, _ in SMOKE:
            cmd = [sys.executable, "-c", TRACE, *argv]
            subprocess.run(cmd, env=env, check=False, capture_output=True, cwd=tmp)
        # Every dependency extension is imported, so its stdlib imports are traced; and the
        # modules imagecheck imports by name
        names = [name for _, name in layout.app_extensions()] + by_name_modules(src)
        cmd = [sys.executable, "-c", IMPORT_ALL, *names]
        subprocess.run(cmd, env=env, check=False, capture_output=True, cwd=tmp)
        runs += 1
        if "webhook" in extras:
            serve_run([sys.executable, "-c", TRACE], env, Path(tmp))
            runs += 1
        if "cluster" in extras:
            runs += cluster_runs([sys.executable, "-c", TRACE], env, Path(tmp))
        lines = trace.read_text().splitlines() if trace.exists() else []
    if len(lines) != runs:
        raise SystemExit(f"prune: traced {len(lines)} of {runs} runs")
    return {name for line in lines for name in json.loads(line)}


def codecs(layout: Layout) -> set[str]:
    # Codecs are imported by name (codecs.lookup), from any charset a registry sends.
    folder = layout.stdlib / "encodings"
    return {"encodings"} | {
        f"encodings.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"
    }


def is_stdlib(layout: Layout, name: str) -> bool:
    top = name.split(".", maxsplit=1)[0]
    if top in sys.builtin_module_names:
        return False
    return (
        (layout.stdlib / top).is_dir()
        or (layout.stdlib / f"{top}.py").exists()
        or any(layout.dynload.glob(f"{top}.*.so"))
    )


def _denied(name: str) -> bool:
    return any(name == d or name.startswith(f"{d}.") for d in DENY)
