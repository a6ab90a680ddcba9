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
given on the command line as ``python -m imagecheck check --output json --deadline 3600
IMAGE...`` (``check`` has no file input; 100,000 references are about 3 MB of arguments, over
Linux's 2 MiB default, so the benchmark raises its own stack limit, which sets that bound,
for its children). The default ``--deadline 60`` would cut 100,000 images off.

**Figures**, for each size, one run: the wall time (``time.perf_counter()`` around the child,
start-up included), the time per image, and the child's own peak RSS (``os.wait4``, through a
trampoline like ``_common.run_child``'s that reads the command from a file: see
``_TRAMPOLINE``). Linearity is read from the slope: the time per added image from one size to
the next, against the same between the first two sizes. Every answer is checked
(``_common.check_imagecheck``: found with a digest, or missing; in order; exit 1).

**Targets**, printed as PASS or MISS: peak RSS at the largest size <= 150 MiB; the slope of
the last step at most 1.25 times the first. Exit 1: a wrong answer; 2: the stand-in cannot
start; otherwise 0.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

if not __package__:  # run as `python benchmarks/scale.py`: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (  # _spawn: run_child's own, for the trampoline below
    BenchmarkError,
    Child,
    _spawn,
    check_imagecheck,
    child_env,
    imagecheck_argv,
    progress,
)
from benchmarks.webhook_load import free_port, machine, verdict
from benchmarks.webhook_soak import response, serve_registry, wait_listening

RSS_TARGET_MIB = 150.0
SLOPE_TARGET = 1.25  # the last step's time per added image, over the first step's
ABSENT_EVERY = 100
DEADLINE = "3600"
# Linux allows a quarter of the stack limit for arguments and environment (fs/exec.c).
STACK_FOR_ARGUMENTS = 256 * 1024 * 1024
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


# ``_common.run_child``'s trampoline takes the command on its own command line: with 100,000
# arguments its ``sys.argv`` (and the interpreter's copies of it) come to about 120 MiB, which
# the child inherits at fork and Linux keeps in the child's ``ru_maxrss`` across exec. This
# one reads the command, NUL-separated, from a file, as bytes: about 10 MiB at 100,000.
_TRAMPOLINE = """\
import os, sys
with open(sys.argv[2], "rb") as f:
    argv = f.read().split(b"\\0")
pid = os.fork()
if pid == 0:
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
del argv
_, status, usage = os.wait4(pid, 0)
os.write(int(sys.argv[1]), f"{status} {usage.ru_maxrss}".encode())
"""


def run_from_file(argv: Sequence[str], env: dict[str, str], workdir: Path) -> Child:
    """Run ``argv`` through the trampoline above: its exit code, output, and its own peak
    RSS (above the trampoline's floor, about 8 MiB plus the command's bytes)."""
    command = workdir / "argv"
    command.write_bytes(b"\0".join(os.fsencode(a) for a in argv))
    report_r, report_w = os.pipe()
    try:
        trampoline = [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, str(report_w), str(command)]
        child = _spawn(trampoline, env, (report_w,))
        os.close(report_w)
        report_w = -1
        status, max_rss = (int(word) for word in os.read(report_r, 64).split())
    finally:
        os.close(report_r)
        if report_w >= 0:
            os.close(report_w)
    return replace(child, returncode=os.waitstatus_to_exitcode(status), max_rss_kib=max_rss)


# ``imagecheck check --output json --deadline D IMAGE...``, the images read from a file: the
# command itself (``imagecheck.cli.main``: parsing, the run, the rendering, the exit code),
# without the cost of 100,000 arguments to exec (CPython's copies of them, ~130 MiB).
FROM_FILE = """\
import sys
with open(sys.argv[1], encoding="utf-8") as f:
    images = f.read().split()
sys.argv = ["imagecheck", "check", "--output", "json", "--deadline", sys.argv[2], *images]
del images
from imagecheck.cli import main
main()
"""


def run_size(
    host: str, count: int, repos: int, env: dict[str, str], workdir: Path, via: str
) -> Size:
    images, present = image_list(host, count, repos)
    if via == "argv":
        argv = [*imagecheck_argv(images), "--deadline", DEADLINE]
    else:
        listed = workdir / "images"
        listed.write_text("\n".join(images), encoding="utf-8")
        argv = [sys.executable, "-c", FROM_FILE, str(listed), DEADLINE]
    started = time.perf_counter()
    child = run_from_file(argv, env, workdir)
    seconds = time.perf_counter() - started
    check_imagecheck(images, present, child)
    return Size(count, seconds, child.max_rss_kib / 1024)


def allow_long_argv() -> None:
    """Raise the stack limit that bounds a child's arguments (inherited by the children)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    wanted = (
        STACK_FOR_ARGUMENTS if hard == resource.RLIM_INFINITY else min(hard, STACK_FOR_ARGUMENTS)
    )
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_STACK, (wanted, hard))


def report(sizes: Sequence[Size], repos: int, via: str, load_before: str) -> None:
    how = "the images from a file" if via == "file" else "the images as arguments"
    print(f"imagecheck check --output json, {how}: {repos} repositories, one image in "
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
    allow_long_argv()
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
                figures.append(run_size(host, count, args.repos, env, Path(tmp), args.via))
                progress(f"{count} images: {figures[-1].seconds:.1f} s")
    finally:
        registry.terminate()
        registry.wait(15)
    report(figures, args.repos, args.via, load_before)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000,100000", help="images per run")
    parser.add_argument("--repos", type=int, default=1000, help="repositories (1000)")
    parser.add_argument(
        "--via",
        choices=("file", "argv"),
        default="file",
        help="file: the command's code, the images read from a file (default); argv: "
        "python -m imagecheck check IMAGE... (CPython alone takes ~130 MiB for 100,000 arguments)",
    )
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
