"""Two resource attacks on ``imagecheck serve``, with the fast path on and with aiohttp alone
(``IMAGECHECK_FASTPATH=0``), side by side in one run.

Usage: ``python benchmarks/webhook_attack.py [--pass trickle|no-read|all] [--attackers 60]
[--clients 20] [--duration 5] [--trickle-ms 10] [--json]``

**Setup.** A no-auth ``docker-registry`` on 127.0.0.1 seeded with three images, and
``python -m imagecheck serve`` over TLS (``_webhook_server.Server``, defaults but
``--cache-ttl 5m --missing-ttl 5m``), a new server process for every measurement below, once
with the fast path and once with ``IMAGECHECK_FASTPATH=0``. Each server's cache is filled by
a first review before anything is measured: every review after it is a cached one.

**trickle** (CPU). The *victim*, in this process, sends Deployment reviews of the three
images one at a time, one every 10 ms, over one keep-alive TLS connection for ``--duration``
seconds: p50/p99 (``perf_counter`` around each review) and the server's CPU in the window
(``/proc/PID/stat``). Once alone (the baseline), then under each of two attacks (a window
starts once every attacker has sent its head; ``--duration 12`` covers a whole attacker's
cycle on the fast path, 5 s in the framer and 5 s in aiohttp): ``--attackers`` connections
that each send a whole request head (announcing a 4 KiB body) and then the body one byte per
TLS record, ``--trickle-ms`` apart, reconnecting 1 s after the server closes the connection.
The heads: 16 KiB of 1,300 tiny fields, and 14 KiB of 120 fields of 120 bytes (aiohttp
refuses more than 128 fields or a field over 8190 bytes, so a patient attacker keeps to the
second). The attackers run in a spawned process of their own (``_attack_trickle.py``): 6,000
TLS records a second in the victim's loop would be counted as the server's latency. Target:
the victim's p99 under attack within 3x its baseline, and every review answered.

**no-read** (memory). The server's ``VmRSS`` before and after ``--clients`` connections that
pipeline small cached reviews (one image) as fast as the connection takes them and never
read (``_attack_noread.py``): once every one is blocked on its writes and 2 s more, 10 s
later (still held?), and 2 s after they close. Per unread connection: (after - before) /
clients. And on a server of its own, RSS per idle TLS connection (100 connect, finish the
handshake, send nothing). Target: RSS per unread connection no more than aiohttp alone's in
the same run.

The figures table goes to stderr; ``--json`` puts the figures on stdout too. Exit 1: a wrong
answer (a review answered HTTP 200 with the wrong uid or verdict; without an attack,
anything but a right 200). Exit 2: ``docker-registry`` missing, or a process that cannot
start. Otherwise 0, whatever the targets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from tests.support.images import seed_many
from tests.support.pki import TLSMaterial, make_tls_material
from tests.support.registry import LocalRegistry, find_registry_binary

if not __package__:  # run as `python benchmarks/webhook_attack.py`: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._attack_noread import IDLE_CONNECTIONS, idle, no_read
from benchmarks._attack_report import report
from benchmarks._attack_trickle import HEADS, Attackers, Window, victim
from benchmarks._webhook_phases import stop
from benchmarks._webhook_report import machine
from benchmarks._webhook_reviews import Planned, plan
from benchmarks._webhook_server import EXIT_UNAVAILABLE, BenchmarkError, Server, progress

MODES: Mapping[str, Mapping[str, str]] = {
    "fast": {},
    "alone": {"IMAGECHECK_FASTPATH": "0"},
}
P99_FACTOR = 3.0  # the victim's p99 under attack, at most this times its baseline
HOLD = 10.0  # seconds the unread clients stay open after they stalled
CALM = 1.5  # after the attackers stop, before the next window: the server closes their sockets


class Bench:
    """The registry, TLS material and reviews every measurement shares."""

    def __init__(self, workdir: Path, tls: TLSMaterial, images: list[str]) -> None:
        self.workdir, self.tls = workdir, tls
        self.verify = ssl.create_default_context(cafile=str(tls.ca_file))
        present = frozenset(images)
        self.reviews: list[Planned] = plan([images] * 20, present)
        self.small: Planned = plan([images[:1]], present)[0]
        self.servers = 0

    def server(self, mode: str) -> Server:
        self.servers += 1
        server = Server(self.workdir, self.tls, f"{mode}-{self.servers}", None, MODES[mode])
        server.wait_ready(self.verify)
        # The first review fills the cache; every later one is answered from it.
        asyncio.run(victim(server, self.verify, self.reviews, 0.3, must_answer=True))
        return server


def trickle(bench: Bench, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    server = bench.server(mode)
    try:
        progress(f"trickle, {mode}: victim alone for {args.duration:g} s")
        baseline = asyncio.run(
            victim(server, bench.verify, bench.reviews, args.duration, must_answer=True)
        )
        attacks = {}
        for shape in HEADS:
            progress(f"trickle, {mode}: {args.attackers} attackers, {shape.name}")
            attackers = Attackers(
                server, str(bench.tls.ca_file), shape.data, args.attackers, args.trickle_ms / 1000
            )
            attackers.start()
            try:
                window = asyncio.run(
                    victim(server, bench.verify, bench.reviews, args.duration, must_answer=False)
                )
            finally:
                seen = attackers.stop()
            attacks[shape.name] = {
                "victim": window.summary(),
                "p99_ratio": round(window.percentile(99) / baseline.percentile(99), 1),
                "met": met(window, baseline),
                "attackers": {
                    "connections": seen.connections,
                    "closed_by_server": seen.closed_by_server,
                    "answers": seen.answers,
                    "bytes_trickled": seen.bytes_trickled,
                    "cpu_seconds": round(seen.cpu_seconds, 2),
                },
            }
            time.sleep(CALM)
    finally:
        stop(server)
    return {"baseline": baseline.summary(), "attacks": attacks}


def met(window: Window, baseline: Window) -> bool:
    return window.failed == 0 and window.percentile(99) <= P99_FACTOR * baseline.percentile(99)


def memory(bench: Bench, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    # Two servers: memory freed by one set of connections is reused by the next, and would
    # make it look cheaper.
    progress(f"no-read, {mode}: {IDLE_CONNECTIONS} idle TLS connections")
    server = bench.server(mode)
    try:
        quiet = asyncio.run(idle(server, bench.verify, IDLE_CONNECTIONS))
    finally:
        stop(server)
    progress(f"no-read, {mode}: {args.clients} clients that never read, held {HOLD:g} s")
    server = bench.server(mode)
    try:
        unread = asyncio.run(no_read(server, bench.verify, bench.small.request, args.clients, HOLD))
    finally:
        stop(server)
    return {
        "idle": {
            "connections": quiet.connections,
            "rss_before_mib": round(quiet.before, 1),
            "rss_after_mib": round(quiet.after, 1),
            "per_connection_mib": round(quiet.per_connection, 3),
        },
        "no_read": unread.summary(),
    }


def seed(registry: LocalRegistry) -> list[str]:
    with httpx.Client(timeout=30.0, trust_env=False) as client:
        names = seed_many(client, registry.url, 1, 3)
    return [f"{registry.host}/{name}" for name in names]


def run(args: argparse.Namespace) -> dict[str, Any]:
    binary = find_registry_binary()
    if binary is None:
        raise BenchmarkError(
            "docker-registry not found (apt-get install docker-registry)", EXIT_UNAVAILABLE
        )
    figures: dict[str, Any] = {"machine_before": machine(), "options": vars(args).copy()}
    passes: list[tuple[str, Callable[[Bench, str, argparse.Namespace], dict[str, Any]]]] = []
    if args.pass_ in ("trickle", "all"):
        passes.append(("trickle", trickle))
    if args.pass_ in ("no-read", "all"):
        passes.append(("no_read", memory))
    with tempfile.TemporaryDirectory(prefix="imagecheck-bench-attack-") as tmp:
        workdir = Path(tmp)
        registry = LocalRegistry(workdir / "registry", binary=binary)
        try:
            registry.start()
        except RuntimeError as exc:
            raise BenchmarkError(f"cannot start docker-registry: {exc}", EXIT_UNAVAILABLE) from None
        try:
            bench = Bench(workdir, make_tls_material(workdir), seed(registry))
            for name, measure in passes:
                figures[name] = {mode: measure(bench, mode, args) for mode in MODES}
        finally:
            registry.stop()
    figures["machine_after"] = machine()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pass", dest="pass_", choices=("trickle", "no-read", "all"),
                        default="all", help="which pass to run (all)")  # fmt: skip
    parser.add_argument("--attackers", type=int, default=60, help="trickling attackers (60)")
    parser.add_argument("--clients", type=int, default=20, help="clients that never read (20)")
    parser.add_argument("--duration", type=float, default=5.0,
                        help="seconds of each victim window (5)")  # fmt: skip
    parser.add_argument("--trickle-ms", type=float, default=10.0,
                        help="milliseconds between an attacker's body bytes (10)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="figures as JSON on stdout")
    args = parser.parse_args()
    try:
        figures = run(args)
    except BenchmarkError as exc:
        print(f"webhook_attack: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    report(figures, P99_FACTOR)
    if args.json:
        print(json.dumps(figures, indent=2))
    sys.exit(0)


if __name__ == "__main__":
    main()
