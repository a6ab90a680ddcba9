"""Load on ``imagecheck serve``: review latency over a warm cache, and registry requests from a
cold one.

Usage: ``python benchmarks/webhook_load.py [--reviews 5000] [--concurrency 50] [--images 100]
[--seconds 5] [--rate 2000] [--profile FILE]``

A no-auth ``docker-registry`` (Distribution) on 127.0.0.1, seeded with ``--images`` distinct
OCI images (:func:`tests.support.images.seed_many`); ``imagecheck serve`` as a subprocess
over TLS (a throw-away trustme CA), ``--cache-ttl 5m --missing-ttl 5m`` so that nothing expires
during the run. Two clients, each with ``--concurrency`` TLS keep-alive connections sending
reviews back to back: the *checking* client, workers in this process sending raw HTTP/1.1
(built beforehand: a client library costs more CPU per review than the server), checks every
answer; then the *timed* client, ``wrk`` (``benchmarks/_wrk.py``), a C process of its own,
sends the same reviews back to back for ``--seconds``: the saturation figures (a closed
loop: latency there is 50 / throughput, Little's law); then the *open-loop* client
(``benchmarks/_openloop.py``, a process of its own) offers them at ``--rate`` (2,000/s) for
``--seconds``, each review's latency counted from when it was due: the latency at the
target's load, without coordinated omission.
``--profile FILE``: the warm phase's server runs under cProfile (its figures are then not the
target's).

Phases:

1. **warm**: one review of every image fills the cache; then ``--reviews`` Deployment reviews
   of three found images each from the checking client (latency: ``time.perf_counter()``
   around the POST; TLS is set up once per connection, before the clock starts), then the
   same reviews from wrk for ``--seconds`` (its HdrHistogram percentiles; throughput is its
   reviews over its duration), then offered at ``--rate`` over ``--concurrency`` connections
   for ``--seconds`` (p50/p90/p99/max from each review's scheduled send time, the rate
   answered, the client's lag). Targets (issue #14): p99 <= 20 ms and >= 2,000 reviews/s
   at 50 concurrent reviews on 2 cores, judged on both the closed and the open loop. The
   registry must see no manifest request in this phase.
2. **cold**: a new server process (an empty cache), then ``--reviews`` reviews over the seeded
   images plus about 10% tags never pushed, each image in several reviews at once. Every
   image must be asked for exactly once: manifest requests == distinct images, counted two
   ways, by the registry (its access log, ``HEAD``/``GET .../manifests/`` lines added) and by
   the server (``imagecheck_registry_requests_total{kind="manifest"}`` in ``/metrics``).

Every answer is checked (HTTP 200, the uid echoed, refused with 403 exactly when an image is
missing; wrk: any answer not 2xx/3xx, any socket error; the open loop: status 200, the uid,
allowed). Exit 1: a wrong answer or a request
count that is off. Exit 2: ``docker-registry`` or ``wrk`` missing, or the registry or the
server cannot start. Otherwise 0, the targets met or not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trustme
from prometheus_client.parser import text_string_to_metric_families

from tests.support.images import seed_many
from tests.support.registry import LocalRegistry, find_registry_binary

if not __package__:  # run as `python benchmarks/webhook_load.py`: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._openloop import MAX_LAG_P99_MS, OpenLoopRun, open_loop, process_cpu_seconds
from benchmarks._wrk import WrkError, WrkRun, find_wrk, run_wrk

P99_TARGET_MS = 20.0  # issue #14: warm cache, 50 concurrent reviews, 2 cores
RATE_TARGET = 2000.0  # reviews/s, the same
MISSING_SHARE = 0.10
IMAGES_PER_REVIEW = 3
SEQUENTIAL = 200  # warm reviews sent one at a time, for the service time alone
START_TIMEOUT = 15.0
MANIFEST_LINE = re.compile(r'"(?:HEAD|GET) /v2/\S+/manifests/\S+ HTTP/')

EXIT_WRONG = 1
EXIT_UNAVAILABLE = 2


class BenchmarkError(Exception):
    def __init__(self, reason: str, exit_code: int) -> None:
        super().__init__(reason)
        self.exit_code = exit_code


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# -- the server ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tls:
    ca: Path
    cert: Path
    key: Path


def make_tls(directory: Path) -> Tls:
    ca = trustme.CA(organization_name="imagecheck webhook benchmark")
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    tls = Tls(directory / "ca.pem", directory / "tls.crt", directory / "tls.key")
    ca.cert_pem.write_to_path(str(tls.ca))
    tls.cert.write_bytes(b"".join(p.bytes() for p in leaf.cert_chain_pems))
    tls.key.write_bytes(leaf.private_key_pem.bytes())
    return tls


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# ``python -m imagecheck`` ends with ``os._exit`` (no teardown): cProfile would never write.
PROFILED = """\
import cProfile, sys
from imagecheck.cli import cli
profile = cProfile.Profile()
try:
    profile.runcall(cli, sys.argv[1:], prog_name="imagecheck", standalone_mode=False)
