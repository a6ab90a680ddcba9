"""The webhook benchmark's phases (``webhook_load.py``, issue #14).

**warm**: a server whose cache every image fills first, then the same reviews from the
checking client (every answer checked), from wrk (the saturation figures), offered at a rate
by the open loop, and one at a time; the registry must see no manifest request. **cold**: a
new server (an empty cache) and reviews over the seeded images plus tags never pushed, each
image in several reviews at once; manifest requests must equal the distinct images, counted
by the registry and by the server.
"""

from __future__ import annotations

import asyncio
import random
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks._openloop import OpenLoopRun, open_loop, process_cpu_seconds
from benchmarks._webhook_reviews import Phase, Planned, plan, send_all
from benchmarks._webhook_server import (
    EXIT_UNAVAILABLE,
    EXIT_WRONG,
    BenchmarkError,
    ManifestWindow,
    Server,
    server_samples,
)
from benchmarks._wrk import WrkError, WrkRun, run_wrk
from tests.support.pki import TLSMaterial
from tests.support.registry import LocalRegistry

IMAGES_PER_REVIEW = 3
SEQUENTIAL = 200  # warm reviews sent one at a time, for the service time alone


@dataclass(frozen=True)
class Setup:
    workdir: Path
    registry: LocalRegistry
    tls: TLSMaterial
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
            server.port, setup.tls.ca_file, [item.request for item in planned],
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
