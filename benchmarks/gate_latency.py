"""``imagecheck gate``: how long a pod waits on the scheduling gate, from its creation (gated)
to the gate being lifted, for an image the controller asked about just before (cached), an
image it never asked about (cold), and a burst of pods created at once.

Usage: ``python benchmarks/gate_latency.py [--cached 100] [--cold 100] [--burst 1000]``

**Setup.** A no-auth ``docker-registry`` on 127.0.0.1 seeded with ``--cold`` + 1 OCI images,
one repository each (``seed_many``); the Kubernetes API stand-in (``tests/support/kubeapi``)
in this process, HTTPS, its watches looking at the history every 2 ms (kube-apiserver sends
a change at once; the tests' 50 ms would be most of the figure); and the real ``python -m
imagecheck gate`` as a child, ``--no-leader-elect`` (a Lease adds nothing on the path of a
pod: the leader acts as a lone controller does), ``--resync 10m`` (no full list during the
run), ``-v`` for its debug line per lifted gate.

**What runs.** A warm-up pod on the first image (the controller has listed and watches, and
has a connection to the registry); then ``--cached`` pods on that image one after another,
each created once the one before was released; then ``--cold`` pods the same way, each on an
image of its own that nobody asked about; then ``--burst`` pods on the first image created
in one go (one store transaction), as a Job of that parallelism makes them. A pod is written
straight into the stand-in's store with the gate (the mutating webhook's share is serve's
benchmark); the store stamps the time it was created and the time the patch lifting its
gate was applied (``time.perf_counter()``, the same clock: the stand-in is a thread here).

**Figures**, p50 / p99 / max per pod:

* end to end: created -> gate lifted in the store: the stand-in's watch, the controller, the
  controller's read of the pod and its patch, through HTTPS and lightkube;
* controller: from the pod's change arriving at the controller (its watch handed it over) to
  the lifting patch being sent, from the controller's own debug line (``cluster/_gate_loop``);
* registry requests per pod, from the registry's access log;
* for a sense of scale: one ``HEAD`` of a manifest on a kept-alive connection (the round trip
  a check costs), and one ``skopeo inspect`` of the same image (a process per image).

**Targets**, PASS or MISS: cached, controller p99 under 50 ms; cold, one registry request per
pod. Every pod must be released (``released``, ``found``) with its gate gone; else exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import httpx

if not __package__:  # run as `python benchmarks/gate_latency.py`: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (
    BenchmarkError,
    RequestWindow,
    child_env,
    progress,
    require_tools,
    run_child,
    skopeo_argv,
    start_registry,
    wrong_answer,
)
from imagecheck.cluster._model import GATE
from imagecheck.registry._mediatypes import OCI_MANIFEST
from tests.support.images import seed_many
from tests.support.kubeapi import KubeAPI
from tests.support.kubeapi import objects as k8s
from tests.support.kubeapi.store import JSON, Resource, Store
from tests.support.pki import make_tls_material

NS = "bench"
CACHED_P99_TARGET_MS = 50.0
_LIFTED = re.compile(r"gate: pod (\S+)/(\S+): gate lifted by a patch sent ([\d.]+) ms after")


@dataclass
class TimedStore(Store):
    """The stand-in's store, stamping when each pod is created (with the real time as its
    ``creationTimestamp``: the controller counts ``--wait`` from it) and when its gate goes."""

    created: dict[str, float] = field(default_factory=dict)
    lifted: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    def _put(self, res: Resource, namespace: str, obj: JSON, change: str) -> JSON:
        name = obj["metadata"]["name"]
        if res.plural == "pods" and change == "ADDED":
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            obj["metadata"]["creationTimestamp"] = stamp
        answer = super()._put(res, namespace, obj, change)
        if res.plural != "pods":
            return answer
        if change == "ADDED":
            self.created[name] = time.perf_counter()
        elif name not in self.lifted and GATE not in _gates(obj):
            self.lifted[name] = time.perf_counter()
            self.changed.notify_all()
        return answer

    def wait_lifted(self, names: list[str], timeout: float) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: all(n in self.lifted for n in names), timeout):
                left = [n for n in names if n not in self.lifted]
                raise wrong_answer(f"{len(left)} pod(s) still gated after {timeout:g}s: {left[0]}")


def _gates(obj: JSON) -> list[str]:
    return [g.get("name") for g in obj.get("spec", {}).get("schedulingGates") or []]


def gated_pod(name: str, image: str) -> JSON:
    """A pod as the mutating webhook leaves it: pending, never scheduled, gated."""
    pod = k8s.pod(name, NS, image, waiting=None)
    del pod["spec"]["nodeName"]
    pod["spec"]["schedulingGates"] = [{"name": GATE}]
    pod["status"] = {"phase": "Pending", "qosClass": "Burstable", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}  # fmt: skip
    return pod


class GateProcess:
    """``imagecheck gate`` as a child; its debug lines and JSON outcomes read as they come."""

    def __init__(self, api: KubeAPI, env: dict[str, str], port: int) -> None:
        argv = [sys.executable, "-m", "imagecheck", "gate", "--kubeconfig", str(api.kubeconfig),
                "--insecure-http", "--listen", f"127.0.0.1:{port}", "--no-leader-elect",
                "--resync", "10m", "-n", NS, "-o", "json", "-v"]  # fmt: skip
        self.controller_ms: dict[str, float] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)  # fmt: skip
        out, err = self.process.stdout, self.process.stderr
        assert out is not None
        assert err is not None
        for stream, read in ((out, self._outcome), (err, self._log)):
            threading.Thread(target=self._read, args=(stream, read), daemon=True).start()

    @staticmethod
    def _read(stream: IO[str], read: Any) -> None:
        for line in stream:
            read(line)

    def _outcome(self, line: str) -> None:
        outcome = json.loads(line)
        self.outcomes[outcome["pod"]] = outcome

    def _log(self, line: str) -> None:
        if (lifted := _LIFTED.search(line)) is not None:
            self.controller_ms[lifted.group(2)] = float(lifted.group(3))

    def stop(self) -> None:
        self.process.terminate()
        started = time.monotonic()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            progress("the gate did not stop within 30 s of SIGTERM: killed")
        progress(f"the gate stopped {time.monotonic() - started:.1f} s after SIGTERM")


@dataclass(frozen=True)
class Phase:
    name: str
    end_to_end_ms: list[float]
    controller_ms: list[float]
    requests: int
    seconds: float  # wall, first created to last lifted

    def row(self) -> str:
        pods = len(self.end_to_end_ms)
        return (f"| {self.name} | {pods:,} | {_dist(self.end_to_end_ms)} | "
                f"{_dist(self.controller_ms)} | {self.requests / pods:.2f} | "
                f"{self.seconds:.2f} s |")  # fmt: skip


def _dist(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):.1f} / {p99:.1f} / {ordered[-1]:.1f} ms"


class Bench:
    def __init__(self, api: KubeAPI, store: TimedStore, gate: GateProcess, window: RequestWindow):
        self.api, self.store, self.gate, self.window = api, store, gate, window
        self.made = 0

    def one_by_one(self, name: str, images: list[str]) -> Phase:
        self.window.open()
        names = []
        for image in images:
            names.append(self._create([image])[0])
            self.store.wait_lifted(names[-1:], 30)
        return self._phase(name, names)

    def burst(self, name: str, image: str, pods: int) -> Phase:
        self.window.open()
        names = self._create([image] * pods)
        self.store.wait_lifted(names, 300)
        return self._phase(name, names)

    def _create(self, images: list[str]) -> list[str]:
        names = [f"p{self.made + i:05d}" for i in range(len(images))]
        self.made += len(images)
        with self.store.lock:  # one transaction: the watch sees them together
            for pod, image in zip(names, images, strict=True):
                self.store.add(gated_pod(pod, image))
        return names

    def _phase(self, name: str, names: list[str]) -> Phase:
        end = time.monotonic() + 10  # the debug line and the outcome follow the patch
        while not all(n in self.gate.controller_ms and n in self.gate.outcomes for n in names):
            if time.monotonic() > end:
                raise wrong_answer(f"{name}: no controller line or outcome for every pod")
            time.sleep(0.01)
        requests, _ = self.window.close()
        for pod in names:
            got = self.gate.outcomes[pod]
            if (got["action"], got["verdict"]) != ("released", "found"):
                raise wrong_answer(f"{name}: pod {pod}: {got['action']} ({got['why']})")
        with self.store.lock:
            e2e = [(self.store.lifted[n] - self.store.created[n]) * 1000 for n in names]
            wall = max(self.store.lifted[n] for n in names) - min(self.store.created[n]
                                                                  for n in names)  # fmt: skip
        return Phase(name, e2e, [self.gate.controller_ms[n] for n in names], requests, wall)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def round_trips(registry_url: str, name: str, rounds: int = 50) -> list[float]:
    """One manifest ``HEAD`` on a kept-alive connection, ``rounds`` times, in ms."""
    repo, tag = name.split(":")
    url = f"{registry_url}/v2/{repo}/manifests/{tag}"
    times = []
    with httpx.Client(trust_env=False, headers={"Accept": OCI_MANIFEST}) as client:
        client.head(url).raise_for_status()
        for _ in range(rounds):
            started = time.perf_counter()
            client.head(url).raise_for_status()
            times.append((time.perf_counter() - started) * 1000)
    return times


def skopeo_times(image: str, env: dict[str, str], rounds: int = 10) -> list[float]:
    times = []
    for _ in range(rounds + 1):
        started = time.perf_counter()
        child = run_child(skopeo_argv(image), env)
        times.append((time.perf_counter() - started) * 1000)
        if child.returncode != 0 or b'"Digest"' not in child.stdout:
            raise wrong_answer(f"skopeo inspect {image} exited {child.returncode}")
    return times[1:]  # the first one warms the page cache


def run(args: argparse.Namespace, workdir: Path) -> list[str]:
    binary = require_tools()
    registry = start_registry(workdir / "registry", binary)
    try:
        with httpx.Client(timeout=30.0, trust_env=False) as client:
            names = seed_many(client, registry.url, args.cold + 1, 1, prefix="gate")
        images = [f"{registry.host}/{n}" for n in names]
        (workdir / "docker").mkdir()
        env = child_env(Path(__file__).resolve().parents[1], workdir / "docker")
        for key in [k for k in env if k.startswith(("IMAGECHECK_", "KUBE"))]:
            del env[key]
        tls = make_tls_material(workdir / "pki")
        api = KubeAPI.start(tls.server_context(), tls.ca_file, workdir)
        store = TimedStore()
        api.server.store = store
        api.server.watch_timeout, api.server.watch_poll = 3600.0, 0.002
        try:
            return measure(args, api, store, images, registry, env, names[0])
        finally:
            api.stop()
    finally:
        registry.stop()


def measure(args: argparse.Namespace, api: KubeAPI, store: TimedStore, images: list[str],
            registry: Any, env: dict[str, str], first: str) -> list[str]:  # fmt: skip
    gate = GateProcess(api, env, free_port())
    try:
        bench = Bench(api, store, gate, RequestWindow(registry))
        progress("warm-up: the controller lists, watches and asks the registry once")
        bench.one_by_one("warm-up", images[:1])
        progress(f"cached: {args.cached} pods one after another")
        phases = [bench.one_by_one("cached", images[:1] * args.cached)]
        progress(f"cold: {args.cold} pods, an image each")
        phases.append(bench.one_by_one("cold", images[1:]))
        progress(f"burst: {args.burst} pods at once")
        phases.append(bench.burst(f"burst of {args.burst:,}", images[0], args.burst))
    finally:
        gate.stop()
    head = round_trips(registry.url, first)
    skopeo = skopeo_times(images[0], env)
    return report(phases, head, skopeo)


def report(phases: list[Phase], head: list[float], skopeo: list[float]) -> list[str]:
    cached, cold, _ = phases
    cached_p99 = sorted(cached.controller_ms)[round(0.99 * (len(cached.controller_ms) - 1))]
    cold_requests = cold.requests / len(cold.end_to_end_ms)
    return [
        "| phase | pods | end to end p50 / p99 / max | controller p50 / p99 / max "
        "| registry requests / pod | wall, first created to last lifted |",
        "|---|---|---|---|---|---|",
        *(phase.row() for phase in phases),
        "",
        f"one manifest HEAD, kept-alive connection: {_dist(head)} (p50 / p99 / max)",
        f"one skopeo inspect of the same image: {_dist(skopeo)}",
        "",
        f"target cached controller p99 < {CACHED_P99_TARGET_MS:g} ms: {cached_p99:.1f} ms "
        f"({'PASS' if cached_p99 < CACHED_P99_TARGET_MS else 'MISS'})",
        f"target cold, one registry request per pod: {cold_requests:.2f} "
        f"({'PASS' if cold_requests <= 1.0 else 'MISS'}); controller p50 cold - cached: "
        f"{statistics.median(cold.controller_ms) - statistics.median(cached.controller_ms):.1f}"
        f" ms, one HEAD p50 {statistics.median(head):.1f} ms",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cached", type=int, default=100, help="pods, one after another")
    parser.add_argument("--cold", type=int, default=100, help="pods, an image each")
    parser.add_argument("--burst", type=int, default=1000, help="pods created at once")
    args = parser.parse_args()
    load = os.getloadavg()
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="gate-latency-") as tmp:
            lines = run(args, Path(tmp))
    except BenchmarkError as exc:
        print(f"gate_latency: {exc}", file=sys.stderr)
        return exc.exit_code
    python = sys.version.split()[0]
    print(f"machine: {os.cpu_count()} CPUs, load {load[0]:.1f} before; Python {python}; "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