finally:
    profile.dump_stats({out!r})
"""


class Server:
    """``python -m imagecheck serve`` on a free port, over TLS."""

    def __init__(self, workdir: Path, tls: Tls, name: str, profile: Path | None = None) -> None:
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.log = workdir / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "IMAGECHECK_"))}
        env["HOME"] = str(workdir)
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        argv = [
            sys.executable, *(["-c", PROFILED.format(out=str(profile))] if profile else
                              ["-m", "imagecheck"]),
            "serve",
            "--listen", f"127.0.0.1:{self.port}",
            "--tls-cert", str(tls.cert), "--tls-key", str(tls.key),
            "--cache-ttl", "5m", "--missing-ttl", "5m",
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env
            )

    def wait_ready(self, verify: ssl.SSLContext) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        with httpx.Client(verify=verify, timeout=1.0, trust_env=False) as probe:
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    if probe.get(f"{self.url}/readyz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        tail = self.log.read_text(encoding="utf-8", errors="replace")[-500:]
        self.stop()
        raise BenchmarkError(f"imagecheck serve did not start: {tail}", EXIT_UNAVAILABLE)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.process.returncode


# -- reviews ---------------------------------------------------------------------------------


def deployment_review(images: Sequence[str]) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "bench"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": containers},
            },
        },
    }
    kind = {"group": "apps", "version": "v1", "kind": "Deployment"}
    request = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "namespace": "bench",
        "operation": "CREATE",
        "userInfo": {"username": "bench"},
        "object": obj,
        "oldObject": None,
        "dryRun": False,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@dataclass(frozen=True)
class Planned:
    request: bytes  # the whole POST
    body: bytes
    uid: str
    allowed: bool


def plan(image_sets: Sequence[Sequence[str]], present: frozenset[str]) -> list[Planned]:
    planned = []
    for images in image_sets:
        review = deployment_review(images)
        body = json.dumps(review).encode()
        planned.append(
            Planned(
                post(b"/validate", body),
                body,
                review["request"]["uid"],
                all(i in present for i in images),
            )
        )
    return planned


def wrong_answer(item: Planned, status: int, body: bytes) -> str | None:
    """What is wrong with the answer to one review (None: nothing)."""
    if status != 200:
        return f"HTTP {status}: {body[:200]!r}"
    answer = json.loads(body).get("response", {})
    if answer.get("uid") != item.uid:
        return f"uid {answer.get('uid')!r}, expected {item.uid!r}"
    if answer.get("allowed") is not item.allowed:
        return f"allowed={answer.get('allowed')}, expected {item.allowed}: {answer}"
    if not item.allowed and answer.get("status", {}).get("code") != 403:
        return f"refused without status.code 403: {answer}"
    return None


@dataclass(frozen=True)
class Phase:
    latencies_ms: list[float]
    seconds: float
    server_cpu: float | None  # seconds of CPU the server process used in the phase
    client_cpu: float  # seconds of CPU this process (the client) used in the phase

    def cpu_ms_per_review(self, seconds: float | None) -> str:
        return "n/a" if seconds is None else f"{seconds / len(self.latencies_ms) * 1000:.2f} ms"

    def percentile(self, q: int) -> float:
        return statistics.quantiles(self.latencies_ms, n=100, method="inclusive")[q - 1]

    @property
    def throughput(self) -> float:
        return len(self.latencies_ms) / self.seconds


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One HTTP/1.1 response with a ``Content-Length``: its status and body."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, await reader.readexactly(length)


def post(path: bytes, body: bytes) -> bytes:
    """A whole ``POST`` request, keep-alive."""
    head = (
        b"POST "
        + path
        + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
    )
    return head + body


async def send_all(
    server: Server, verify: ssl.SSLContext, items: Sequence[Planned], concurrency: int
) -> Phase:
    """``concurrency`` workers send ``items`` back to back, each over its own keep-alive TLS
    connection, as raw HTTP/1.1 (requests built beforehand): a client library costs more CPU
    per review than the server does, and on 2 cores the client would set the pace."""
    queue = list(reversed(items))
    latencies: list[float] = []
    wrong: list[str] = []

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=verify)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await read_response(reader)
        return reader, writer

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while queue:
            item = queue.pop()
            started = time.perf_counter()
            writer.write(item.request)
            status, body = await read_response(reader)
            latencies.append((time.perf_counter() - started) * 1000)
            problem = wrong_answer(item, status, body)
            if problem:
                wrong.append(problem)

    # Open every connection first: TLS handshakes are not review latency.
    connections = await asyncio.gather(*(connect() for _ in range(concurrency)))
    try:
        server_cpu = process_cpu_seconds(server.process.pid)
        client_cpu = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(worker(*connection) for connection in connections))
        seconds = time.perf_counter() - started
        client_cpu = time.process_time() - client_cpu
        server_end = process_cpu_seconds(server.process.pid)
        if server_cpu is not None and server_end is not None:
            server_cpu = server_end - server_cpu
    finally:
        for _, writer in connections:
            writer.close()
    if wrong:
        raise BenchmarkError(f"{len(wrong)} wrong answer(s); first: {wrong[0]}", EXIT_WRONG)
    return Phase(latencies, seconds, server_cpu, client_cpu)


# -- counting manifest requests --------------------------------------------------------------


class ManifestWindow:
    """Manifest requests the registry logs between ``open()`` and ``close()``."""

    def __init__(self, registry: LocalRegistry) -> None:
        self.registry = registry
        self.offset = 0

    def open(self) -> None:
        self.registry.request_count()  # returns once the access log is still
        self.offset = self.registry.access_log_path.stat().st_size

    def close(self) -> int:
        self.registry.request_count()
        with self.registry.access_log_path.open("rb") as log:
            log.seek(self.offset)
            added = log.read().decode("utf-8", errors="replace")
        return sum(1 for line in added.splitlines() if MANIFEST_LINE.search(line))


def server_samples(url: str, verify: ssl.SSLContext) -> dict[str, float]:
    """The server's ``/metrics``: the manifest requests it made
    (``imagecheck_registry_requests_total{kind="manifest"}``) and the sum and count of its
    review durations (time in the handler, from the body read to the answer)."""
    with httpx.Client(verify=verify, timeout=10.0, trust_env=False) as client:
        text = client.get(f"{url}/metrics").text
    figures = {"manifests": 0.0, "review_seconds": 0.0, "reviews": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "imagecheck_registry_requests_total":
                figures["manifests"] += sample.value if sample.labels["kind"] == "manifest" else 0
            elif sample.name == "imagecheck_review_duration_seconds_sum":
                figures["review_seconds"] = sample.value
            elif sample.name == "imagecheck_review_duration_seconds_count":
                figures["reviews"] = sample.value
    return figures


# -- the phases ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    workdir: Path
    registry: LocalRegistry
    tls: Tls
    verify: ssl.SSLContext
    present: list[str]
    absent: list[str]


def start_server(setup: Setup, name: str, profile: Path | None = None) -> Server:
    server = Server(setup.workdir, setup.tls, name, profile)
    server.wait_ready(setup.verify)
    return server


@dataclass(frozen=True)
class Warm:
    phase: Phase  # ``concurrency`` at once, the Python client: every answer checked
    wrk: WrkRun  # the same reviews, ``concurrency`` connections, from wrk: the timed figures
    wrk_server_cpu: float | None  # the server's CPU during the wrk pass
    open: OpenLoopRun  # the same reviews offered at ``--rate``: latency at the target's load
    sequential: Phase  # one at a time: the service time, without queueing
    manifests: int  # manifest requests the registry saw in both
    handler_ms: float  # mean time in the server's review handler, loaded (its own histogram)


def warm_phase(
    setup: Setup, reviews: int, concurrency: int, seconds: int, rate: float,
    profile: Path | None = None,
) -> Warm:  # fmt: skip
    """Latency over a warm cache: loaded from this process (every answer checked), loaded
    from wrk for ``seconds`` (the timed figures), and one at a time (the server under
    cProfile, its statistics written to ``profile``, when given: the figures are then not
    the target's)."""
    server = start_server(setup, "warm", profile)
    try:
        present = frozenset(setup.present)
        fill = plan([[image] for image in setup.present], present)
        asyncio.run(send_all(server, setup.verify, fill, concurrency))
        rng = random.Random(1)

        def reviews_of(count: int) -> list[Planned]:
            sets = [rng.sample(setup.present, IMAGES_PER_REVIEW) for _ in range(count)]
            return plan(sets, present)

        window = ManifestWindow(setup.registry)
        window.open()
        before = server_samples(server.url, setup.verify)
        planned = reviews_of(reviews)
        loaded = asyncio.run(send_all(server, setup.verify, planned, concurrency))
        after = server_samples(server.url, setup.verify)
        handler = (after["review_seconds"] - before["review_seconds"]) / (
            after["reviews"] - before["reviews"]
        )
        cpu = process_cpu_seconds(server.process.pid)
        timed = wrk_pass(server, setup, planned, concurrency, seconds)
        cpu_end = process_cpu_seconds(server.process.pid)
        wrk_cpu = None if cpu is None or cpu_end is None else cpu_end - cpu
        offered = open_pass(server, setup, planned, concurrency, seconds, rate)
        sequential = asyncio.run(send_all(server, setup.verify, reviews_of(SEQUENTIAL), 1))
        return Warm(loaded, timed, wrk_cpu, offered, sequential, window.close(), handler * 1000)
    finally:
        stop(server)


def wrk_pass(
    server: Server, setup: Setup, planned: Sequence[Planned], concurrency: int, seconds: int
) -> WrkRun:
    """The reviews the Python client has just had answered right, again from wrk (they are
    all allowed: wrk counts any answer that is not 2xx/3xx, and any socket error)."""
    try:
        timed = run_wrk(
            server.url,
            [item.body for item in planned],
            setup.workdir,
            connections=concurrency,
            seconds=seconds,
        )
    except WrkError as exc:
        raise BenchmarkError(str(exc), EXIT_UNAVAILABLE) from None
    if timed.status_errors or timed.socket_errors:
        raise BenchmarkError(
            f"wrk: {timed.status_errors} answer(s) not 2xx/3xx, {timed.socket_errors} socket "
            f"error(s) in {timed.requests} reviews",
            EXIT_WRONG,
        )
    return timed


def open_pass(
    server: Server, setup: Setup, planned: Sequence[Planned], concurrency: int, seconds: int,
    rate: float,
) -> OpenLoopRun:  # fmt: skip
    """The same reviews offered at ``rate`` for ``seconds`` over ``concurrency`` connections,
    from a process of its own (``_openloop.py``); every answer checked."""
    try:
        offered = open_loop(
            server.port, setup.tls.ca, [item.request for item in planned],
            [item.uid for item in planned], rate=rate, seconds=seconds,
            connections=concurrency, server_pid=server.process.pid,
        )  # fmt: skip
    except OSError as exc:  # ConnectionError included: the server closed a connection
        raise BenchmarkError(f"open loop: {exc}", EXIT_WRONG) from None
    if offered.wrong_count:
        raise BenchmarkError(
            f"open loop: {offered.wrong_count} wrong answer(s); first: {offered.wrong[0]}",
            EXIT_WRONG,
        )
    return offered


@dataclass(frozen=True)
class Cold:
    phase: Phase
    distinct: int
    absent: int
    by_registry: int  # manifest requests in the registry's access log
    by_server: int  # imagecheck_registry_requests_total{kind="manifest"}

    @property
    def right(self) -> bool:
        return self.by_registry == self.distinct == self.by_server


def cold_phase(setup: Setup, reviews: int, concurrency: int) -> Cold:
    """Reviews from an empty cache, and the manifest requests they caused."""
    images = setup.present + setup.absent
    rng = random.Random(2)
    # Every image in at least one review; then random picks, so each image is in several
    # reviews, some of them at the same time.
    order = rng.sample(images, len(images))
    sets = [order[i : i + IMAGES_PER_REVIEW] for i in range(0, len(order), IMAGES_PER_REVIEW)]
    sets += [rng.sample(images, IMAGES_PER_REVIEW) for _ in range(max(0, reviews - len(sets)))]
    rng.shuffle(sets)
    server = start_server(setup, "cold")
    try:
        window = ManifestWindow(setup.registry)
        window.open()
        planned = plan(sets, frozenset(setup.present))
        phase = asyncio.run(send_all(server, setup.verify, planned, concurrency))
        by_registry = window.close()
        by_server = round(server_samples(server.url, setup.verify)["manifests"])
    finally:
        stop(server)
    distinct = len({image for images in sets for image in images})
    return Cold(phase, distinct, len(setup.absent), by_registry, by_server)


def stop(server: Server) -> None:
    code = server.stop()
    if code != 0:
        raise BenchmarkError(f"imagecheck serve exited {code} after SIGTERM", EXIT_WRONG)


# -- main ------------------------------------------------------------------------------------


def seed(registry: LocalRegistry, images: int) -> tuple[list[str], list[str]]:
    repos = max(1, images // 10)
    with httpx.Client(timeout=30.0, trust_env=False) as client:
        names = seed_many(client, registry.url, repos, max(1, images // repos))
    present = [f"{registry.host}/{name}" for name in names]
    absent = [
        f"{registry.host}/{names[i % len(names)].rpartition(':')[0]}:absent-{i}"
        for i in range(max(1, round(len(present) * MISSING_SHARE)))
    ]
    return present, absent


def machine() -> str:
    """The CPU model, the CPUs this process may use, and the load before the run."""
    model = "unknown CPU"
    try:
        for line in (
            Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace").splitlines()
        ):
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    cpus = len(os.sched_getaffinity(0))
    return f"{model}, {cpus} CPU(s), load {load}; Python {sys.version.split()[0]}"


def verdict(met: bool) -> str:
    return "PASS" if met else "MISS"


def report_open(run: OpenLoopRun, concurrency: int) -> None:
    """The open-loop pass: latency at a stated load, from each review's intended send time."""
    print(f"warm cache, open loop: {run.rate:g} reviews/s offered over {concurrency} "
          f"connections, {len(run.latencies_ms)} reviews (latency from each one's send time as "
          "scheduled)")  # fmt: skip
    print(f"  latency p50 / p90      {run.latency(50):8.1f} / {run.latency(90):.1f} ms")
    p99 = run.latency(99)
    # The rate is the schedule's: the server sustained it when the client kept the schedule,
    # every review due was answered, and the answers kept pace (their rate over their own
    # span within 1 % of the schedule's: not equal to it, the first and last latencies
    # differ; a server falling behind stretches the span).
    sustained = (
        run.rate >= RATE_TARGET
        and run.kept_schedule
        and run.answered == run.due
        and run.achieved >= run.rate * 0.99
    )
    print(f"  latency p99            {p99:8.1f} ms   target <= {P99_TARGET_MS:g} ms: "
          f"{verdict(p99 <= P99_TARGET_MS)}")  # fmt: skip
    print(f"  latency max            {max(run.latencies_ms):8.1f} ms")
    print(f"  answered               {run.answered:8d} of {run.due} due, {run.achieved:.1f} "
          f"reviews/s   target >= {RATE_TARGET:g}: {verdict(sustained)}")  # fmt: skip
    lag = f"{run.percentile(run.lag_ms, 99):.2f} / {max(run.lag_ms):.1f} ms"
    print(f"  client offered         {run.offered:8.0f} reviews/s   lag p99 / max {lag}")
    if not run.kept_schedule:
        print("  ! the client did not keep the schedule (lag p99 over "
              f"{MAX_LAG_P99_MS:g} ms, or offered under 99 %): these figures are not the "
              "server's alone")  # fmt: skip
    both = p99 <= P99_TARGET_MS and sustained
    print(f"  p99 <= {P99_TARGET_MS:g} ms at >= {RATE_TARGET:g}/s    {verdict(both)}")
    cpu = (
        "n/a"
        if run.server_cpu is None
        else f"{run.server_cpu / len(run.latencies_ms) * 1000:.2f} ms"
    )
    print(f"  server CPU per review  {cpu:>11}")
    print(f"  client CPU per review  {run.client_cpu / len(run.latencies_ms) * 1000:8.2f} ms")


def report(concurrency: int, warm_figures: Warm, cold: Cold, load_before: str) -> bool:
    warm, timed, one = warm_figures.phase, warm_figures.wrk, warm_figures.sequential
    p99 = timed.p99_ms
    rate = timed.throughput
    print(f"imagecheck serve under load: {concurrency} reviews at once, {IMAGES_PER_REVIEW} "
          "images each, HTTP/1.1 keep-alive over TLS")  # fmt: skip
    print(f"machine: {load_before}")
    print("timed client: wrk (-t 1, its own process); checking client: raw HTTP/1.1 over "
          "asyncio TLS in this process")  # fmt: skip
    print()
    print(f"warm cache (every image cached), wrk: {timed.requests} reviews in "
          f"{timed.seconds:.1f} s")  # fmt: skip
    print(f"  latency p50 / p90      {timed.p50_ms:8.1f} / {timed.p90_ms:.1f} ms")
    print(f"  latency p99            {p99:8.1f} ms   target <= {P99_TARGET_MS:g} ms: "
          f"{verdict(p99 <= P99_TARGET_MS)}")  # fmt: skip
    print(f"  latency max            {timed.max_ms:8.1f} ms")
    print(f"  throughput             {rate:8.0f} reviews/s   target >= {RATE_TARGET:g}: "
          f"{verdict(rate >= RATE_TARGET)}")  # fmt: skip
    per_review = "n/a"
    if warm_figures.wrk_server_cpu is not None:
        per_review = f"{warm_figures.wrk_server_cpu / timed.requests * 1000:.2f} ms"
    print(f"  server CPU per review  {per_review:>11}")
    print(f"  wrk CPU per review     {timed.cpu_seconds / timed.requests * 1000:8.2f} ms")
    print()
    report_open(warm_figures.open, concurrency)
    print()
    print(f"warm cache, the Python client (every answer checked): {len(warm.latencies_ms)} "
          "reviews")  # fmt: skip
    print(f"  latency p50 / p99      {warm.percentile(50):8.1f} / {warm.percentile(99):.1f} ms")
    print(f"  throughput             {warm.throughput:8.0f} reviews/s")
    print(f"  server CPU per review  {warm.cpu_ms_per_review(warm.server_cpu):>11}")
    print(f"  client CPU per review  {warm.cpu_ms_per_review(warm.client_cpu):>11}")
    print(f"  server handler time    {warm_figures.handler_ms:8.2f} ms   (mean, its own histogram: "
          "body read to answer)")  # fmt: skip
    print(f"  one at a time p50/p99  {one.percentile(50):8.1f} / {one.percentile(99):.1f} ms "
          f"({len(one.latencies_ms)} reviews, no queueing)")  # fmt: skip
    print(f"  manifest requests      {warm_figures.manifests:8d}      expected 0")
    print()
    print("cold cache (new server process)")
    print(f"  reviews                {len(cold.phase.latencies_ms):8d}")
    print(f"  distinct images        {cold.distinct:8d}      ({cold.absent} of them never pushed)")
    print(f"  manifest requests      {cold.by_registry:8d}      registry access log")
    print(f"  manifest requests      {cold.by_server:8d}      server /metrics")
    print(f"  latency p50 / p99      {cold.phase.percentile(50):8.1f} / "
          f"{cold.phase.percentile(99):.1f} ms")  # fmt: skip
    print(f"  throughput             {cold.phase.throughput:8.0f} reviews/s")
    right = warm_figures.manifests == 0 and cold.right
    print()
    print(f"cold: registry requests = distinct images: {verdict(right)}")
    return right


def run(args: argparse.Namespace) -> int:
    binary = find_registry_binary()
    if binary is None:
        raise BenchmarkError(
            "docker-registry not found (apt-get install docker-registry)", EXIT_UNAVAILABLE
        )
    if find_wrk() is None:
        raise BenchmarkError(
            "wrk not found (scripts/system-deps.sh, or apt-get install wrk)", EXIT_UNAVAILABLE
        )
    load_before = machine()
    with tempfile.TemporaryDirectory(prefix="imagecheck-bench-webhook-") as tmp:
        workdir = Path(tmp)
        tls = make_tls(workdir)
        registry = LocalRegistry(workdir / "registry", binary=binary)
        try:
            registry.start()
        except RuntimeError as exc:
            raise BenchmarkError(f"cannot start docker-registry: {exc}", EXIT_UNAVAILABLE) from None
        try:
            progress(f"seeding {args.images} images")
            present, absent = seed(registry, args.images)
            verify = ssl.create_default_context(cafile=str(tls.ca))
            setup = Setup(workdir, registry, tls, verify, present, absent)
            progress(f"warm: {args.reviews} reviews, {args.concurrency} at once")
            warm = warm_phase(
                setup, args.reviews, args.concurrency, args.seconds, args.rate, args.profile
            )
            progress(f"cold: {args.reviews} reviews over {len(present) + len(absent)} images")
            cold = cold_phase(setup, args.reviews, args.concurrency)
        finally:
            registry.stop()
    return 0 if report(args.concurrency, warm, cold, load_before) else EXIT_WRONG


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reviews", type=int, default=5000, help="reviews per phase (5000)")
    parser.add_argument("--concurrency", type=int, default=50, help="reviews at once (50)")
    parser.add_argument("--images", type=int, default=100, help="distinct images pushed (100)")
    parser.add_argument("--seconds", type=int, default=5, help="wrk's timed pass, seconds (5)")
    parser.add_argument(
        "--rate",
        type=float,
        default=RATE_TARGET,
        help=f"the open-loop pass's offered reviews/s ({RATE_TARGET:g})",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="FILE",
        help="run the warm phase's server under cProfile, its statistics to FILE (pstats)",
    )
    args = parser.parse_args()
    try:
        sys.exit(run(args))
    except BenchmarkError as exc:
        print(f"webhook_load: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
