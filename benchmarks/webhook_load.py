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
import ssl
import sys
import tempfile
from pathlib import Path

import httpx

from tests.support.images import seed_many
from tests.support.pki import make_tls_material
from tests.support.registry import LocalRegistry, find_registry_binary

if not __package__:  # run as `python benchmarks/webhook_load.py`: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._webhook_phases import Setup, cold_phase, warm_phase
from benchmarks._webhook_report import RATE_TARGET, machine, report
from benchmarks._webhook_server import (
    EXIT_UNAVAILABLE,
    EXIT_WRONG,
    BenchmarkError,
    progress,
)
from benchmarks._wrk import find_wrk

MISSING_SHARE = 0.10


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
        tls = make_tls_material(workdir)
        registry = LocalRegistry(workdir / "registry", binary=binary)
        try:
            registry.start()
        except RuntimeError as exc:
            raise BenchmarkError(f"cannot start docker-registry: {exc}", EXIT_UNAVAILABLE) from None
        try:
            progress(f"seeding {args.images} images")
            present, absent = seed(registry, args.images)
            verify = ssl.create_default_context(cafile=str(tls.ca_file))
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
