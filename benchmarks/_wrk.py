"""The webhook benchmark's timed load: ``wrk`` (Debian's 4.1, OpenSSL, Lua), a process of its
own written in C, so that the client's CPU is small and is not measured in the benchmark's
own process (issue #14: the Python client shared the two cores and the measuring loop).

It sends the reviews of ``webhook_wrk.lua``'s file (one JSON body a line) over
``connections`` keep-alive TLS connections for ``seconds`` and reports the latency
percentiles (HdrHistogram, microseconds) that the script's ``done()`` prints as JSON.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).with_name("webhook_wrk.lua")


class WrkError(Exception):
    """wrk is missing, failed, or printed no figures."""


@dataclass(frozen=True)
class WrkRun:
    requests: int
    seconds: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    status_errors: int
    socket_errors: int
    cpu_seconds: float  # wrk's own user + system CPU

    @property
    def throughput(self) -> float:
        return self.requests / self.seconds


def find_wrk() -> str | None:
    return shutil.which("wrk")


def run_wrk(
    url: str, bodies: Sequence[bytes], workdir: Path, *, connections: int, seconds: int
) -> WrkRun:
    """``wrk -t 1 -c connections -d seconds`` POSTing ``bodies`` to ``url/validate``."""
    binary = find_wrk()
    if binary is None:
        raise WrkError("wrk not found (apt-get install wrk, or scripts/system-deps.sh)")
    reviews = workdir / "wrk-reviews.jsonl"
    reviews.write_bytes(b"".join(body + b"\n" for body in bodies))
    argv = [
        binary, "-t", "1", "-c", str(connections), "-d", f"{seconds}s", "--timeout", "10s",
        "-s", str(SCRIPT), url, "--", str(reviews),
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise WrkError(f"wrk exited {done.returncode}: {done.stderr.strip()[:300]}")
    line = next((x for x in reversed(done.stdout.splitlines()) if x.startswith("{")), None)
    if line is None:
        raise WrkError(f"wrk printed no figures: {done.stdout.strip()[-300:]}")
    figures = json.loads(line)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return WrkRun(
        requests=figures["requests"],
        seconds=figures["duration_us"] / 1e6,
        p50_ms=figures["p50_us"] / 1000,
        p90_ms=figures["p90_us"] / 1000,
        p99_ms=figures["p99_us"] / 1000,
        max_ms=figures["max_us"] / 1000,
        status_errors=figures["status_errors"],
        socket_errors=figures["socket_errors"],
        cpu_seconds=cpu,
    )


__all__ = ["WrkError", "WrkRun", "find_wrk", "run_wrk"]
