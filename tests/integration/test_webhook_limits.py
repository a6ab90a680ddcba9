"""``imagecheck serve`` against hostile clients and hostile reviews (issue #10), as a real
subprocess over TLS in front of the real registry.

- slow clients (slowloris): connections that trickle their headers, never start TLS, or
  trickle a body are closed after ``--read-timeout``; at ``--max-connections`` the oldest
  idle connection makes way, so ``/healthz`` answers while they hold the rest, and the
  server's memory stays bounded; connections with a request in progress are never dropped;
- big reviews: a pod with 5,000 containers is answered within ``--review-deadline``, the
  images over ``--max-images-per-review`` refused as not checked (``--on-error pass`` does
  not let them through), and again from a warm registry; images still queued behind their
  own review's others at the deadline are refused, not passed as registry errors;
- untrusted JSON: 60,000-deep nesting and a 5,000-digit number inside a review get a verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.admission import admission_review, pod, pod_spec, workload
from tests.support.clirun import clean_env
from tests.support.endpoint import RegistryEndpoint
from tests.support.faultproxy import FaultProxy, Hang
from tests.support.pki import TLSMaterial
from tests.support.webhook import DEADLINE, SLACK, Webhook, metric, running

READ_TIMEOUT = 1.5
SLOW_CLIENTS = 300
CAP = 100
TRICKLE = 0.25  # seconds between the bytes a slow client sends
PER_REVIEW = 20


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


# -- slow clients ----------------------------------------------------------------------------


Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def connect(port: int, tls: ssl.SSLContext | None) -> Stream | None:
    """A connection (after its TLS handshake), or None when the server closed it first."""
    try:
        return await asyncio.open_connection("127.0.0.1", port, ssl=tls)
    except (OSError, asyncio.IncompleteReadError):
        return None


async def closed_by_server(stream: Stream, within: float) -> bool:
    """Whether the server closes ``stream`` within ``within`` seconds (EOF or a reset)."""
    reader, _ = stream
    try:
        return await asyncio.wait_for(reader.read(1), within) == b""
    except TimeoutError:
        return False
    except (OSError, ssl.SSLError):
        return True


async def trickle(streams: list[Stream], stop: asyncio.Event) -> None:
    """Send a request's headers a byte at a time on every stream, never finishing them."""
    headers = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 4000
    for i in range(len(headers)):
        for _, writer in streams:
            if not writer.is_closing():
                with contextlib.suppress(OSError, RuntimeError):
                    writer.write(headers[i : i + 1])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), TRICKLE)
        if stop.is_set():
            return


async def probe(hook: Webhook, tls: TLSMaterial) -> float:
    """Seconds for a new connection's ``GET /healthz`` to be answered 200."""
    started = time.monotonic()
    async with httpx.AsyncClient(verify=tls.client_context(), trust_env=False) as client:
        answer = await client.get(f"https://127.0.0.1:{hook.port}/healthz", timeout=5.0)
    assert answer.status_code == 200
    return time.monotonic() - started


@pytest.fixture
def guarded(tmp_path: Path, tls_material: TLSMaterial) -> Iterator[Webhook]:
    args = ("--read-timeout", f"{READ_TIMEOUT}s", "--max-connections", str(CAP))
    with running(tmp_path, tls_material, *args) as hook:
        yield hook


