"""Soak ``imagecheck serve`` with reviews of distinct images and watch its memory (issue #10):
a process that lives for months must not grow with every image, token and failure it sees.

Usage: ``python benchmarks/webhook_soak.py [--reviews 100000] [--every 10000] [--workers 32]``

**Setup.** Two stand-in registries (this script, ``--stand-in``, as a child process: asyncio,
HTTP/1.1 keep-alive on 127.0.0.1) that answer as fast as Python can. One has Bearer token
auth, so that each repository costs a token: ``GET /v2/`` is 401 with a challenge, the realm
hands out a token per scope (``expires_in`` one hour); the other needs no auth (a token fetch
is a second request; one review in ten goes to the first). ``HEAD`` of a manifest is 404
(missing) for even-numbered repositories and 500 (a failing registry) for odd ones.
``imagecheck serve`` over TLS with ``--retries 0 --missing-ttl 1h --cache-ttl 1h``, so that
nothing expires during the run and every structure that can grow does: the result cache
(missing images), the token cache (a token per repository), the per-image error memory (the
500s).

**Load.** Review *n* names one image, ``STAND-IN/soak/r<n>:1``: every review is of a distinct
image and a distinct repository (and, on the token registry, a distinct token scope).
``--workers`` clients each keep one TLS connection and send reviews back to back (raw
HTTP/1.1, so that the client's own CPU does not cap the rate). Each answer is checked:
missing images refused (403), failing ones allowed with a warning (``--on-error pass``); one
whose registry did not answer within the deadline (a busy machine) is counted as *late*.

**Figures.** The server's RSS (``VmRSS`` from ``/proc/PID/status``) before the first review
and after every ``--every`` reviews, with the rate; then the growth from the first sample to
the last, and from the sample at 20,000 reviews (once the 10,000-entry result cache and the
1,024-token cache are full) to the last. Exit 1 on a wrong answer, 2 when the server cannot
start; otherwise 0. The server spends 5-10 ms of CPU per review, nearly all in httpx's
connection pool: 100,000 reviews take 10-20 minutes on 2 cores, longer on a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as `python benchmarks/webhook_soak.py`: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._openloop import process_cpu_seconds
from benchmarks._webhook_reviews import read_response
from benchmarks._webhook_server import (
    EXIT_UNAVAILABLE,
    EXIT_WRONG,
    BenchmarkError,
    progress,
)
from tests.support.net import free_port
from tests.support.pki import TLSMaterial, make_tls_material

START_TIMEOUT = 15.0
SETTLED_AT = 20_000  # reviews after which every bounded structure is full
TOKEN_EVERY = 10  # one review in this many goes to the registry with token auth
_REPO = re.compile(rb"/v2/soak/r(\d+)/manifests/")

# -- the stand-in registry (a child process) -------------------------------------------------


async def stand_in(token_port: int, open_port: int) -> None:
    """Two registries in one process: token auth on ``token_port``, none on ``open_port``."""
    realm = f"http://127.0.0.1:{token_port}/token"
    challenge = f'Bearer realm="{realm}",service="soak"'.encode()
    await asyncio.gather(
        serve_registry(token_port, lambda method, target: answer(method, target, challenge)),
        serve_registry(open_port, lambda method, target: answer(method, target, None)),
    )


async def serve_registry(port: int, respond: Callable[[bytes, bytes], bytes]) -> None:
    """Serve HTTP/1.1 keep-alive on 127.0.0.1:``port``: ``respond(method, target)`` is the
    whole response to each request (bodies of requests are not read: HEAD and GET only)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readexactly(1)
            if head == b"\x16":  # a TLS hello: this is plain HTTP, say so as Go's server does
                writer.write(b"HTTP/1.0 400 Bad Request\r\n\r\n")
                raise ConnectionError
            while True:
                head += await reader.readuntil(b"\r\n\r\n")
                method, target, _ = head.split(b"\r\n", 1)[0].split(b" ", 2)
                writer.write(respond(method, target))
                head = b""
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=512)
    async with server:
        await server.serve_forever()


