"""``imagecheck reap``'s loop as the command runs it (``cli/_reap_loop.py``): behind leader
election over a Lease, with /metrics and /healthz served."""

from __future__ import annotations

import asyncio

import pytest
import respx

from imagecheck.cli._reap_loop import LoopOptions, controller
from imagecheck.cli._settings import start_run
from imagecheck.cluster import Outcome, ReapOptions
from imagecheck.cluster._model import JOB, POD
from tests.support.fakecluster import FakeCluster
from tests.support.net import free_port
from tests.support.reapcase import job, pod
from tests.support.reapcli import fake_registry, registry_defaults


async def get(port: int, path: str) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    answer = (await reader.read()).decode()
    writer.close()
    return answer


def test_the_leader_acts_and_says_so_in_its_metrics(
    network: respx.MockRouter, small_trust_store: None
) -> None:
    fake_registry(network)
    cluster = FakeCluster()
    cluster.add(JOB, job(age=31 * 86400))
    cluster.add(POD, pod("train-1-abcde", stuck_for=30 * 86400))
    port = free_port()
    loop = LoopOptions(0.05, ("imagecheck-reap", "ops"), ("127.0.0.1", port))
    seen: list[Outcome] = []
    settings = start_run(registry_defaults())

    async def main() -> tuple[str, str]:
        task = asyncio.create_task(controller(cluster, ReapOptions(), settings, seen.append, loop))
        while not seen:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        metrics, health = await get(port, "/metrics"), await get(port, "/healthz")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return metrics, health

    metrics, health = asyncio.run(main())
    assert health.startswith("HTTP/1.1 200") and health.endswith("ok\n")
    for line in (
        "imagecheck_reap_leader 1.0",
        'imagecheck_reap_jobs_failed_total{kind="job",verdict="missing"} 1.0',
        'imagecheck_reap_stuck_pods{reason="ImagePullBackOff"} 1.0',
    ):
        assert line in metrics.splitlines()
    assert "imagecheck_reap_passes_total" in metrics
    lease = cluster.objects[("leases", "ops", "imagecheck-reap")]
    assert lease["spec"]["holderIdentity"] == ""  # released on the way out
    verbs = [(w.verb, w.kind) for w in cluster.writes]
    assert verbs[0] == ("create", "leases") and ("patch", "jobs") in verbs


def test_lease_api_errors_are_counted_in_the_metrics(
    network: respx.MockRouter, small_trust_store: None
) -> None:
    fake_registry(network)
    cluster = FakeCluster()
    cluster.forbidden.add(("get", "leases"))
    port = free_port()
    loop = LoopOptions(0.05, ("imagecheck-reap", "ops"), ("127.0.0.1", port))
    settings = start_run(registry_defaults())

    async def main() -> str:
        task = asyncio.create_task(controller(cluster, ReapOptions(), settings, print, loop))
        await asyncio.sleep(0.2)  # the first round is at once; the next one 5 s later
        metrics = await get(port, "/metrics")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return metrics

    metrics = asyncio.run(main())
    assert 'imagecheck_reap_api_errors_total{error="forbidden"} 1.0' in metrics.splitlines()
    assert "imagecheck_reap_leader 0.0" in metrics.splitlines()
