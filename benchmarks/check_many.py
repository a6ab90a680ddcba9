"""Check many images at once: ``imagecheck check`` against ``skopeo inspect``, on a real registry.

Usage: ``python benchmarks/check_many.py [--images N] [--repos R] [--rounds K] [--json]``
(``make bench`` runs the defaults: 120 images in 10 repositories, plus 12 missing tags, 3 rounds).

A no-auth ``docker-registry`` (Distribution) is started on 127.0.0.1 in a temporary directory
and seeded with N distinct images (:func:`imagecheck.testing.images.seed_many`). The checked
set is those N images with about 10% missing tags mixed in, so the "missing" answer is
measured too. Each round runs, one after the other, on the same set:

* ``python -m imagecheck check --output json IMAGE...``: one process for every image;
* ``skopeo inspect --no-tags --no-creds --tls-verify=false docker://IMAGE``, one process per
  image, run one at a time ("sequential") and eight at a time ("8-way"): the usual way to ask
  "does this image exist?" from a script.

Every answer is checked (found for a seeded image, missing for an absent tag) before any figure
is kept; a wrong answer ends the run with exit 1. Figures:

* wall time: ``time.perf_counter()`` from the first spawn to the last child reaped; the median
  and the minimum over the rounds;
* HTTP requests per image, counted by the registry itself in its access log (one line per
  request, whatever the status), before and after each tool's run, so both tools are counted
  the same way; "after ping" leaves out the ``GET /v2/`` pings;
* peak memory: ``os.wait4()`` on each child returns that one process's own ``ru_maxrss``,
  which is exact per process (``RUSAGE_CHILDREN`` would give the maximum over every child
  reaped so far).

Targets: imagecheck at least 4x faster than 8-way skopeo, and at most 1.1 requests per image
after the ping. They are printed as PASS or MISS; a MISS does not change the exit code (0).
Exit 1: a tool answered wrongly. Exit 2: a tool is missing or the registry cannot start.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

import imagecheck
from imagecheck.cli import check as check_command
from imagecheck.testing.images import seed_many
from imagecheck.testing.registry import LocalRegistry, find_registry_binary

SPEEDUP_TARGET = 4.0
REQUESTS_AFTER_PING_TARGET = 1.1
SKOPEO_WORKERS = 8
MISSING_SHARE = 0.10

EXIT_WRONG_ANSWER = 1
EXIT_UNAVAILABLE = 2

IMAGECHECK = "imagecheck check"
SKOPEO_SEQUENTIAL = "skopeo sequential"
SKOPEO_PARALLEL = f"skopeo {SKOPEO_WORKERS}-way"
TOOLS = (IMAGECHECK, SKOPEO_SEQUENTIAL, SKOPEO_PARALLEL)

METHODS = {
    "wall_time": "time.perf_counter() from the first spawn to the last child reaped",
    "requests": "lines added to the registry's access log during the run "
    "(LocalRegistry.request_count() before and after); pings are GET /v2/ lines",
    "peak_rss": "os.wait4() on each child: that process's own ru_maxrss (KiB on Linux); "
    "for skopeo, the largest of its processes",
}


class BenchmarkError(Exception):
    """Ends the run with ``exit_code`` and a one-line reason."""

    def __init__(self, reason: str, exit_code: int) -> None:
        super().__init__(reason)
        self.exit_code = exit_code


# -- children --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Child:
    """A finished child process: exit code, output, and its own peak resident set."""

    returncode: int
    stdout: bytes
    stderr: bytes
    max_rss_kib: int


def run_child(argv: Sequence[str], env: dict[str, str]) -> Child:
    """Run ``argv`` and reap it with ``wait4``, whose rusage covers that one process only."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # Files, not pipes: nothing to drain while waiting, so wait4 cannot deadlock.
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait
        out.seek(0)
        err.seek(0)
        return Child(process.returncode, out.read(), err.read(), usage.ru_maxrss)


# -- the workload ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """The images every tool checks, in one order, and which of them exist."""

    images: tuple[str, ...]
    present: frozenset[str]
    repositories: int

    @property
    def missing(self) -> int:
        return len(self.images) - len(self.present)

    def exists(self, image: str) -> bool:
        return image in self.present