def answer(method: bytes, target: bytes, challenge: bytes | None) -> bytes:
    if target == b"/v2/":
        if challenge is None:
            return response(200, b"{}")
        return response(401, b"{}", b"WWW-Authenticate: " + challenge + b"\r\n")
    if target.startswith(b"/token?"):
        scope = target.partition(b"scope=")[2].partition(b"&")[0]
        token = json.dumps({"token": "t-" + scope.decode(), "expires_in": 3600}).encode()
        return response(200, token)
    found = _REPO.match(target)
    if found is None:
        return response(400, b"{}")
    body = b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}'
    status = 404 if int(found.group(1)) % 2 == 0 else 500
    return response(status, b"" if method == b"HEAD" else body, length=len(body))


def response(status: int, body: bytes, extra: bytes = b"", length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n"
    return head.encode() + extra + b"\r\n" + body


# -- the server ------------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise BenchmarkError(f"no VmRSS for process {pid}", EXIT_UNAVAILABLE)


def start_server(
    workdir: Path, tls: TLSMaterial, verify: ssl.SSLContext
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "IMAGECHECK_"))}
    env["HOME"] = str(workdir)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    argv = [
        sys.executable, "-m", "imagecheck", "serve",
        "--listen", f"127.0.0.1:{port}",
        "--tls-cert", str(tls.server.cert), "--tls-key", str(tls.server.key),
        "--retries", "0", "--cache-ttl", "1h", "--missing-ttl", "1h",
    ]  # fmt: skip
    log = (workdir / "serve.log").open("wb")
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=log, env=env)  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if asyncio.run(get_status(port, verify, b"/readyz")) == 200:
                return process, port
        except OSError:
            pass
        time.sleep(0.1)
    stop(process)
    raise BenchmarkError("imagecheck serve did not start (see serve.log)", EXIT_UNAVAILABLE)


def wait_listening(port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            time.sleep(0.1)
        else:
            return
    raise BenchmarkError("the stand-in registry did not start", EXIT_UNAVAILABLE)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)


async def get_status(port: int, verify: ssl.SSLContext, path: bytes) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=verify)
    try:
        writer.write(b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        status, _ = await read_response(reader)
        return status
    finally:
        writer.close()


# -- the load --------------------------------------------------------------------------------


def review(registries: tuple[str, str], n: int) -> tuple[bytes, str]:
    registry = registries[0] if n % TOKEN_EVERY == 0 else registries[1]
    uid = str(uuid.uuid4())
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"soak-{n}", "namespace": "soak"},
        "spec": {"containers": [{"name": "app", "image": f"{registry}/soak/r{n}:1"}]},
    }
    body = json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "namespace": "soak", "operation": "CREATE", "object": obj},
    }).encode()  # fmt: skip
    head = (
        b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
    )
    return head + body, uid


LATE = "no answer from the registry within the deadline"


def wrong(n: int, uid: str, status: int, body: bytes) -> str | None:
    """What is wrong with the answer to review ``n`` (None: nothing); ``LATE`` when the
    registry did not answer within the deadline (a busy machine: allowed, and counted)."""
    if status != 200:
        return f"review {n}: HTTP {status} {body[:200]!r}"
    answer = json.loads(body)["response"]
    if answer["uid"] != uid:
        return f"review {n}: uid {answer['uid']!r}"
    warnings = answer.get("warnings") or []
    if answer["allowed"] and warnings and LATE in warnings[0]:
        return LATE
    missing = n % 2 == 0
    if answer["allowed"] is missing or (not missing and not warnings):
        return f"review {n}: {answer}"
    return None


@dataclass
class Sample:
    reviews: int
    rss: float
    seconds: float
    cpu: float | None
    late: int  # reviews whose registry did not answer within the deadline, so far


