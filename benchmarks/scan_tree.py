"""Scan a tree of manifests: ``imagecheck scan`` against ``skopeo inspect``, on real registries.

Usage: ``python benchmarks/scan_tree.py [--registries R] [--images N] [--repos P]
[--occurrences O] [--rounds K] [--json]`` (defaults: 3 registries x 40 images in 4
repositories each, 300 occurrences, 5 rounds). Issue #6.

R no-auth ``docker-registry`` (Distribution) instances are started on 127.0.0.1, plain HTTP,
each on its own port, each seeded with N images over P repositories
(:func:`tests.support.images.seed_many`). A temporary directory is then filled with
Deployments (with a Service in the same file), Jobs, CronJobs, Compose files and multi-stage
Dockerfiles in which the R x N distinct images are written O times in all (each at least once,
the rest repeated across files), plus about 10% tags that were never pushed (10% of the
distinct images, written 10% of O times), spread through the files. A few images are there to
be skipped, as scan skips them: a Compose service with ``build:`` and a ``{{ .Values... }}``
placeholder. Each round runs, one after the other:

* ``python -m imagecheck scan --output json DIR``: one process finds and checks everything;
* ``python -m imagecheck check --output json IMAGE...`` over the same distinct images: what
  the checking alone costs, so the difference is what finding the images costs;
* ``skopeo inspect --no-tags --no-creds --tls-verify=false docker://IMAGE`` for each distinct
  image, eight processes at a time: what a script over ``grep image:`` would do.

Every answer is verified before a figure is kept: scan must report every occurrence written,
with its file and line, ``found`` (with a digest) or ``missing`` as seeded, the skipped ones
skipped, no file problem, and exit 1; check and skopeo as in ``check_many.py``. Figures: wall
time (median and minimum over the rounds), HTTP requests per distinct image summed over the R
registries' access logs (and without the ``GET /v2/`` pings), and each child's own peak RSS
(``os.wait4``, in one more untimed run through a small trampoline), all taken as
``check_many.py`` takes them.

Targets, printed as PASS or MISS (exit code unchanged): scan at least 4x faster than 8-way
skopeo, and at most 1.1 requests per distinct image after the pings (each image asked once,
however many times it is written). Exit 1: a tool answered wrongly. Exit 2: a tool is missing
or a registry cannot start.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import imagecheck
from imagecheck.cli import scan as scan_command
from imagecheck.scanning import scan_paths
from tests.support.images import seed_many
from tests.support.registry import LocalRegistry

if not __package__:  # run as `python benchmarks/scan_tree.py`: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (
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
    result_errors,
    run_child,
    skopeo_argv,
    start_registry,
    tail,
    tool_version,
    wrong_answer,
)

SPEEDUP_TARGET = 4.0
REQUESTS_AFTER_PING_TARGET = 1.1
SKOPEO_WORKERS = 8
MISSING_SHARE = 0.10
SEED = 6  # the tree is the same in every run: issue #6

SCAN = "imagecheck scan"
CHECK = "imagecheck check"
SKOPEO = f"skopeo {SKOPEO_WORKERS}-way"
TOOLS = (SCAN, CHECK, SKOPEO)

METHODS = {
    "wall_time": "time.perf_counter() from the first spawn to the last child reaped",
    "requests": "lines added to every registry's access log during the run "
    "(LocalRegistry.request_count() before and after, summed), per distinct image; "
    "pings are GET /v2/ lines",
    "peak_rss": PEAK_RSS_METHOD,
    "find_only": "imagecheck.scanning.scan_paths(DIR) in the benchmark's own process: "
    "reading and parsing the files, no network",
}


# -- the tree --------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Written:
    """One image as written into the tree: its file (relative to the tree), line and text."""

    file: str
    line: int
    image: str


@dataclass
class Lines:
    """A file being written, line by line, remembering where each image went."""

    path: str
    lines: list[str] = field(default_factory=list)
    images: list[Written] = field(default_factory=list)
    skipped: list[Written] = field(default_factory=list)

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def image(self, prefix: str, image: str, *, quoted: bool = False, skip: bool = False) -> None:
        """Add ``prefix`` + ``image`` as the next line; it is an occurrence on that line."""
        self.lines.append(prefix + (f'"{image}"' if quoted else image))
        (self.skipped if skip else self.images).append(Written(self.path, len(self.lines), image))


def deployment(n: int, images: Sequence[str]) -> Lines:
    """A Deployment (the first image an initContainer when there are several; every fourth
    with a Helm-placeholder sidecar) and its Service, in one file."""
    name = f"app-{n:03d}"
    f = Lines(f"k8s/team-{n % 4}/{name}/deployment.yaml")
    f.add(
        "apiVersion: apps/v1",
        "kind: Deployment",
        "metadata:",
        f"  name: {name}",
        f"  labels: {{app: {name}}}",
        "spec:",
        "  replicas: 2",
        "  selector:",
        f"    matchLabels: {{app: {name}}}",
        "  template:",
        "    metadata:",
        f"      labels: {{app: {name}}}",
        "    spec:",
    )
    init, main = (images[:1], images[1:]) if len(images) > 1 else ([], images)
    if init:
        f.add("      initContainers:")
        for i, image in enumerate(init):
            f.add(f"        - name: init-{i}")
            f.image("          image: ", image)
            f.add("          args: [migrate]")
    f.add("      containers:")
    for i, image in enumerate(main):
        f.add(f"        - name: main-{i}")
        f.image("          image: ", image, quoted=i % 2 == 1)
        f.add("          ports: [{containerPort: 8080}]", "          resources:")
        f.add("            requests: {cpu: 100m, memory: 64Mi}")
    if n % 4 == 0:
        f.add("        - name: sidecar")
        f.image("          image: ", "{{ .Values.sidecar.image }}", quoted=True, skip=True)
    f.add(
        "---",
        "apiVersion: v1",
        "kind: Service",
        "metadata:",
        f"  name: {name}",
        "spec:",
        f"  selector: {{app: {name}}}",
        "  ports: [{port: 80, targetPort: 8080}]",
    )
    return f


def job(n: int, images: Sequence[str]) -> Lines:
    name = f"batch-{n:03d}"
    f = Lines(f"jobs/{name}.yaml")
    f.add(
        "apiVersion: batch/v1",
        "kind: Job",
        "metadata:",
        f"  name: {name}",
        "spec:",
        "  backoffLimit: 0",
        "  template:",
        "    spec:",
        "      restartPolicy: Never",
        "      containers:",
    )
    for i, image in enumerate(images):
        f.add(f"        - name: step-{i}")
        f.image("          image: ", image)
        f.add("          command: [run]")
    return f


def cronjob(n: int, images: Sequence[str]) -> Lines:
    name = f"nightly-{n:03d}"
    f = Lines(f"cronjobs/{name}.yml")
    f.add(
        "apiVersion: batch/v1",
        "kind: CronJob",
        "metadata:",
        f"  name: {name}",
        "spec:",
        '  schedule: "0 3 * * *"',
        "  jobTemplate:",
        "    spec:",
        "      template:",
        "        spec:",
        "          restartPolicy: OnFailure",
        "          containers:",
    )
    for i, image in enumerate(images):
        f.add(f"            - name: task-{i}")
        f.image("              image: ", image)
    return f


def compose(n: int, images: Sequence[str]) -> Lines:
    """Services with images, and one that compose builds (skipped by scan)."""
    f = Lines(f"compose/stack-{n:03d}/docker-compose.yml")
    f.add("services:")
    for i, image in enumerate(images):
        f.add(f"  svc-{i}:")
        f.image("    image: ", image, quoted=i % 2 == 0)
        f.add("    restart: unless-stopped")
    f.add("  local:", "    build: .")
    f.image("    image: ", f"local/stack-{n:03d}:dev", skip=True)
    return f


def dockerfile(n: int, images: Sequence[str]) -> Lines:
    """Multi-stage: the first image through an ``ARG`` default (reported on its ``FROM``)."""
    f = Lines(f"docker/service-{n:03d}/Dockerfile")
    f.add("# syntax=docker/dockerfile:1")
    first, *rest = images
    f.add(f"ARG BASE={first}")
    f.add("FROM ${BASE} AS build")
    f.images.append(Written(f.path, len(f.lines), first))
    f.add("RUN make build")
    for image in rest:
        f.image("FROM ", image)
        f.add("COPY --from=build /out /app")
    f.add("FROM build AS test", "RUN make test")  # a stage, not an image
    return f


# What each file holds: how to write it and how many images it takes.
FILE_KINDS: tuple[tuple[Callable[[int, Sequence[str]], Lines], int], ...] = (
    (deployment, 3),
    (job, 2),
    (cronjob, 1),
    (compose, 4),
    (dockerfile, 2),
)


@dataclass(frozen=True)
class Tree:
    """The images every tool checks, and what the tree on disk says about them."""

    root: Path
    written: tuple[Written, ...]  # to be checked, sorted
    skipped: tuple[Written, ...]  # to be skipped by scan, sorted
    present: frozenset[str]
    distinct: tuple[str, ...]  # in order of first appearance in the tree
    files: dict[str, int]  # by kind
    repositories: int
    registries: int

    @property
    def missing(self) -> int:
        return len(self.distinct) - len(self.present)

    @property
    def missing_written(self) -> int:
        return sum(1 for w in self.written if w.image not in self.present)


def seed(registries: Sequence[LocalRegistry], images: int, repos: int) -> list[str]:
    """Push ``images`` images over ``repos`` repositories into each registry."""
    names: list[str] = []
    with httpx.Client(timeout=30.0, trust_env=False) as client:
        for i, registry in enumerate(registries):
            pushed = seed_many(client, registry.url, repos, images // repos, prefix=f"team{i}")
            names += [f"{registry.host}/{name}" for name in pushed]
    return names


def occurrences(present: Sequence[str], total: int, rng: random.Random) -> list[str]:
    """``total`` images written: each of ``present`` once, then repeats; ~10% of absent tags
    (10% of the distinct images, written 10% of ``total`` times) mixed in; shuffled."""
    repositories = sorted({image.rpartition(":")[0] for image in present})
    absent = [
        f"{repositories[(i * 7) % len(repositories)]}:absent-{i}"
        for i in range(max(1, round(len(present) * MISSING_SHARE)))
    ]
    absent_written = max(len(absent), round(total * MISSING_SHARE))
    written = [*present, *rng.choices(present, k=max(0, total - len(present)))]
    written += [*absent, *rng.choices(absent, k=absent_written - len(absent))]
    rng.shuffle(written)
    return written


def write_tree(root: Path, images: Sequence[str]) -> tuple[list[Lines], Counter[str]]:
    """Fill files of each kind in turn until every image is written."""
    files: list[Lines] = []
    kinds: Counter[str] = Counter()
    rest = list(images)
    while rest:
        write, size = FILE_KINDS[len(files) % len(FILE_KINDS)]
        chunk, rest = rest[:size], rest[size:]
        f = write(len(files), chunk)
        path = root / f.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(f.lines) + "\n", encoding="utf-8")
        files.append(f)
        kinds[write.__name__] += 1
    return files, kinds


def build_tree(root: Path, registries: Sequence[LocalRegistry], args: argparse.Namespace) -> Tree:
    present = seed(registries, args.images, args.repos)
    images = occurrences(present, args.occurrences, random.Random(SEED))
    files, kinds = write_tree(root, images)
    written = sorted(w for f in files for w in f.images)
    return Tree(
        root=root,
        written=tuple(written),
        skipped=tuple(sorted(w for f in files for w in f.skipped)),
        present=frozenset(present),
        distinct=tuple(dict.fromkeys(w.image for f in files for w in f.images)),
        files=dict(kinds),
        repositories=len({image.rpartition(":")[0] for image in present}),
        registries=len(registries),
    )


# -- verifying imagecheck scan ---------------------------------------------------------------


def scan_argv(root: Path) -> list[str]:
    return [sys.executable, "-m", "imagecheck", "scan", "--output", "json", str(root)]


def check_scan(tree: Tree, child: Child) -> None:
    """Every occurrence written comes back, at its file and line, with the right answer; the
    skipped ones skipped; no file problem; exit 1 (0 when nothing is missing)."""
    try:
        report = json.loads(child.stdout)
    except ValueError:
        report = None
    if not isinstance(report, dict) or not isinstance(report.get("occurrences"), list):
        raise wrong_answer(
            f"imagecheck scan exited {child.returncode} without a JSON report; "
            f"stderr: {tail(child.stderr)}"
        )
    if report.get("problems"):
        raise wrong_answer(f"imagecheck scan reported file problems: {report['problems'][:3]}")
    checked: list[Written] = []
    skipped: list[Written] = []
    wrong: list[str] = []
    for entry in report["occurrences"]:
        where = Written(os.path.relpath(entry["file"], tree.root), entry["line"], entry["image"])
        if entry.get("skipped"):
            skipped.append(where)
            if entry.get("result") is not None:
                wrong.append(f"{where.file}:{where.line}: skipped ({entry['skipped']}) but checked")
            continue
        checked.append(where)
        result = entry.get("result")
        if not isinstance(result, dict):
            wrong.append(f"{where}: no result")
        else:
            errors = result_errors(where.image, result, tree.present)
            wrong += [f"{where.file}:{where.line}: {error}" for error in errors]
    wrong += _difference("checked", tree.written, checked)
    wrong += _difference("skipped", tree.skipped, skipped)
    if wrong:
        raise wrong_answer(f"imagecheck scan answered {len(wrong)} wrongly: {wrong[0]}")
    expected_exit = 1 if tree.missing else 0
    if child.returncode != expected_exit:
        raise wrong_answer(
            f"imagecheck scan exited {child.returncode}, expected {expected_exit}; "
            f"stderr: {tail(child.stderr)}"
        )


def _difference(what: str, expected: Sequence[Written], got: Sequence[Written]) -> list[str]:
    """Occurrences written but not reported, and reported but not written (file, line, text)."""
    lost = Counter(expected) - Counter(got)
    extra = Counter(got) - Counter(expected)
    return [f"{w.file}:{w.line} {w.image}: written, not reported as {what}" for w in lost] + [
        f"{w.file}:{w.line} {w.image}: reported as {what}, not written so" for w in extra
    ]


# -- the rounds ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    registries: tuple[LocalRegistry, ...]
    tree: Tree
    env: dict[str, str]


@dataclass(frozen=True)
class Figures:
    """Per tool: time and requests of each round, and peak RSS (KiB) from one untimed run;
    and how long finding the images alone took in each round."""

    rounds: dict[str, list[RunFigures]]
    peak_rss_kib: dict[str, int]
    find_only: list[float]


def run_rounds(setup: Setup, rounds: int) -> Figures:
    tree, env = setup.tree, setup.env

    def skopeo_parallel(spawn: Spawn) -> list[Child]:
        with ThreadPoolExecutor(SKOPEO_WORKERS) as pool:
            return list(pool.map(lambda image: spawn(skopeo_argv(image)), tree.distinct))

    runs: dict[str, Callable[[Spawn], list[Child]]] = {
        SCAN: lambda spawn: [spawn(scan_argv(tree.root))],
        CHECK: lambda spawn: [spawn(imagecheck_argv(tree.distinct))],
        SKOPEO: skopeo_parallel,
    }
    checks: dict[str, Callable[[list[Child]], None]] = {
        SCAN: lambda children: check_scan(tree, children[0]),
        CHECK: lambda children: check_imagecheck(tree.distinct, tree.present, children[0]),
        SKOPEO: lambda children: check_skopeo(tree.distinct, tree.present, children),
    }
    # Warm the page cache (interpreter, imports, the skopeo binary) outside any measurement.
    run_child(imagecheck_argv(tree.distinct[:1]), env)
    run_child(skopeo_argv(tree.distinct[0]), env)
    figures = Figures({tool: [] for tool in TOOLS}, {}, [])
    for number in range(1, rounds + 1):
        # Tools alternate within each round, so drift in the machine's load hits them all.
        for tool in TOOLS:
            progress(f"round {number}/{rounds}: {tool}")
            figures.rounds[tool].append(measure(setup.registries, runs[tool], checks[tool], env))
        started = time.perf_counter()
        scan_paths([str(tree.root)])
        figures.find_only.append(time.perf_counter() - started)
    for tool in TOOLS:
        progress(f"peak memory: {tool}")
        figures.peak_rss_kib[tool] = peak_rss_kib(runs[tool], checks[tool], env)
    return figures


# -- figures ---------------------------------------------------------------------------------


def summarize(setup: Setup, figures: Figures) -> dict[str, Any]:
    tree = setup.tree
    count = len(tree.distinct)
    tools: dict[str, dict[str, Any]] = {}
    for tool, runs in figures.rounds.items():
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
            "peak_rss_mib": figures.peak_rss_kib[tool] / 1024,
        }

    def ratio(numerator: str, denominator: str) -> dict[str, float]:
        top, bottom = tools[numerator]["wall_seconds"], tools[denominator]["wall_seconds"]
        return {"median": top["median"] / bottom["median"], "min": top["min"] / bottom["min"]}

    ratios = {f"{SKOPEO} / {SCAN}": ratio(SKOPEO, SCAN), f"{SCAN} / {CHECK}": ratio(SCAN, CHECK)}
    speedup = ratios[f"{SKOPEO} / {SCAN}"]["median"]
    after_ping = tools[SCAN]["requests_per_image_after_ping"]
    targets = {
        f"speedup of {SCAN} vs {SKOPEO}": {
            "target": f">= {SPEEDUP_TARGET:g}x",
            "value": speedup,
            "pass": speedup >= SPEEDUP_TARGET,
        },
        f"{SCAN} requests/distinct image after ping": {
            "target": f"<= {REQUESTS_AFTER_PING_TARGET:g}",
            "value": after_ping,
            "pass": after_ping <= REQUESTS_AFTER_PING_TARGET,
        },
    }
    return {
        "workload": {
            "files": sum(tree.files.values()),
            "files_by_kind": tree.files,
            "occurrences": len(tree.written),
            "missing_occurrences": tree.missing_written,
            "skipped_occurrences": len(tree.skipped),
            "distinct_images": count,
            "present": len(tree.present),
            "missing": tree.missing,
            "registries": tree.registries,
            "repositories": tree.repositories,
            "rounds": len(figures.rounds[SCAN]),
        },
        "environment": environment(setup.registries),
        "methods": METHODS,
        "tools": tools,
        "find_only_seconds": {
            "median": statistics.median(figures.find_only),
            "min": min(figures.find_only),
        },
        "ratios": ratios,
        "targets": targets,
    }


def environment(registries: Sequence[LocalRegistry]) -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "imagecheck": imagecheck.__version__,
        "imagecheck_concurrency": cli_default(scan_command, "concurrency"),
        "skopeo": tool_version(["skopeo", "--version"]),
        "registry": tool_version([registries[0].binary, "--version"]),
        "registry_urls": [r.url for r in registries],
    }


def render(summary: dict[str, Any]) -> str:
    w, env = summary["workload"], summary["environment"]
    kinds = ", ".join(f"{n} {kind}" for kind, n in w["files_by_kind"].items())
    lines = [
        f"imagecheck {env['imagecheck']} scan vs {env['skopeo']}: {w['files']} files "
        f"({kinds}), {w['rounds']} rounds",
        f"{w['occurrences']} images written ({w['missing_occurrences']} of them missing tags; "
        f"plus {w['skipped_occurrences']} to be skipped): {w['distinct_images']} distinct "
        f"({w['present']} present in {w['repositories']} repositories on {w['registries']} "
        f"registries, {w['missing']} missing tags)",
        f"registries: {env['registry']}, no auth, plain HTTP: {', '.join(env['registry_urls'])}",
        f"{env['cpus']} CPUs, Python {env['python']}; imagecheck --concurrency "
        f"{env['imagecheck_concurrency']} (default); skopeo {SKOPEO_WORKERS}-way = "
        f"{SKOPEO_WORKERS} worker threads over the distinct images",
        "all answers verified correct in every round (scan: every occurrence, file and line); "
        "requests are per distinct image, summed over the registries",
        "",
        f"{'':<16}  {'wall median':>11}  {'wall min':>9}  {'requests/image':>14}  "
        f"{'after ping':>10}  {'peak RSS MiB':>12}",
    ]
    for tool, t in summary["tools"].items():
        wall = t["wall_seconds"]
        lines.append(
            f"{tool:<16}  {wall['median']:>10.3f}s  {wall['min']:>8.3f}s  "
            f"{t['requests_per_image']:>14.2f}  {t['requests_per_image_after_ping']:>10.2f}  "
            f"{t['peak_rss_mib']:>12.1f}"
        )
    find = summary["find_only_seconds"]
    lines += [
        "",
        f"finding the images alone (scan_paths, in process): {find['median'] * 1000:.0f} ms "
        f"median ({find['min'] * 1000:.0f} ms min)",
    ]
    for name, ratio in summary["ratios"].items():
        lines.append(f"{name}: {ratio['median']:.2f}x median ({ratio['min']:.2f}x on the minimums)")
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
        description="imagecheck scan over a manifest tree vs skopeo inspect, on local registries."
    )
    parser.add_argument("--registries", type=int, default=3, help="registries (default 3)")
    parser.add_argument(
        "--images", type=int, default=40, help="images seeded per registry (default 40)"
    )
    parser.add_argument(
        "--repos", type=int, default=4, help="repositories per registry (default 4)"
    )
    parser.add_argument(
        "--occurrences",
        type=int,
        default=300,
        help="times the present images are written in all (default 300)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds per tool (default 5)")
    parser.add_argument(
        "--json", action="store_true", help="print figures as JSON on stdout (table to stderr)"
    )
    args = parser.parse_args(argv)
    if min(args.registries, args.images, args.repos, args.rounds) < 1:
        parser.error("--registries, --images, --repos and --rounds must be at least 1")
    if args.images % args.repos:
        parser.error("--images must be a multiple of --repos")
    if args.occurrences < args.registries * args.images:
        parser.error("--occurrences must be at least --registries x --images (each image once)")
    return args


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    binary = require_tools()
    package_root = Path(imagecheck.__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="imagecheck-bench-scan-") as tmp:
        docker_config = Path(tmp) / "docker-config"
        docker_config.mkdir()
        registries: list[LocalRegistry] = []
        try:
            for i in range(args.registries):
                registries.append(start_registry(Path(tmp) / f"registry-{i}", binary))
            progress(
                f"seeding {args.images} images in {args.repos} repositories in each of "
                f"{len(registries)} registries; writing the tree"
            )
            tree = build_tree(Path(tmp) / "tree", registries, args)
            setup = Setup(tuple(registries), tree, child_env(package_root, docker_config))
            return summarize(setup, run_rounds(setup, args.rounds))
        finally:
            for registry in registries:
                registry.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        summary = benchmark(args)
    except BenchmarkError as exc:
        print(f"scan_tree: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(render(summary), file=sys.stderr)
        print(json.dumps(summary, indent=2))
    else:
        print(render(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