def test_slow_clients_are_closed_and_healthz_answers_meanwhile(
    guarded: Webhook, tls_material: TLSMaterial
) -> None:
    hook = guarded
    before = rss_mib(hook.process.pid)

    async def attack() -> tuple[list[float], float, list[bool], int]:
        context = tls_material.client_context()
        opened = await asyncio.gather(*(connect(hook.port, context) for _ in range(SLOW_CLIENTS)))
        streams = [s for s in opened if s is not None]
        stop = asyncio.Event()
        sender = asyncio.ensure_future(trickle(streams, stop))
        await asyncio.sleep(TRICKLE * 2)  # every slow client has sent some of its headers
        waits = [await probe(hook, tls_material) for _ in range(5)]
        peak = rss_mib(hook.process.pid)
        closed = await asyncio.gather(
            *(closed_by_server(s, READ_TIMEOUT + SLACK + 1.0) for s in streams)
        )
        stop.set()
        await sender
        for _, writer in streams:
            writer.close()
        return waits, peak, closed, len(streams)

    waits, peak, closed, connected = asyncio.run(attack())
    assert max(waits) < SLACK, f"/healthz took {max(waits):.2f}s with {connected} slow clients"
    assert all(closed), f"{closed.count(False)} slow clients still connected"
    # At most CAP connections of about half a MiB each (asyncio's TLS buffer is 256 KiB).
    assert peak - before < CAP * 0.75, f"RSS went from {before:.0f} to {peak:.0f} MiB"
    metrics = hook.metrics()
    assert metric(metrics, "imagecheck_connections_closed_total", reason="evicted") > 0
    assert metric(metrics, "imagecheck_connections_closed_total", reason="header_timeout") > 0
    assert metric(metrics, "imagecheck_connections") <= CAP
    assert hook.client.get("/healthz").status_code == 200


def test_a_connection_that_never_starts_tls_is_closed(guarded: Webhook) -> None:
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=READ_TIMEOUT + 5) as sock:
        started = time.monotonic()
        assert sock.recv(1) == b""  # EOF: the server gave up on the handshake
        assert time.monotonic() - started < READ_TIMEOUT + SLACK


def test_a_body_that_trickles_gets_a_408(guarded: Webhook, tls_material: TLSMaterial) -> None:
    async def slow_body() -> tuple[bytes, float]:
        stream = await connect(guarded.port, tls_material.client_context())
        assert stream is not None
        reader, writer = stream
        writer.write(
            b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{"
        )
        started = time.monotonic()
        answer = asyncio.ensure_future(reader.read(4096))
        while not answer.done() and time.monotonic() - started < READ_TIMEOUT + 5:
            writer.write(b" ")
            await asyncio.sleep(TRICKLE)
        head = await answer
        writer.close()
        return head, time.monotonic() - started

    head, seconds = asyncio.run(slow_body())
    assert head.startswith(b"HTTP/1.1 408 "), head
    assert b"request body not received within" in head
    assert seconds < READ_TIMEOUT + SLACK


def test_bodies_that_trickle_do_not_hold_up_other_reviews(
    tmp_path: Path, tls_material: TLSMaterial
) -> None:
    """More slow bodies than the server has read slots (16), each trickled until its 408
    (too big to be framed in front of aiohttp, never more than a few bytes in): a review that
    needs the registry (one that refuses connections, with no retry: an instant answer) is
    answered at once meanwhile, not after the slow ones' read timeout."""
    args = ("--read-timeout", f"{READ_TIMEOUT}s", "--retries", "0")
    with running(tmp_path, tls_material, *args) as hook:
        elapsed, status, heads = asyncio.run(_beside_slow_bodies(hook, tls_material))
    assert status == 200
    assert elapsed < READ_TIMEOUT / 2, elapsed
    assert all(head.startswith(b"HTTP/1.1 408 ") for head in heads), heads


async def _beside_slow_bodies(
    guarded: Webhook, tls_material: TLSMaterial
) -> tuple[float, int, list[bytes]]:
    """Seconds and status of a review sent while ``SLOW_BODIES`` trickle; their answers."""
    context = tls_material.client_context()
    streams = [await connect(guarded.port, context) for _ in range(SLOW_BODIES)]
    opened = [s for s in streams if s is not None]
    assert len(opened) == SLOW_BODIES
    for _, writer in opened:
        writer.write(
            b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
        )
    stop = asyncio.Event()
    keep_trickling = asyncio.ensure_future(_trickle_bodies(opened, stop))
    await asyncio.sleep(0.3)  # every slow body has begun
    started = time.monotonic()
    body = json.dumps(admission_review(pod("127.0.0.1:1/app:1"))).encode()
    answer = await asyncio.to_thread(guarded.post, body)
    elapsed = time.monotonic() - started
    heads = await asyncio.gather(*(reader.read(64) for reader, _ in opened))
    stop.set()
    await keep_trickling
    for _, writer in opened:
        writer.close()
    return elapsed, answer.status_code, heads


SLOW_BODIES = 24


async def _trickle_bodies(streams: list[Stream], stop: asyncio.Event) -> None:
    while not stop.is_set():
        for _, writer in streams:
            if not writer.is_closing():
                with contextlib.suppress(OSError, RuntimeError):
                    writer.write(b" ")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), TRICKLE)