async def soak(port: int, verify: ssl.SSLContext, registries: tuple[str, str],
               args: argparse.Namespace, pid: int) -> list[Sample]:  # fmt: skip
    started = time.monotonic()
    samples = [Sample(0, rss_mib(pid), 0.0, process_cpu_seconds(pid), 0)]
    next_n = 0
    done = late = 0
    problems: list[str] = []

    async def worker() -> None:
        nonlocal next_n, done, late
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=verify)
        try:
            while next_n < args.reviews and not problems:
                n, next_n = next_n, next_n + 1
                request, uid = review(registries, n)
                writer.write(request)
                status, body = await read_response(reader)
                problem = wrong(n, uid, status, body)
                if problem == LATE:
                    late += 1
                elif problem:
                    problems.append(problem)
                done += 1
                if done % args.every == 0:
                    seconds = time.monotonic() - started
                    cpu = process_cpu_seconds(pid)
                    sample = Sample(done, rss_mib(pid), seconds, cpu, late)
                    samples.append(sample)
                    progress(f"{done} reviews, RSS {sample.rss:.1f} MiB, {done / seconds:.0f}/s")
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(args.workers)))
    if problems:
        raise BenchmarkError(f"{len(problems)} wrong answer(s); first: {problems[0]}", EXIT_WRONG)
    return samples


def report(samples: list[Sample], args: argparse.Namespace) -> None:
    print(f"imagecheck serve soak: {samples[-1].reviews} reviews, one distinct image each "
          f"(half missing, half failing with HTTP 500), one in ten behind token auth; "
          f"{args.workers} keep-alive TLS clients; {os.cpu_count()} CPU(s), "
          f"Python {sys.version.split()[0]}")  # fmt: skip
    print()
    print(f"{'reviews':>9}  {'RSS MiB':>8}  {'reviews/s':>9}  {'server CPU s':>12}  {'late':>5}")
    for sample in samples:
        rate = f"{sample.reviews / sample.seconds:9.0f}" if sample.seconds else f"{'':>9}"
        cpu = f"{sample.cpu - samples[0].cpu:12.1f}" if sample.cpu and samples[0].cpu else ""
        print(f"{sample.reviews:9d}  {sample.rss:8.1f}  {rate}  {cpu:>12}  {sample.late:5d}")
    print()
    first, last = samples[0], samples[-1]
    print(f"growth over the run:              {last.rss - first.rss:+7.1f} MiB")
    settled = next((s for s in samples if s.reviews >= SETTLED_AT), None)
    if settled is not None and settled is not last:
        grown = last.rss - settled.rss
        per = grown * 1024 * 1024 / (last.reviews - settled.reviews)
        print(f"growth from {settled.reviews} reviews to the end: {grown:+7.1f} MiB "
              f"({per:+.1f} bytes per review)")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="imagecheck-bench-soak-") as tmp:
        workdir = Path(tmp)
        tls = make_tls_material(workdir)
        verify = ssl.create_default_context(cafile=str(tls.ca_file))
        ports = (free_port(), free_port())
        registry = subprocess.Popen(
            [sys.executable, __file__, "--stand-in", f"{ports[0]},{ports[1]}"],
            stdin=subprocess.DEVNULL,
        )
        server = None
        try:
            for registry_port in ports:
                wait_listening(registry_port)
            server, port = start_server(workdir, tls, verify)
            progress(f"{args.reviews} reviews, {args.workers} clients")
            samples = asyncio.run(
                soak(
                    port,
                    verify,
                    (f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}"),
                    args,
                    server.pid,
                )
            )
        finally:
            if server is not None:
                stop(server)
            registry.terminate()
            registry.wait(15)
    report(samples, args)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reviews", type=int, default=100_000, help="reviews (100000)")
    parser.add_argument("--every", type=int, default=10_000, help="RSS sample interval (10000)")
    parser.add_argument("--workers", type=int, default=32, help="client connections (32)")
    parser.add_argument("--stand-in", metavar="PORT,PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stand_in:
        token_port, open_port = (int(p) for p in args.stand_in.split(","))
        asyncio.run(stand_in(token_port, open_port))
        return
    try:
        sys.exit(run(args))
    except BenchmarkError as exc:
        print(f"webhook_soak: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
