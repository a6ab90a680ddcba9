"""The ``cluster`` extra's runs for docker/prune.py: ``reap`` and ``audit`` (issue #15).

prune.py traces these runs to learn which standard-library modules the cluster commands
import by name, then repeats them with the pruned interpreter and fails the build if one
exits differently or prints a traceback. They reach every dependency the cluster image adds
for real, not only its import: lightkube reads a kubeconfig and lists through httpx2,
msgspec decodes the lists, the checks and the renderers run on what was listed, and
``audit --serve`` answers ``/readyz`` and ``/metrics`` from aiohttp and prometheus-client.

The Kubernetes API here is a stub on a loopback port (plain HTTP: the build has no CA for
it, and TLS itself is exercised by prune.py's ``check`` runs): every list is empty except
Deployments, which hold one whose image is on a closed port, so audit checks it and reports
an error (exit 4); a ServiceAccount is one without pull secrets, as every namespace's
``default`` is (audit reads the Deployment's). It answers GETs only, so a run that tried to
write would fail.
"""

# A build tool: it opens only http://127.0.0.1 URLs it makes.
# ruff: noqa: S310, S603

from __future__ import annotations

import json
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# (arguments, expected exit code); KUBECONFIG stands for the stub's kubeconfig.
KUBECONFIG = "{kubeconfig}"
RUNS = (
    (["reap", "--help"], 0),
    (["audit", "--help"], 0),
    # lightkube is imported, then the file is not there: a usage error
    (["audit", "--kubeconfig", "/nonexistent/kubeconfig"], 2),
    # the Deployment's image is on a closed port: an error verdict
    (["audit", "-o", "json", "--kubeconfig", KUBECONFIG, "--timeout", "1", "--retries", "0"], 4),
    (["audit", "--kubeconfig", KUBECONFIG, "--timeout", "1", "--retries", "0"], 4),
    # no pod waits on an image: nothing to do, nothing written
    (["reap", "--once", "--dry-run", "--kubeconfig", KUBECONFIG], 0),
)
# What `audit --serve` exports once its first audit has ended.
SERVED_METRIC = b"imagecheck_audit_last_success_timestamp_seconds"
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "smoke", "namespace": "default", "resourceVersion": "1", "uid": "1"},
    "spec": {
        "selector": {"matchLabels": {"app": "smoke"}},
        "template": {
            "metadata": {"labels": {"app": "smoke"}},
            "spec": {"containers": [{"name": "c", "image": "127.0.0.1:9/a/b:1"}]},
        },
    },
}


class _StubAPI(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        parts = path.strip("/").split("/")
        if len(parts) == 6 and parts[2] == "namespaces" and parts[4] == "serviceaccounts":
            self._answer(200, _service_account(parts[3], parts[5]))  # each namespace has one
            return
        items = [DEPLOYMENT] if path.endswith("/deployments") else []
        body = {"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}}
        self._answer(200, body | {"items": items})

    def do_POST(self) -> None:
        self._answer(405, {"kind": "Status", "status": "Failure", "code": 405})

    do_PATCH = do_PUT = do_DELETE = do_POST

    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the runs' own output is what the build shows


def _service_account(namespace: str, name: str) -> dict[str, Any]:
    """A ServiceAccount without pull secrets, as ``default`` is in every namespace."""
    meta = {"name": name, "namespace": namespace, "resourceVersion": "1", "uid": "2"}
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}


def expect_run(
    what: str, cmd: list[str], argv: list[str], expected: int, env: dict[str, str], cwd: Path
) -> None:
    """Run ``cmd`` (the command line ``argv`` of imagecheck): it must exit ``expected`` without
    a traceback, and print JSON when ``argv`` asks for it (``-o``); else the build fails. The
    smoke runs (prune_smoke.py) and the cluster runs share it."""
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cwd, check=False)
    if done.returncode != expected or "Traceback" in done.stderr:
        raise SystemExit(
            f"prune: {what} {argv} exited {done.returncode}, wanted {expected}:\n"
            f"{done.stdout}{done.stderr}"
        )
    if "-o" in argv:
        json.loads(done.stdout)


def cluster_runs(command: list[str], env: dict[str, str], cwd: Path) -> int:
    """Run :data:`RUNS` and ``audit --serve`` as ``command ARGS...``; SystemExit on the first
    that misbehaves. Returns how many processes ran (prune.py counts its trace lines)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StubAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        kubeconfig = cwd / "kubeconfig"
        kubeconfig.write_text(_kubeconfig(f"http://127.0.0.1:{server.server_address[1]}"))
        for template, expected in RUNS:
            argv = [a.replace(KUBECONFIG, str(kubeconfig)) for a in template]
            expect_run("cluster run", [*command, *argv], argv, expected, env, cwd)
        _audit_serve(command, env, cwd, kubeconfig)
    finally:
        server.shutdown()
        server.server_close()
    return len(RUNS) + 1


def _audit_serve(command: list[str], env: dict[str, str], cwd: Path, kubeconfig: Path) -> None:
    """``audit --serve`` on a free loopback port: ready, metrics, SIGTERM -> 0."""
    argv = [
        *command,
        *("audit", "--serve", "--kubeconfig", str(kubeconfig), "--timeout", "1"),
        *("--retries", "0", "--listen"),
    ]
    serve_and_stop(argv, env, cwd, _metrics, "audit --serve")


def _metrics(base: str) -> str | None:
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as answer:
        if SERVED_METRIC not in answer.read():
            return f"no {SERVED_METRIC.decode()} in /metrics"
    return None


def serve_and_stop(
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    exchange: Callable[[str], str | None],
    what: str,
) -> None:
    """Run ``argv 127.0.0.1:PORT`` (a free port), wait for ``/readyz``, run ``exchange`` on
    its base URL (it returns what went wrong, or None), SIGTERM it: SystemExit unless all is
    well and it exits 0 with no traceback. prune.py's ``serve`` run uses it too."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [*argv, f"127.0.0.1:{port}"], env=env, cwd=cwd, stdout=out, stderr=out
        )
        try:
            problem = _wait_ready(proc, base) or exchange(base)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        logs = out.read().decode(errors="replace")
    if problem or code != 0 or "Traceback" in logs:
        raise SystemExit(f"prune: {what} smoke test ({problem or 'exit ' + str(code)}):\n{logs}")


def _wait_ready(proc: subprocess.Popen[bytes], base: str) -> str | None:
    deadline = time.monotonic() + 30
    while proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    return None
        except OSError:
            pass
        if time.monotonic() > deadline:
            return "not ready in 30 s"
        time.sleep(0.2)
    return f"exited {proc.returncode} before it was ready"


def _kubeconfig(server: str) -> str:
    # JSON is YAML: no YAML writer needed.
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stub", "cluster": {"server": server}}],
            "users": [{"name": "smoke", "user": {"token": "smoke"}}],
            "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "smoke"}}],
            "current-context": "stub",
        }
    )
