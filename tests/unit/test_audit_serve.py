"""``imagecheck audit --serve`` (issue #15): the metrics after each audit (series appear and
disappear with the workloads), a failed audit (metrics kept, failure counted), the cap on
series, the schedule, and the HTTP endpoints. The cluster is ``FakeCluster``, the registry
respx, the server aiohttp's test server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
import respx
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from imagecheck.authn import AnonymousKeychain
from imagecheck.cli import cli
from imagecheck.cluster import Auditor, AuditReport, Selector, audit
from imagecheck.cluster._exporter import AuditMetrics
from imagecheck.cluster._model import DEPLOYMENT, STATEFULSET
from imagecheck.cluster._serve import app
from imagecheck.registry import ClientOptions
from tests.support.aio import sync
from tests.support.fakecluster import FakeCluster

DIGEST = "sha256:" + "ab" * 32
P = "k8s_image_availability_exporter"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def workload(name: str, *images: str, ns: str = "shop") -> Any:
    spec = {"containers": [{"name": f"c{i}", "image": im} for i, im in enumerate(images)]}
    return {"metadata": {"name": name, "namespace": ns, "uid": name},
            "spec": {"template": {"spec": spec}}}  # fmt: skip


def samples(metrics: AuditMetrics) -> Samples:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def use(kind: str, name: str, image: str, container: str = "c0") -> frozenset[tuple[str, str]]:
    labels = {"namespace": "shop", "kind": kind, "name": name, "container": container}
    return frozenset({**labels, "image": image}.items())


def availability(found: Samples) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The availability series only, those at 1 (each use has one; the other six are 0)."""
    return {k: v for k, v in found.items() if k[0].startswith(P) and "image" in dict(k[1])}


@pytest.fixture
def registry(network: respx.MockRouter, small_trust_store: None) -> respx.MockRouter:
    network.get("https://registry.test/v2/").respond(200)
    network.head("https://registry.test/v2/app/manifests/1").respond(
        200, headers={"Docker-Content-Digest": DIGEST}
    )
    network.head("https://registry.test/v2/app/manifests/2").respond(404)
    return network


def auditor(fake: FakeCluster, metrics: AuditMetrics) -> Auditor:
    async def once() -> AuditReport:
        return await audit(fake, Selector(), ClientOptions(retries=0), AnonymousKeychain())

    return Auditor(once, metrics, wall=lambda: 1_800_000_000.0)


@sync
async def test_series_follow_the_workloads_from_one_audit_to_the_next(
    registry: respx.MockRouter,
) -> None:
    fake = FakeCluster()
    fake.add(DEPLOYMENT, workload("web", "registry.test/app:1"))
    fake.add(DEPLOYMENT, workload("api", "registry.test/app:2"))
    metrics = AuditMetrics()
    runner = auditor(fake, metrics)

    await runner.once()
    first = availability(samples(metrics))
    web = use("deployment", "web", "registry.test/app:1")
    api = use("deployment", "api", "registry.test/app:2")
    ones = {k for k, v in first.items() if v == 1}
    assert ones == {(f"{P}_available", web), (f"{P}_absent", api)}
    assert len(first) == 2 * 7  # every outcome of each use: `available == 0` alerts need it
    assert first[(f"{P}_available", api)] == 0

    del fake.objects[("deployments", "shop", "api")]
    fake.add(STATEFULSET, workload("db", "registry.test/app:1", "registry.test/app:2"))
    await runner.once()
    second = samples(metrics)
    db1 = use("statefulset", "db", "registry.test/app:1")
    db2 = use("statefulset", "db", "registry.test/app:2", "c1")
    assert {k for k, v in availability(second).items() if v == 1} == {
        (f"{P}_available", web), (f"{P}_available", db1), (f"{P}_absent", db2)
    }  # fmt: skip
    assert not [k for k in second if k[1] == api]  # the deleted Deployment's series are gone
    assert second[(f"{P}_completed_rechecks_total", frozenset())] == 2
    assert second[("imagecheck_audit_last_success_timestamp_seconds", frozenset())] == 1.8e9
    assert second[("imagecheck_audit_failures_total", frozenset())] == 0


