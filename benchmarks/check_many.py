"""Check many images at once: ``imagecheck check`` against ``skopeo inspect``, on a real registry.

Usage: ``python benchmarks/check_many.py [--images N] [--repos R] [--rounds K] [--auth MODE]
[--concurrency C] [--no-sequential] [--json]`` (``make bench`` runs the defaults: 120 images in
10 repositories, plus 12 missing tags, 3 rounds, no auth).

A ``docker-registry`` (Distribution) is started on 127.0.0.1 in a temporary directory and
seeded with N distinct images (:func:`tests.support.images.seed_many`). ``--auth none``
serves them over plain HTTP without auth; ``--auth token`` over TLS (a throw-away CA) with
Bearer token auth, the tokens from the integration tests' token server
(``tests/support/tokenserver.py``, HTTPS on its own port), anonymous pull: one token per
repository, so ``--repos N`` makes it one token per image. The checked set is those N images
with about 10% missing tags mixed in, so the "missing" answer is measured too. Each round
runs, one after the other, on the same set:

* ``python -m imagecheck check --output json IMAGE...``: one process for every image;
* ``python benchmarks/floor.py``: the floor, raw asyncio HTTP/1.1 keep-alive HEADs over as
  many connections as imagecheck's concurrency (one token per repository, over keep-alive,
  on a token registry), no HTTP library; every wall time is also given as a multiple of it;
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
* peak memory: ``os.wait4()`` on each child returns that one process's own ``ru_maxrss``
  (``RUSAGE_CHILDREN`` would give the maximum over every child reaped so far), taken in one
  more, untimed run of each tool with every child forked by a small trampoline: Linux counts
  the RSS a process had before ``exec`` in it, and a child forked by the benchmark itself
  starts with the benchmark's (see ``_common.run_child``).

Targets: imagecheck at least 4x faster than 8-way skopeo, at most 1.1 requests per image
after the ping, and a wall time at most 1.5x the floor's without auth, 2x with token auth
(issue #14). They are printed as PASS or MISS; a MISS does not change the exit code (0).
Exit 1: a tool answered wrongly. Exit 2: a tool is missing or the registry cannot start.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

import imagecheck
from imagecheck.cli import check as check_command
from tests.support.images import seed_many
from tests.support.pki import make_tls_material, make_token_signer
from tests.support.registry import LocalRegistry, TokenAuthSettings
from tests.support.tokenserver import TokenServer

if not __package__:  # run as `python benchmarks/check_many.py`: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (
    EXIT_UNAVAILABLE,
    PEAK_RSS_METHOD,
    BenchmarkError,
    Child,
    RunFigures,
    Spawn,
    check_imagecheck,
    check_skopeo,
    child_env,
    cli_default,
    imagecheck_argv,
    measure,
    peak_rss_kib,
    progress,
    require_tools,
    run_child,
    skopeo_argv,
    start_registry,
    tool_version,
)

SPEEDUP_TARGET = 4.0
REQUESTS_AFTER_PING_TARGET = 1.1
# imagecheck's wall time as a multiple of the floor's, by auth mode (issue #14).
FLOOR_TARGETS = {"none": 1.5, "token": 2.0}
SKOPEO_WORKERS = 8
MISSING_SHARE = 0.10
TOKEN_SERVICE = "imagecheck-bench-registry"
# The token server lets anonymous callers pull public/*: skopeo --no-creds needs that.
REPOSITORY_PREFIX = "public"
FLOOR_SCRIPT = Path(__file__).resolve().parent / "floor.py"

IMAGECHECK = "imagecheck check"
FLOOR = "floor (raw asyncio)"
SKOPEO_SEQUENTIAL = "skopeo sequential"
SKOPEO_PARALLEL = f"skopeo {SKOPEO_WORKERS}-way"
TOOLS = (IMAGECHECK, FLOOR, SKOPEO_PARALLEL, SKOPEO_SEQUENTIAL)

METHODS = {
    "wall_time": "time.perf_counter() from the first spawn to the last child reaped",
    "requests": "lines added to the registry's access log during the run "
    "(LocalRegistry.request_count() before and after); pings are GET /v2/ lines",
    "peak_rss": PEAK_RSS_METHOD,
}


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


def seed_workload(seeder: LocalRegistry, host: str, images: int, repos: int) -> Workload:
    """Push ``images`` images over ``repos`` repositories through ``seeder``; mix in ~10% tags
    never pushed. The names are on ``host``, the registry that serves the same storage."""
    with httpx.Client(timeout=30.0, trust_env=False) as client:
        names = seed_many(client, seeder.url, repos, images // repos, prefix=REPOSITORY_PREFIX)
    present = [f"{host}/{name}" for name in names]
    repositories = sorted({name.rpartition(":")[0] for name in names})
    absent_count = max(1, round(images * MISSING_SHARE))
    absent = [
        f"{host}/{repositories[i % len(repositories)]}:absent-{i}" for i in range(absent_count)
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


# -- the whole benchmark ---------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    registry: LocalRegistry
    workload: Workload
    env: dict[str, str]
    auth: str = "none"
    concurrency: int = 16
    ca_file: Path | None = None
    sequential: bool = True

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(t for t in TOOLS if self.sequential or t != SKOPEO_SEQUENTIAL)

    def imagecheck_argv(self, images: Sequence[str]) -> list[str]:
        options = ["--concurrency", str(self.concurrency)]
        if self.ca_file is not None:
            options += ["--ca-file", str(self.ca_file)]
        return imagecheck_argv(images, options)

    def floor_argv(self, images: Sequence[str]) -> list[str]:
        argv = [sys.executable, str(FLOOR_SCRIPT), "--registry", self.registry.url]
        argv += ["--connections", str(self.concurrency)]
        if self.ca_file is not None:
            argv += ["--ca-file", str(self.ca_file)]
        return [*argv, *images]


def run_rounds(setup: Setup, rounds: int) -> tuple[dict[str, list[RunFigures]], dict[str, int]]:
    """Time and requests per tool per round; then each tool's peak RSS (KiB), from one more,
    untimed run."""
    workload, env = setup.workload, setup.env

    def imagecheck_once(spawn: Spawn) -> list[Child]:
        return [spawn(setup.imagecheck_argv(workload.images))]

    def floor_once(spawn: Spawn) -> list[Child]:
        return [spawn(setup.floor_argv(workload.images))]

    def skopeo_sequential(spawn: Spawn) -> list[Child]:
        return [spawn(skopeo_argv(image)) for image in workload.images]

    def skopeo_parallel(spawn: Spawn) -> list[Child]:
        with ThreadPoolExecutor(SKOPEO_WORKERS) as pool:
            return list(pool.map(lambda image: spawn(skopeo_argv(image)), workload.images))

    runs: dict[str, Callable[[Spawn], list[Child]]] = {
        IMAGECHECK: imagecheck_once,
        FLOOR: floor_once,
        SKOPEO_SEQUENTIAL: skopeo_sequential,
        SKOPEO_PARALLEL: skopeo_parallel,
    }
    checks: dict[str, Callable[[list[Child]], None]] = {
        IMAGECHECK: lambda children: check_imagecheck(
            workload.images, workload.present, children[0]
        ),
        FLOOR: lambda children: check_imagecheck(
            workload.images, workload.present, children[0], tool="floor"
        ),
        SKOPEO_SEQUENTIAL: lambda children: check_skopeo(
            workload.images, workload.present, children
        ),
        SKOPEO_PARALLEL: lambda children: check_skopeo(workload.images, workload.present, children),
    }
    # Warm the page cache (interpreter, imports, the skopeo binary) outside any measurement.
    run_child(setup.imagecheck_argv(workload.images[:1]), env)
    run_child(setup.floor_argv(workload.images[:1]), env)
    run_child(skopeo_argv(workload.images[0]), env)
    figures: dict[str, list[RunFigures]] = {tool: [] for tool in setup.tools}
    for number in range(1, rounds + 1):
        # Tools alternate within each round, so drift in the machine's load hits them all.
        for tool in setup.tools:
            progress(f"round {number}/{rounds}: {tool}")
            figures[tool].append(measure([setup.registry], runs[tool], checks[tool], env))
    peaks = {}
    for tool in setup.tools:
        progress(f"peak memory: {tool}")
        peaks[tool] = peak_rss_kib(runs[tool], checks[tool], env)
    return figures, peaks


def summarize(
    setup: Setup, figures: dict[str, list[RunFigures]], peaks: dict[str, int]
) -> dict[str, Any]:
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
            "peak_rss_mib": peaks[tool] / 1024,
        }
    ours = tools[IMAGECHECK]["wall_seconds"]
    floor = tools[FLOOR]["wall_seconds"]
    for figures_of in tools.values():
        wall = figures_of["wall_seconds"]
        figures_of["x_floor"] = {
            "median": wall["median"] / floor["median"],
            "min": wall["min"] / floor["min"],
        }

    def speedup(tool: str) -> dict[str, float]:
        theirs = tools[tool]["wall_seconds"]
        return {"median": theirs["median"] / ours["median"], "min": theirs["min"] / ours["min"]}

    skopeos = [t for t in (SKOPEO_PARALLEL, SKOPEO_SEQUENTIAL) if t in tools]
    speedups = {tool: speedup(tool) for tool in skopeos}
    after_ping = tools[IMAGECHECK]["requests_per_image_after_ping"]
    x_floor = tools[IMAGECHECK]["x_floor"]["median"]
    floor_target = FLOOR_TARGETS[setup.auth]
    targets = {
        "imagecheck wall / floor wall": {
            "target": f"<= {floor_target:g}x",
            "value": x_floor,
            "pass": x_floor <= floor_target,
        },
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
            "auth": setup.auth,
        },
        "environment": environment(setup),
        "methods": METHODS,
        "tools": tools,
        "speedup": speedups,
        "targets": targets,
    }


def environment(setup: Setup) -> dict[str, Any]:
    registry = setup.registry
    return {
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "imagecheck": imagecheck.__version__,
        "imagecheck_concurrency": setup.concurrency,
        "imagecheck_default_concurrency": cli_default(check_command, "concurrency"),
        "skopeo": tool_version(["skopeo", "--version"]),
        "registry": tool_version([registry.binary, "--version"]),
        "registry_url": registry.url,
    }


# -- output ----------------------------------------------------------------------------------


def render(summary: dict[str, Any]) -> str:
    w, env = summary["workload"], summary["environment"]
    auth = "no auth, plain HTTP" if w["auth"] == "none" else "token auth over TLS"
    load = ", ".join(f"{x:.2f}" for x in env["load_average"])
    lines = [
        f"imagecheck {env['imagecheck']} vs floor vs {env['skopeo']}: {w['images']} images "
        f"({w['present']} present in {w['repositories']} repositories, {w['missing']} missing "
        f"tags), {w['rounds']} rounds",
        f"registry: {env['registry']}, {auth}, {env['registry_url']}; "
        f"{env['cpus']} CPUs (load average at the end {load}), Python {env['python']}; "
        f"imagecheck --concurrency {env['imagecheck_concurrency']} (default "
        f"{env['imagecheck_default_concurrency']}), floor with as many connections; "
        f"skopeo {SKOPEO_WORKERS}-way = {SKOPEO_WORKERS} worker threads",
        "all answers verified correct (found / missing) in every round",
        "",
        f"{'':<20}  {'wall median':>11}  {'wall min':>9}  {'x floor':>7}  "
        f"{'requests/image':>14}  {'after ping':>10}  {'peak RSS MiB':>12}",
    ]
    for tool, t in summary["tools"].items():
        wall = t["wall_seconds"]
        lines.append(
            f"{tool:<20}  {wall['median']:>10.3f}s  {wall['min']:>8.3f}s  "
            f"{t['x_floor']['median']:>6.2f}x  "
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


# -- entry point -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="imagecheck check vs skopeo inspect over many images on a local registry."
    )
    parser.add_argument("--images", type=int, default=120, help="images seeded (default 120)")
    parser.add_argument("--repos", type=int, default=10, help="repositories (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per tool (default 3)")
    parser.add_argument(
        "--auth",
        choices=sorted(FLOOR_TARGETS),
        default="none",
        help="none: plain HTTP, no auth (default); token: TLS and a token per repository",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="imagecheck --concurrency and the floor's connections (default: imagecheck's)",
    )
    parser.add_argument(
        "--no-sequential",
        dest="sequential",
        action="store_false",
        help="leave out sequential skopeo (one process at a time: slow on 1,000 images)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print figures as JSON on stdout (table to stderr)"
    )
    args = parser.parse_args(argv)
    if min(args.images, args.repos, args.rounds) < 1:
        parser.error("--images, --repos and --rounds must be at least 1")
    if args.images % args.repos:
        parser.error("--images must be a multiple of --repos")
    return args


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    binary = require_tools()
    package_root = Path(imagecheck.__file__).resolve().parents[1]
    concurrency = args.concurrency or int(str(cli_default(check_command, "concurrency")))
    with tempfile.TemporaryDirectory(prefix="imagecheck-bench-") as tmp, ExitStack() as stack:
        docker_config = Path(tmp) / "docker-config"
        docker_config.mkdir()
        seeder = start_registry(Path(tmp) / "registry", binary)
        stack.callback(seeder.stop)
        registry, ca_file = seeder, None
        if args.auth == "token":
            registry, ca_file = start_token_registry(Path(tmp), seeder, binary, stack)
        progress(f"seeding {args.images} images in {args.repos} repositories at {registry.url}")
        workload = seed_workload(seeder, registry.host, args.images, args.repos)
        env = child_env(package_root, docker_config)
        setup = Setup(
            registry, workload, env, args.auth, concurrency, ca_file, sequential=args.sequential
        )
        figures, peaks = run_rounds(setup, args.rounds)
        return summarize(setup, figures, peaks)


def start_token_registry(
    tmp: Path, seeder: LocalRegistry, binary: str, stack: ExitStack
) -> tuple[LocalRegistry, Path]:
    """A TLS registry with token auth on ``seeder``'s storage, and its token server (HTTPS,
    its own port); both stopped by ``stack``. Returns the registry and the CA to trust."""
    tls = make_tls_material(tmp / "pki")
    signer = make_token_signer(tmp / "signer")
    server = stack.enter_context(
        TokenServer(ssl_context=tls.server_context(), signer=signer, service=TOKEN_SERVICE)
    )
    settings = TokenAuthSettings(
        realm=server.realm,
        service=TOKEN_SERVICE,
        issuer=server.issuer,
        rootcertbundle=signer.root_bundle,
    )
    registry = LocalRegistry(
        tmp / "registry-token",
        storage=seeder.storage,
        tls=tls.server,
        token=settings,
        binary=binary,
    )
    (tmp / "registry-token").mkdir()
    try:
        registry.start()
    except RuntimeError as exc:
        reason = f"cannot start docker-registry: {str(exc).splitlines()[0]}"
        raise BenchmarkError(reason, EXIT_UNAVAILABLE) from None
    stack.callback(registry.stop)
    return registry, tls.ca_file


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
