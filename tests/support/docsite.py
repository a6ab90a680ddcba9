"""The documentation site as a reader gets it: built by ``mkdocs build --strict`` from
mkdocs.yml, served over HTTP on 127.0.0.1, opened in Debian's chromium.

The browser is driven by playwright over CDP with ``executable_path`` set: playwright's own
browser downloads are never used. Chromium runs with a fresh profile and without the traffic
a browser makes on its own (updates, sync, safe browsing), so that what the page loads is all
the network sees.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.tools import ROOT, system_tool

CONFIG = ROOT / "mkdocs.yml"
BUILD_TIMEOUT = 300.0
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # root in CI, in a container: the sandbox needs user namespaces
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def build(out: Path, config: Path = CONFIG) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``out``; graphviz's dot (the diagrams) is
    installed first when missing."""
    system_tool("dot")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)],
        capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's notice, not a warning
    )  # fmt: skip


def copy_sources(into: Path) -> Path:
    """A copy of what the build reads (mkdocs.yml, docs/, its hooks, the changelog), for a
    test to break; the copy's mkdocs.yml."""
    shutil.copy(CONFIG, into / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", into / "docs")
    (into / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "docs_hooks.py", into / "scripts" / "docs_hooks.py")
    shutil.copy(ROOT / "CHANGELOG.md", into / "CHANGELOG.md")
    return into / "mkdocs.yml"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve(site: Path) -> Iterator[str]:
    """``site`` served on 127.0.0.1 (a port of its own): the base URL, ending in ``/``."""
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def pages(site: Path) -> list[str]:
    """Every page of the built site, as a path under its root (``reference/cli/``)."""
    found = [p.parent.relative_to(site).as_posix() for p in site.rglob("index.html")]
    return sorted("" if p == "." else f"{p}/" for p in found)
