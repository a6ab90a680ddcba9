"""``imagecheck reap`` over a cluster of 10,000 pods and more (issue #15): memory that depends on
the stuck pods kept, not on the pods listed.

Usage: ``python benchmarks/reap_scale.py [--sizes 1000,10000,100000] [--stuck 300]``

**The cluster** is ``tests.support.manypods.ManyPods``: in memory, its pods made one by one as
they are listed (about 1.2 KB of JSON each, as the API's decoder would hand them over, never
held by the fake), ``--stuck`` of them waiting on an image pull, each owned by its own Job;
two in three of those images are missing. The registry is faked at the transport (respx, as
the unit tests do). So the figures are reap's own: what the pass keeps while the pods stream.

**What runs**, for each size, each under ``tracemalloc`` (started once the checker exists):
a pass as ``reap --once`` runs it (``Reaper.run_once``: it patches the Jobs of the missing
images and writes their Events into the fake, whose record of them is in the figure) and the
loop's list (``ReapLoop.relist``, over a fresh cluster, the same actions). Figures: the wall
time (tracemalloc slows Python about twice), the stuck pods kept, and the peak of traced memory,
per pod listed and per stuck pod.

**Target**, printed as PASS or MISS: the peak at the largest size at most 1.5 times the peak at
the smallest (memory bounded by the stuck pods, not by the cluster). Exit 0 either way.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import respx

if not __package__:  # run as `python benchmarks/reap_scale.py`: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from imagecheck.cluster import Reaper, ReapLoop, ReapOptions
from imagecheck.registry import ClientOptions, ImageChecker
from tests.support.manypods import ManyPods
from tests.support.reapcase import NOW, registry

PEAK_RATIO_TARGET = 1.5


@dataclass(frozen=True)
class Figure:
    mode: str
    pods: int
    kept: int
    seconds: float
    peak: int  # bytes

    def row(self) -> str:
        per_pod = self.peak / self.pods
        per_stuck = self.peak / self.kept if self.kept else 0.0
        return (
            f"| {self.mode} | {self.pods:,} | {self.kept} | {self.seconds:.2f} s "
            f"| {self.peak / 1024:,.0f} KiB | {per_pod:,.0f} B | {per_stuck:,.0f} B |"
        )


async def measure(
    mode: str, pods: int, stuck: int, run: Callable[[Reaper], Awaitable[int]]
) -> Figure:
    cluster = ManyPods(pods, stuck)
    transport = httpx.MockTransport(registry(respx.Router()).async_handler)
    async with ImageChecker(ClientOptions(retries=0), transport=transport) as checker:
        reaper = Reaper(cluster, checker, ReapOptions(), clock=lambda: NOW)
        tracemalloc.start()
        began = time.perf_counter()
        kept = await run(reaper)
        seconds = time.perf_counter() - began
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return Figure(mode, pods, kept, seconds, peak)


async def once(reaper: Reaper) -> int:
    return len(await reaper.run_once())


async def loop_list(reaper: Reaper) -> int:
    loop = ReapLoop(reaper, 60.0, lambda outcome: None)
    await loop.relist()
    return len(loop.stuck)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="pods listed, per run")
    parser.add_argument("--stuck", type=int, default=300, help="stuck pods among them")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    logging.getLogger("imagecheck").setLevel(logging.ERROR)
    print("| mode | pods | stuck kept | wall | peak traced | per pod | per stuck pod |")
    print("|---|---|---|---|---|---|---|")
    verdicts = []
    for mode, run in (("reap --once", once), ("loop's list", loop_list)):
        figures = [asyncio.run(measure(mode, n, args.stuck, run)) for n in sizes]
        for figure in figures:
            print(figure.row(), flush=True)
        ratio = figures[-1].peak / figures[0].peak
        ok = ratio <= PEAK_RATIO_TARGET
        verdicts.append(
            f"{mode}: peak at {sizes[-1]:,} pods / at {sizes[0]:,}: {ratio:.2f}x "
            f"({'PASS' if ok else 'MISS'} <= {PEAK_RATIO_TARGET}x)"
        )
    print("\n" + "\n".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
