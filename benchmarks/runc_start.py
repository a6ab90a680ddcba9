"""Start-to-exit of one found check under containerd + runc, against the same check on the host
and against the runtime's own floor.

Usage: ``python benchmarks/runc_start.py [--rounds N]`` (default 10). Needs root, containerd,
runc, docker-registry and the image built (``scripts/image-build.sh``; buildah's
localhost/imagecheck:dev).

A private containerd (tests/support/containerd.py) and a no-auth registry on 127.0.0.1 seeded
with the samples. Each round runs every row once, in turn, after one untimed warm-up of each:

* ``runc: imagecheck check IMAGE`` -- the image as the kubelet starts job.yaml's initContainer
  (tests/support/runc.py: snapshot mounted, spec written, ``ctr run --rm --config``, attached,
  to its exit), verified: exit 0 and ``found``;
* ``host: python -m imagecheck check IMAGE`` -- the same check, no container, verified alike;
* ``runc: a static program`` -- the runtime's floor: the same harness running a one-layer image
  whose whole content is a 159-byte static program that writes a line and exits
  (tests/support/tinyimage.py), verified by its line.

Figures: wall time from spawn to exit, median and min over the rounds, in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.support.containerd import ContainerdDaemon
from tests.support.images import seed_samples
from tests.support.registry import LocalRegistry
from tests.support.runc import Container, Runner
from tests.support.tinyimage import TinyImage

IMAGE = os.environ.get("IMAGECHECK_IMAGE", "localhost/imagecheck:dev")
TINY = "localhost/floor:1"


def _import_image(runner: Runner, work: Path) -> None:
    archive = work / "image.tar"
    env = os.environ | {"STORAGE_DRIVER": "vfs"}
    subprocess.run(
        ["buildah", "push", "--quiet", IMAGE, f"oci-archive:{archive}:{IMAGE}"],
        env=env,
        check=True,
        capture_output=True,
    )
    runner.ctr("images", "import", str(archive))
    TinyImage.build(b"floor\n").write_archive(work / "tiny.tar", TINY)
    runner.ctr("images", "import", str(work / "tiny.tar"))


def _rows(runner: Runner, ref: str) -> dict[str, Callable[[], bool]]:
    def in_runc() -> bool:
        done = runner.run(Container(IMAGE, ("check", ref)))
        return done.code == 0 and done.stdout.startswith("found ")

    def on_host() -> bool:
        done = subprocess.run(
            [sys.executable, "-m", "imagecheck", "check", ref],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.returncode == 0 and done.stdout.startswith("found ")

    def floor() -> bool:
        done = runner.run(Container(TINY))
        return done.code == 0 and done.stdout == "floor\n"

    return {
        "runc: imagecheck check IMAGE": in_runc,
        "host: python -m imagecheck check IMAGE": on_host,
        "runc: a static program (the floor)": floor,
    }


def _measure(rows: dict[str, Callable[[], bool]], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in rows}
    for name, row in rows.items():  # warm-up
        if not row():
            raise SystemExit(f"wrong answer: {name}")
    for _ in range(rounds):
        for name, row in rows.items():
            started = time.perf_counter()
            ok = row()
            times[name].append(time.perf_counter() - started)
            if not ok:
                raise SystemExit(f"wrong answer: {name}")
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="runc-start-") as tmp:
        work = Path(tmp)
        (work / "registry").mkdir()
        with (
            LocalRegistry(work / "registry") as registry,
            ContainerdDaemon(work / "containerd") as daemon,
        ):
            with httpx.Client(timeout=30, trust_env=False) as client:
                seed_samples(client, registry.url)
            runner = Runner(daemon, "bench", work / "runs")
            _import_image(runner, work)
            times = _measure(_rows(runner, f"{registry.host}/sample/app:1.0.0"), rounds)
    print(f"{'row':<42} {'median ms':>10} {'min ms':>8}   ({rounds} rounds)")
    for name, values in times.items():
        median, low = statistics.median(values) * 1000, min(values) * 1000
        print(f"{name:<42} {median:>10.0f} {low:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