def seed_workload(registry: LocalRegistry, images: int, repos: int) -> Workload:
    """Push ``images`` images over ``repos`` repositories; mix in ~10% tags never pushed."""
    with httpx.Client(timeout=30.0, trust_env=False) as client:
        names = seed_many(client, registry.url, repos, images // repos)
    present = [f"{registry.host}/{name}" for name in names]
    repositories = sorted({name.rpartition(":")[0] for name in names})
    absent_count = max(1, round(images * MISSING_SHARE))
    absent = [
        f"{registry.host}/{repositories[i % len(repositories)]}:absent-{i}"
        for i in range(absent_count)
    ]
    # Spread the missing tags through the list rather than leaving them all at the end.
    step = max(1, len(present) // absent_count)
    ordered: list[str] = []
    for i, image in enumerate(present, start=1):
        ordered.append(image)
        if i % step == 0 and absent:
            ordered.append(absent.pop(0))
    ordered.extend(absent)
    return Workload(tuple(ordered), frozenset(present), len(repositories))


# -- one run of one tool ---------------------------------------------------------------------


@dataclass(frozen=True)
class RunFigures:
    """One tool over the whole workload, once."""

    seconds: float
    requests: int
    pings: int
    max_rss_kib: int


class RequestWindow:
    """Counts the registry's requests between ``open()`` and ``close()`` from its access log."""

    def __init__(self, registry: LocalRegistry) -> None:
        self.registry = registry
        self.start_count = 0
        self.start_offset = 0

    def open(self) -> None:
        self.start_count = self.registry.request_count()  # waits until the log is still
        self.start_offset = self.registry.access_log_path.stat().st_size

    def close(self) -> tuple[int, int]:
        """``(requests, pings)`` since ``open()``."""
        requests = self.registry.request_count() - self.start_count
        with self.registry.access_log_path.open("rb") as log:
            log.seek(self.start_offset)
            added = log.read().decode("utf-8", errors="replace")
        pings = sum(1 for line in added.splitlines() if '"GET /v2/ HTTP/' in line)
        return requests, pings


def measure(
    registry: LocalRegistry, run: Callable[[], list[Child]], check: Callable[[list[Child]], None]
) -> RunFigures:
    window = RequestWindow(registry)
    window.open()
    started = time.perf_counter()
    children = run()
    seconds = time.perf_counter() - started
    requests, pings = window.close()
    check(children)
    return RunFigures(seconds, requests, pings, max(c.max_rss_kib for c in children))


def imagecheck_argv(images: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "imagecheck", "check", "--output", "json", *images]


def skopeo_argv(image: str) -> list[str]:
    return [
        "skopeo",
        "inspect",
        "--no-tags",
        "--no-creds",
        "--tls-verify=false",
        f"docker://{image}",
    ]


def check_imagecheck(workload: Workload, child: Child) -> None:
    expected_exit = 1 if workload.missing else 0
    try:
        results = json.loads(child.stdout)
    except ValueError:
        results = None
    if not isinstance(results, list) or len(results) != len(workload.images):
        raise wrong_answer(
            f"imagecheck exited {child.returncode} without a JSON array of "
            f"{len(workload.images)} results; stderr: {_tail(child.stderr)}"
        )
    wrong = []
    for image, result in zip(workload.images, results, strict=True):
        want = "found" if workload.exists(image) else "missing"
        if not isinstance(result, dict):
            wrong.append(f"{image}: {result!r} is not a result object")
            continue
        got, digest = result.get("status"), result.get("digest")
        if result.get("image") != image or got != want:
            wrong.append(f"{image}: {got} ({result.get('message')}), expected {want}")
        elif want == "found" and not (isinstance(digest, str) and digest.startswith("sha256:")):
            wrong.append(f"{image}: found without a sha256 digest ({digest!r})")
    if wrong:
        raise wrong_answer(f"imagecheck answered {len(wrong)} image(s) wrongly: " + wrong[0])
    if child.returncode != expected_exit:
        raise wrong_answer(f"imagecheck exited {child.returncode}, expected {expected_exit}")


def check_skopeo(workload: Workload, children: Sequence[Child]) -> None:
    wrong = []
    for image, child in zip(workload.images, children, strict=True):
        if workload.exists(image):
            if child.returncode != 0 or b'"Digest"' not in child.stdout:
                wrong.append(
                    f"{image}: exit {child.returncode}, expected 0 ({_tail(child.stderr)})"
                )
        elif child.returncode == 0 or b"manifest unknown" not in child.stderr:
            # Non-zero for any reason is not enough: it must be the registry saying "missing".
            wrong.append(
                f"{image}: exit {child.returncode} ({_tail(child.stderr)}), "
                "expected non-zero with 'manifest unknown'"
            )
    if wrong:
        raise wrong_answer(f"skopeo answered {len(wrong)} image(s) wrongly: " + wrong[0])


def wrong_answer(reason: str) -> BenchmarkError:
    return BenchmarkError(reason, EXIT_WRONG_ANSWER)


def _tail(data: bytes, limit: int = 300) -> str:
    text = data.decode("utf-8", errors="replace").strip().replace("\n", " | ")
    return text[-limit:] or "(empty)"


# -- the whole benchmark ---------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    registry: LocalRegistry
    workload: Workload
    env: dict[str, str]


def run_rounds(setup: Setup, rounds: int) -> dict[str, list[RunFigures]]:
    workload, env = setup.workload, setup.env

    def imagecheck_once() -> list[Child]:
        return [run_child(imagecheck_argv(workload.images), env)]

    def skopeo_sequential() -> list[Child]:
        return [run_child(skopeo_argv(image), env) for image in workload.images]

    def skopeo_parallel() -> list[Child]:
        with ThreadPoolExecutor(SKOPEO_WORKERS) as pool:
            return list(pool.map(lambda image: run_child(skopeo_argv(image), env), workload.images))

    runs: dict[str, Callable[[], list[Child]]] = {
        IMAGECHECK: imagecheck_once,
        SKOPEO_SEQUENTIAL: skopeo_sequential,
        SKOPEO_PARALLEL: skopeo_parallel,
    }
    checks: dict[str, Callable[[list[Child]], None]] = {
        IMAGECHECK: lambda children: check_imagecheck(workload, children[0]),
        SKOPEO_SEQUENTIAL: lambda children: check_skopeo(workload, children),
        SKOPEO_PARALLEL: lambda children: check_skopeo(workload, children),
    }
    # Warm the page cache (interpreter, imports, the skopeo binary) outside any measurement.
    run_child(imagecheck_argv(workload.images[:1]), env)
    run_child(skopeo_argv(workload.images[0]), env)
    figures: dict[str, list[RunFigures]] = {tool: [] for tool in TOOLS}
    for number in range(1, rounds + 1):
        # Tools alternate within each round, so drift in the machine's load hits them all.
        for tool in TOOLS:
            progress(f"round {number}/{rounds}: {tool}")
            figures[tool].append(measure(setup.registry, runs[tool], checks[tool]))
    return figures


def summarize(setup: Setup, figures: dict[str, list[RunFigures]]) -> dict[str, Any]:
    count = len(setup.workload.images)
    tools: dict[str, dict[str, Any]] = {}
    for tool, runs in figures.items():
        seconds = [r.seconds for r in runs]
        requests = statistics.median(r.requests for r in runs)
        pings = statistics.median(r.pings for r in runs)
        tools[tool] = {
            "wall_seconds": {
                "median": statistics.median(seconds),
                "min": min(seconds),
                "rounds": seconds,
            },
            "requests": requests,
            "pings": pings,
            "requests_per_image": requests / count,
            "requests_per_image_after_ping": (requests - pings) / count,
            "peak_rss_mib": max(r.max_rss_kib for r in runs) / 1024,
        }
    ours = tools[IMAGECHECK]["wall_seconds"]

    def speedup(tool: str) -> dict[str, float]:
        theirs = tools[tool]["wall_seconds"]
        return {"median": theirs["median"] / ours["median"], "min": theirs["min"] / ours["min"]}

    speedups = {tool: speedup(tool) for tool in (SKOPEO_PARALLEL, SKOPEO_SEQUENTIAL)}
    after_ping = tools[IMAGECHECK]["requests_per_image_after_ping"]
    targets = {
        f"speedup vs {SKOPEO_PARALLEL}": {
            "target": f">= {SPEEDUP_TARGET:g}x",
            "value": speedups[SKOPEO_PARALLEL]["median"],
            "pass": speedups[SKOPEO_PARALLEL]["median"] >= SPEEDUP_TARGET,
        },
        "imagecheck requests/image after ping": {
            "target": f"<= {REQUESTS_AFTER_PING_TARGET:g}",
            "value": after_ping,
            "pass": after_ping <= REQUESTS_AFTER_PING_TARGET,
        },
    }
    workload = setup.workload
    return {
        "workload": {
            "images": count,
            "present": len(workload.present),
            "missing": workload.missing,
            "repositories": workload.repositories,
            "rounds": len(figures[IMAGECHECK]),
        },
        "environment": environment(setup.registry),
        "methods": METHODS,
        "tools": tools,
        "speedup": speedups,
        "targets": targets,
    }


def environment(registry: LocalRegistry) -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "imagecheck": imagecheck.__version__,
        "imagecheck_concurrency": _cli_default("concurrency"),
        "skopeo": _version(["skopeo", "--version"]),
        "registry": _version([registry.binary, "--version"]),
        "registry_url": registry.url,
    }


def _cli_default(option: str) -> object:
    """What ``imagecheck check`` uses for ``option`` when it is not given (read from click)."""
    return next((p.default for p in check_command.params if p.name == option), None)


def _version(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=10)
    return done.stdout.strip() or done.stderr.strip() or "unknown"


# -- output ----------------------------------------------------------------------------------


def render(summary: dict[str, Any]) -> str:
    w, env = summary["workload"], summary["environment"]
    lines = [
        f"imagecheck {env['imagecheck']} vs {env['skopeo']}: {w['images']} images "
        f"({w['present']} present in {w['repositories']} repositories, {w['missing']} missing "
        f"tags), {w['rounds']} rounds",
        f"registry: {env['registry']}, no auth, {env['registry_url']}; "
        f"{env['cpus']} CPUs, Python {env['python']}; imagecheck --concurrency "
        f"{env['imagecheck_concurrency']} (default); "
        f"skopeo {SKOPEO_WORKERS}-way = {SKOPEO_WORKERS} worker threads",
        "all answers verified correct (found / missing) in every round",
        "",
        f"{'':<18}  {'wall median':>11}  {'wall min':>9}  {'requests/image':>14}  "
        f"{'after ping':>10}  {'peak RSS MiB':>12}",
    ]
    for tool, t in summary["tools"].items():
        wall = t["wall_seconds"]
        lines.append(
            f"{tool:<18}  {wall['median']:>10.3f}s  {wall['min']:>8.3f}s  "
            f"{t['requests_per_image']:>14.2f}  {t['requests_per_image_after_ping']:>10.2f}  "
            f"{t['peak_rss_mib']:>12.1f}"
        )
    lines.append("")
    for tool, ratio in summary["speedup"].items():
        lines.append(
            f"speedup {tool} / imagecheck: {ratio['median']:.2f}x median "
            f"({ratio['min']:.2f}x on the minimums)"
        )
    lines.append("")
    for name, target in summary["targets"].items():
        verdict = "PASS" if target["pass"] else "MISS"
        lines.append(f"{verdict}  {name}: {target['value']:.2f} (target {target['target']})")
    lines.append("")
    lines += [f"{name}: {how}" for name, how in summary["methods"].items()]
    return "\n".join(lines)


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# -- entry point -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="imagecheck check vs skopeo inspect over many images on a local registry."
    )
    parser.add_argument("--images", type=int, default=120, help="images seeded (default 120)")
    parser.add_argument("--repos", type=int, default=10, help="repositories (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per tool (default 3)")
    parser.add_argument(
        "--json", action="store_true", help="print figures as JSON on stdout (table to stderr)"
    )
    args = parser.parse_args(argv)
    if min(args.images, args.repos, args.rounds) < 1:
        parser.error("--images, --repos and --rounds must be at least 1")
    if args.images % args.repos:
        parser.error("--images must be a multiple of --repos")
    return args