def test_at_the_cap_the_oldest_idle_connection_makes_way(
    tmp_path: Path, tls_material: TLSMaterial
) -> None:
    """Four allowed: the test client's keep-alive connection (it asked /readyz) and three that
    never sent a request. A fifth closes the oldest of those three, not the older one that
    was served."""
    with running(tmp_path, tls_material, "--max-connections", "4") as hook:

        async def main() -> list[bool]:
            context = tls_material.client_context()
            idle = [await connect(hook.port, context) for _ in range(3)]
            streams = [s for s in idle if s is not None]
            assert len(streams) == 3
            await probe(hook, tls_material)
            closed = await asyncio.gather(*(closed_by_server(s, 0.5) for s in streams))
            for _, writer in streams:
                writer.close()
            return closed

        assert asyncio.run(main()) == [True, False, False]
        evicted = metric(hook.metrics(), "imagecheck_connections_closed_total", reason="evicted")
        assert evicted == 1  # the /metrics request itself went over the kept connection


def test_connections_with_a_review_in_flight_are_never_dropped(
    tmp_path: Path, tls_material: TLSMaterial, proxy: FaultProxy
) -> None:
    proxy.on(None, r".*", Hang())
    args = ("--max-connections", "2", "--review-deadline", str(DEADLINE))
    with running(tmp_path, tls_material, *args) as hook:
        second = hook.new_client(tls_material.ca_file)
        with ThreadPoolExecutor(2) as pool, second:
            reviews = [
                pool.submit(client.post, "/validate", content=json.dumps(body).encode())
                for client, body in [
                    (hook.client, admission_review(pod(proxy.ref("sample/app:1")))),
                    (second, admission_review(pod(proxy.ref("sample/app:2")))),
                ]
            ]
            time.sleep(0.5)  # both reviews wait on the hung registry
            with pytest.raises(httpx.TransportError):  # no room: the newcomer is closed
                asyncio.run(probe(hook, tls_material))
            answers = [r.result() for r in reviews]
        assert [a.status_code for a in answers] == [200, 200]
        assert all(a.json()["response"]["allowed"] is True for a in answers)  # --on-error pass
        assert asyncio.run(probe(hook, tls_material)) < SLACK
        refused = metric(hook.metrics(), "imagecheck_connections_closed_total", reason="refused")
        assert refused >= 1


@pytest.fixture
def proxy(registry_plain: RegistryEndpoint) -> Iterator[FaultProxy]:
    with FaultProxy(registry_plain.url) as proxy:
        yield proxy


# -- big reviews -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def webhook(
    tmp_path_factory: pytest.TempPathFactory, tls_material: TLSMaterial
) -> Iterator[Webhook]:
    """Defaults (``--on-error pass``), a short deadline, 20 images per review (100, the
    default, take a busy 2-core runner more than the deadline)."""
    workdir = tmp_path_factory.mktemp("webhook-limits")
    args = ("--review-deadline", str(DEADLINE), "--max-images-per-review", str(PER_REVIEW))
    with running(workdir, tls_material, *args) as hook:
        yield hook


def timed_review(hook: Webhook, obj: dict[str, Any]) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    answer = hook.review(obj)
    return answer, time.monotonic() - started


