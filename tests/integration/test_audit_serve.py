"""``imagecheck audit --serve`` as a process (issue #15): the real client (``cluster/api.py``)
against the Kubernetes API stand-in, the real Distribution registry over plain HTTP, and
``/metrics`` scraped over HTTP as Prometheus would: a Deployment's series appear, a deleted
one's go at the next audit, and SIGTERM stops it with exit 0."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.support.clirun import clean_env
from tests.support.endpoint import RegistryEndpoint
from tests.support.kubeapi import KubeAPI
from tests.support.kubeapi import objects as k8s
from tests.support.kubeapi.store import resource_of
from tests.support.net import free_port
from tests.support.webhook import Metrics, parse_metrics

P = "k8s_image_availability_exporter"


def labels(name: str, image: str) -> frozenset[tuple[str, str]]:
    return frozenset({"namespace": "shop", "kind": "deployment", "name": name,
                      "container": "main", "image": image}.items())  # fmt: skip


def until(client: httpx.Client, shows: Callable[[Metrics], bool], seconds: float = 30) -> Metrics:
    """Scrape ``/metrics`` until ``shows`` holds for the page."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            metrics = parse_metrics(client.get("/metrics").text)
            if shows(metrics):
                return metrics
        time.sleep(0.1)
    pytest.fail("the metrics never showed what was expected")


def test_metrics_follow_the_cluster_and_sigterm_stops_it(
    kube_api: KubeAPI, registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    found, missing = registry_plain.ref("sample/app:1.0.0"), registry_plain.ref("sample/app:9")
    kube_api.add(k8s.deployment("web", "shop", found), k8s.deployment("api", "shop", missing))
    port = free_port()
    stderr = tmp_path / "serve.log"
    argv = [sys.executable, "-m", "imagecheck", "audit", "--serve", "--interval", "1",
            "--listen", f"127.0.0.1:{port}", "--kubeconfig", str(kube_api.kubeconfig),
            "--no-pull-secrets"]  # fmt: skip
    with stderr.open("wb") as log:
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=clean_env(tmp_path)
        )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, trust_env=False)
    try:
        web, api = labels("web", found), labels("api", missing)
        first = until(client, lambda m: (f"{P}_available", web) in m)
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200
        assert first[(f"{P}_available", web)] == 1
        assert first[(f"{P}_absent", api)] == 1
        assert first[(f"{P}_available", api)] == 0

        kube_api.store.delete(resource_of("apps/v1", "Deployment"), "shop", "api")
        later = until(client, lambda m: (f"{P}_available", api) not in m)
        assert later[(f"{P}_available", web)] == 1
        assert not [key for key in later if key[1] == api]
        assert later[(f"{P}_completed_rechecks_total", frozenset())] >= 2
        assert later[("imagecheck_audit_failures_total", frozenset())] == 0
    finally:
        client.close()
        process.send_signal(signal.SIGTERM)
        code = process.wait(15)
    assert code == 0, stderr.read_text(encoding="utf-8")
