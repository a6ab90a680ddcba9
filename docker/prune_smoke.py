"""The runs docker/prune.py traces and then repeats with the pruned interpreter (smoke test).

``SMOKE`` is every path of the command that imports lazily (help, version, an invalid
reference, JSON and verbose output, HTTPS then HTTP to a closed loopback port, a host name, a
credential helper run as a subprocess), each with its expected exit code. ``IMPORT_ALL``
imports every dependency extension module, so one that cannot load with the image's
libraries fails the build instead of falling back to pure Python without a word, and the
modules imagecheck imports by name (``prune_layout.BY_NAME``: the cloud credential sources,
which no run reaches without a cloud), so one whose stdlib import was pruned fails too. With the
``webhook`` extra, ``serve`` too: ready, one review, ``/metrics``, SIGTERM; the ``cluster``
extra's runs are ``prune_cluster.py``'s. arm64root.py repeats these runs under qemu.
"""

# A build tool: it runs the interpreter it assembles, never input from outside the build; it
# opens only http://127.0.0.1 URLs it makes.
# ruff: noqa: S310, S603

from __future__ import annotations

import json
import subprocess
import tempfile
import urllib.request
from pathlib import Path

# Next to this file (sys.path[0] when run as a script): the cluster extra's runs.
from prune_cluster import cluster_runs, expect_run, serve_and_stop
from prune_layout import Layout, by_name_modules

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


def smoke_test(layout: Layout, python: str, extras: frozenset[str], src: Path) -> None:
    """Run the command with the pruned interpreter ``python`` and stdlib (the build's
    libraries): every run exits as expected, without a traceback; and import what imagecheck
    (the checkout ``src``) imports by name, the cloud sources, which no run above reaches."""
    with tempfile.TemporaryDirectory() as tmp:
        for argv, expected in SMOKE:
            env = smoke_env(Path(tmp), python)
            cmd = [python, "-m", "imagecheck", *argv]
            expect_run("smoke test", cmd, list(argv), expected, env, Path(tmp))
        # And must load with the pruned runtime: a missing library (or a pruned stdlib
        # module) fails the build
        names = [name for _, name in layout.app_extensions()] + by_name_modules(src)
        env = smoke_env(Path(tmp), python)
        done = subprocess.run(
            [python, "-c", IMPORT_ALL, *names],
            env=env,
            capture_output=True,
            text=True,
            cwd=tmp,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"prune: modules do not load:\n{done.stderr}")
        if "webhook" in extras:
            serve_run([python, "-m", "imagecheck"], smoke_env(Path(tmp), python), Path(tmp))
        if "cluster" in extras:
            env = smoke_env(Path(tmp), python)
            cluster_runs([python, "-m", "imagecheck"], env, Path(tmp))


def serve_run(command: list[str], env: dict[str, str], cwd: Path) -> None:
    """``serve`` on a free loopback port: ready, one review, metrics, SIGTERM -> 0."""
    argv = [*command, *SERVE_ARGS, "--listen"]
    serve_and_stop(argv, env, cwd, serve_exchange, "serve")


def smoke_env(tmp: Path, python: str) -> dict[str, str]:
    """A credential helper on PATH (a Python script) named by a config.json."""
    bindir = tmp / "bin"
    helper = bindir / "docker-credential-imagecheck-smoke"
    if not helper.exists():
        bindir.mkdir()
        helper.write_text(HELPER.format(python=python))
        helper.chmod(0o755)
        (tmp / "config.json").write_text(HELPER_CONFIG)
    return {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp), "DOCKER_CONFIG": str(tmp)}


def serve_exchange(base: str) -> str | None:
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