def test_a_pod_with_5000_containers_is_answered_within_the_deadline_and_refused(
    webhook: Webhook, registry_plain: RegistryEndpoint
) -> None:
    images = [registry_plain.ref(f"sample/big-{i}:1") for i in range(5000)]
    big = pod(*images)
    for attempt in ("cold", "warm"):  # warm: the registry is known, the answers cached
        answer, seconds = timed_review(webhook, big)
        assert seconds < DEADLINE + SLACK, f"{attempt}: answered in {seconds:.2f}s"
        assert answer["allowed"] is False
        message = answer["status"]["message"]
        assert (
            "4980 image(s) not checked (container 'c20', 'c21', 'c22' and 4977 more): the review "
            "names 5000 distinct images, over the per-review limit of 20"
        ) in message
        assert "'c0': image" in message or "'c0', " in message  # checked: missing, or queued
        assert "warnings" not in answer  # nothing passed as a registry error
    assert metric(webhook.metrics(), "imagecheck_images_not_checked_total") >= 2 * 4980


def test_images_queued_behind_their_own_review_at_the_deadline_are_refused(
    tmp_path: Path, tls_material: TLSMaterial, proxy: FaultProxy, registry_plain: RegistryEndpoint
) -> None:
    """Two checks at once; five images on a registry that never answers, then a missing one:
    it is still queued at the deadline. That is not a registry failure, so ``--on-error
    pass`` does not let it through (before, it came back as "no answer" and was allowed)."""
    proxy.on(None, r".*", Hang())
    hung = [(f"hung{i}", proxy.ref(f"sample/app:{i}")) for i in range(5)]
    missing = ("gone", registry_plain.ref("sample/app:queued-missing"))
    args = ("--concurrency", "2", "--review-deadline", str(DEADLINE))
    with running(tmp_path, tls_material, *args) as hook:
        obj = workload("Pod", pod_spec([], [*hung, missing], []))
        answer, seconds = timed_review(hook, obj)
    assert seconds < DEADLINE + SLACK, f"answered in {seconds:.2f}s"
    assert answer["allowed"] is False
    message = answer["status"]["message"]
    assert "4 image(s) not checked (container 'hung2', 'hung3', 'hung4' and 1 more)" in message
    assert "behind the review's own other images (6 distinct, 2 checked at once)" in message
    assert len(answer["warnings"]) == 2  # the two asked: registry errors, passed
    assert all("no answer from the registry within the deadline" in w for w in answer["warnings"])


# -- untrusted JSON --------------------------------------------------------------------------


def hostile_review(registry: RegistryEndpoint) -> bytes:
    """A custom resource with a pod template naming a missing image, a field nested 60,000
    deep and a 5,000-digit number: the API server passes such an object through when its
    CRD has ``x-kubernetes-preserve-unknown-fields``."""
    spec = {"containers": [{"name": "app", "image": registry.ref("sample/app:hostile-gone")}]}
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "hostile", "namespace": "team-a"},
        "spec": {"template": {"spec": spec}, "deep": "DEEP", "number": "NUMBER"},
    }
    text = json.dumps(admission_review(obj))
    text = text.replace('"DEEP"', "[" * 60_000 + "]" * 60_000).replace('"NUMBER"', "9" * 5000)
    return text.encode()


def test_deeply_nested_json_and_long_numbers_in_a_review_get_a_verdict(
    webhook: Webhook, registry_plain: RegistryEndpoint
) -> None:
    body = hostile_review(registry_plain)
    answer = webhook.post(body)
    assert answer.status_code == 200, answer.text
    verdict = answer.json()["response"]
    assert verdict["allowed"] is False  # the pod template was read: its image is missing
    assert "sample/app:hostile-gone" in verdict["status"]["message"]
    assert webhook.client.get("/healthz").status_code == 200


# -- options ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--read-timeout", "0s"],
        ["--read-timeout", "soon"],
        ["--max-connections", "0"],
        ["--max-images-per-review", "0"],
    ],
)
def test_bad_limits_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    argv = [sys.executable, "-m", "imagecheck", "serve", "--insecure-http", *args]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=30, env=clean_env(tmp_path), check=False
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]  # click's usage error, or ours: one line
    assert args[0] in last or repr(args[1]) in last, last
