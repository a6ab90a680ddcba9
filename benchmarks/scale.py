"""Many images in one run (issue #14): ``imagecheck check`` of 1,000, 10,000 and 100,000 images,
for time that grows linearly with the number of images and a peak RSS of at most 150 MiB.

Usage: ``python benchmarks/scale.py [--sizes 1000,10000,100000] [--repos 1000]``

**The registry is a stand-in**, not Distribution: seeding ``docker-registry`` with 100,000
manifests takes longer than the run itself. The stand-in (``webhook_soak.serve_registry``, in a
child process: asyncio, HTTP/1.1 keep-alive on 127.0.0.1, plain HTTP, answering a TLS hello
as Go's server does) speaks just the part of the distribution API a check uses: ``GET /v2/``
is 200; ``HEAD`` (or ``GET``) of ``/v2/<name>/manifests/<tag>`` is 200 with an OCI manifest's
``Content-Type``, a ``Content-Length`` and a ``Docker-Content-Digest`` (the sha256 of the
name and tag), or 404 ``MANIFEST_UNKNOWN`` when the tag starts with ``absent``. So the figures
are imagecheck's own cost per image, over real HTTP, with a registry that answers about as
fast as Python can.

**The images**: ``STAND-IN/scale/r<i mod --repos>:t<i>``, one in a hundred ``:absent-<i>``,
written one per line to a file and given as ``python -m imagecheck check --output json
--deadline 3600 --from-file FILE``: the real command line (100,000 references as arguments
would be about 3 MB, over Linux's 2 MiB default, and CPython alone peaks at ~130 MiB with that
many). The default ``--deadline 60`` would cut 100,000 images off.

**Figures**, for each size, one run: the wall time (``time.perf_counter()`` around the child,
start-up included), the time per image, and the child's own peak RSS (``os.wait4``, through
``_common.run_child``'s trampoline). Linearity is read from the slope: the time per added
image from one size to the next, against the same between the first two sizes. Every answer
is checked (``_common.check_imagecheck``: found with a digest, or missing; in order; exit 1).

**Targets**, printed as PASS or MISS: peak RSS at the largest size <= 150 MiB; the slope of
the last step at most 1.25 times the first. Exit 1: a wrong answer; 2: the stand-in cannot
start; otherwise 0.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as `python benchmarks/scale.py`: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (
    BenchmarkError,
    check_imagecheck,
    child_env,
    imagecheck_argv,
    progress,
    run_child,
)
from benchmarks._webhook_report import machine, verdict
from benchmarks.webhook_soak import response, serve_registry, wait_listening
from tests.support.net import free_port

RSS_TARGET_MIB = 150.0
SLOPE_TARGET = 1.25  # the last step's time per added image, over the first step's
ABSENT_EVERY = 100
DEADLINE = "3600"
_MANIFEST = re.compile(rb"/v2/(.+)/manifests/([^/]+)")
MEDIA_TYPE = b"application/vnd.oci.image.manifest.v1+json"
MANIFEST_SIZE = 512


# -- the stand-in registry (a child process) -------------------------------------------------


def answer(method: bytes, target: bytes) -> bytes:
    if target == b"/v2/":
        return response(200, b"{}")
    found = _MANIFEST.fullmatch(target)
    if found is None:
        return response(404, b"{}")
    name, tag = found.groups()
    if tag.startswith(b"absent"):
        body = b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}'
        return response(404, b"" if method == b"HEAD" else body, length=len(body))
    digest = hashlib.sha256(name + b":" + tag).hexdigest().encode()
    headers = b"Docker-Content-Digest: sha256:" + digest + b"\r\n"
    head = response(200, b"", headers, length=MANIFEST_SIZE)
    head = head.replace(b"application/json", MEDIA_TYPE, 1)
    return head if method == b"HEAD" else head + b" " * MANIFEST_SIZE


def stand_in(port: int) -> None:
    asyncio.run(serve_registry(port, answer))


# -- the runs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    images: int
    seconds: float
    rss_mib: float

    @property
    def ms_per_image(self) -> float:
        return self.seconds / self.images * 1000


def image_list(host: str, count: int, repos: int) -> tuple[list[str], set[str]]:
    images, present = [], set()
    for i in range(count):
        tag = f"absent-{i}" if i % ABSENT_EVERY == ABSENT_EVERY - 1 else f"t{i}"
        image = f"{host}/scale/r{i % repos}:{tag}"
        images.append(image)
        if not tag.startswith("absent"):
            present.add(image)
    return images, present


def run_size(host: str, count: int, repos: int, env: dict[str, str], workdir: Path) -> Size:
    images, present = image_list(host, count, repos)
    listed = workdir / "images"
    listed.write_text("\n".join(images), encoding="utf-8")
    argv = imagecheck_argv([], ["--deadline", DEADLINE, "--from-file", str(listed)])
    started = time.perf_counter()
    child = run_child(argv, env, small_parent=True)
    seconds = time.perf_counter() - started
    check_imagecheck(images, present, child)
    return Size(count, seconds, child.max_rss_kib / 1024)


def report(sizes: Sequence[Size], repos: int, load_before: str) -> None:
    print(f"imagecheck check --output json --from-file: {repos} repositories, one image in "
          f"{ABSENT_EVERY} missing, a stand-in registry (plain HTTP, 127.0.0.1)")  # fmt: skip
    print(f"machine: {load_before}")
    print()
    print(f"{'images':>8}  {'wall s':>8}  {'ms/image':>9}  {'ms/added image':>14}  "
          f"{'peak RSS MiB':>12}")  # fmt: skip
    previous: Size | None = None
    slopes = []
    for size in sizes:
        slope = ""
        if previous is not None:
            added = (size.seconds - previous.seconds) / (size.images - previous.images) * 1000
            slopes.append(added)
            slope = f"{added:14.3f}"
        print(f"{size.images:8d}  {size.seconds:8.2f}  {size.ms_per_image:9.3f}  {slope:>14}  "
              f"{size.rss_mib:12.1f}")  # fmt: skip
        previous = size
    print()
    last = sizes[-1]
    print(f"peak RSS at {last.images} images: {last.rss_mib:.1f} MiB   target <= "
          f"{RSS_TARGET_MIB:g} MiB: {verdict(last.rss_mib <= RSS_TARGET_MIB)}")  # fmt: skip
    if len(slopes) >= 2:
        ratio = slopes[-1] / slopes[0]
        print(f"linear: last step {slopes[-1]:.3f} ms per added image, {ratio:.2f}x the first   "
              f"target <= {SLOPE_TARGET:g}x: {verdict(ratio <= SLOPE_TARGET)}")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    load_before = machine()
    sizes = sorted(int(n) for n in args.sizes.split(","))
    port = free_port()
    registry = subprocess.Popen(
        [sys.executable, __file__, "--stand-in", str(port)], stdin=subprocess.DEVNULL
    )
    figures = []
    try:
        wait_listening(port)
        with tempfile.TemporaryDirectory(prefix="imagecheck-bench-scale-") as tmp:
            env = child_env(Path(__file__).resolve().parents[1], Path(tmp))
            for count in sizes:
                progress(f"{count} images")
                host = f"127.0.0.1:{port}"
                figures.append(run_size(host, count, args.repos, env, Path(tmp)))
                progress(f"{count} images: {figures[-1].seconds:.1f} s")
    finally:
        registry.terminate()
        registry.wait(15)
    report(figures, args.repos, load_before)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000,100000", help="images per run")
    parser.add_argument("--repos", type=int, default=1000, help="repositories (1000)")
    parser.add_argument("--stand-in", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stand_in:
        stand_in(args.stand_in)
        return
    try:
        sys.exit(run(args))
    except BenchmarkError as exc:
        print(f"scale: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