def child_env(package_root: Path, docker_config: Path) -> dict[str, str]:
    env = dict(os.environ)
    # The child imports this same imagecheck, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_root), env.get("PYTHONPATH")]))
    # No credentials for either tool (skopeo has --no-creds), and no proxy for 127.0.0.1.
    env["DOCKER_CONFIG"] = str(docker_config)
    for name in ("NO_PROXY", "no_proxy"):
        env[name] = ",".join(filter(None, [env.get(name), "127.0.0.1", "localhost"]))
    return env


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    binary = find_registry_binary()
    if binary is None:
        raise BenchmarkError(
            "docker-registry not found (apt-get install docker-registry)", EXIT_UNAVAILABLE
        )
    if shutil.which("skopeo") is None:
        raise BenchmarkError("skopeo not found (apt-get install skopeo)", EXIT_UNAVAILABLE)
    package_root = Path(imagecheck.__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="imagecheck-bench-") as tmp:
        docker_config = Path(tmp) / "docker-config"
        docker_config.mkdir()
        registry = LocalRegistry(Path(tmp) / "registry", binary=binary)
        try:
            registry.start()
        except RuntimeError as exc:
            first_line = str(exc).splitlines()[0]
            raise BenchmarkError(
                f"cannot start docker-registry: {first_line}", EXIT_UNAVAILABLE
            ) from None
        try:
            progress(f"seeding {args.images} images in {args.repos} repositories at {registry.url}")
            workload = seed_workload(registry, args.images, args.repos)
            setup = Setup(registry, workload, child_env(package_root, docker_config))
            figures = run_rounds(setup, args.rounds)
            return summarize(setup, figures)
        finally:
            registry.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        summary = benchmark(args)
    except BenchmarkError as exc:
        print(f"check_many: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(render(summary), file=sys.stderr)
        print(json.dumps(summary, indent=2))
    else:
        print(render(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