@sync
async def test_a_failed_audit_keeps_the_last_metrics_and_is_counted(
    registry: respx.MockRouter, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeCluster()
    fake.add(DEPLOYMENT, workload("web", "registry.test/app:1"))
    metrics = AuditMetrics()
    runner = auditor(fake, metrics)
    await runner.once()
    before = availability(samples(metrics))

    fake.forbidden.add(("list", "deployments"))
    del fake.objects[("deployments", "shop", "web")]  # not seen: the list is refused
    with caplog.at_level(logging.ERROR, logger="imagecheck.audit"):
        await runner.once()
    after = samples(metrics)
    assert availability(after) == before
    assert after[("imagecheck_audit_failures_total", frozenset())] == 1
    assert after[("imagecheck_audit_last_failed", frozenset())] == 1
    assert after[(f"{P}_completed_rechecks_total", frozenset())] == 1
    assert [r.getMessage() for r in caplog.records] == [
        "audit failed, metrics kept from the last good audit: forbidden: needs RBAC verb "
        "'list' on resource 'deployments' (apiGroups: [apps]) cluster-wide"
    ]

    fake.forbidden.clear()
    await runner.once()
    healed = samples(metrics)
    assert healed[("imagecheck_audit_last_failed", frozenset())] == 0
    assert availability(healed) == {}  # the workload was deleted meanwhile


@sync
async def test_over_the_cap_the_found_images_are_left_out_with_a_log_line(
    registry: respx.MockRouter, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeCluster()
    fake.add(DEPLOYMENT, workload("a", "registry.test/app:1"))
    fake.add(DEPLOYMENT, workload("b", "registry.test/app:2"))
    fake.add(DEPLOYMENT, workload("c", "registry.test/app:1"))
    metrics = AuditMetrics(max_series=15)  # room for two uses
    with caplog.at_level(logging.WARNING, logger="imagecheck.audit"):
        await auditor(fake, metrics).once()
    found = samples(metrics)
    names = {dict(k[1])["name"] for k in availability(found)}
    assert names == {"a", "b"}  # b (missing) kept, then the first found one
    assert found[("imagecheck_audit_series_dropped", frozenset())] == 7
    assert [r.getMessage() for r in caplog.records] == [
        "metrics: 1 of 3 workload containers left out (7 series over --max-series 15), "
        "found images first"
    ]


@sync
async def test_audits_start_one_interval_apart_and_never_overlap() -> None:
    now = [0.0]
    slept: list[float] = []
    durations = iter([30.0, 400.0, 10.0])

    async def once() -> AuditReport:
        now[0] += next(durations)
        return AuditReport([], {})

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds
        if len(slept) == 3:
            raise asyncio.CancelledError

    runner = Auditor(once, AuditMetrics(), clock=lambda: now[0])
    with pytest.raises(asyncio.CancelledError):
        await runner.forever(300.0, sleep)
    assert slept == [270.0, 0.0, 290.0]
    assert runner.audits == 3


@sync
async def test_endpoints_ready_once_the_first_audit_ended() -> None:
    release = asyncio.Event()

    async def once() -> AuditReport:
        await release.wait()
        return AuditReport([], {})

    runner = Auditor(once, AuditMetrics())
    async with TestClient(TestServer(app(runner))) as client:
        first = asyncio.create_task(runner.once())
        assert (await client.get("/healthz")).status == 200
        assert (await client.get("/readyz")).status == 503
        release.set()
        await first
        assert (await client.get("/readyz")).status == 200
        page = await client.get("/metrics")
        assert page.status == 200
        assert page.headers["Content-Type"].startswith("text/plain; version=")
        assert f"{P}_completed_rechecks_total 1.0" in await page.text()
        assert (await client.post("/metrics")).status == 405


@pytest.mark.parametrize(
    "option", [["--interval", "1m"], ["--listen", "127.0.0.1:9"], ["--max-series", "70"]]
)
def test_serve_options_without_serve_are_a_usage_error(option: list[str]) -> None:
    result = CliRunner().invoke(cli, ["audit", *option])
    assert result.exit_code == 2
    assert result.output == (
        "imagecheck: error: --interval, --listen and --max-series go with --serve\n"
    )
