"""Start-up: ``imagecheck --version`` and one cold ``imagecheck check`` against skopeo (issue #14).

Usage: ``python benchmarks/startup.py [--rounds K] [--top N] [--json]`` (defaults: 20 rounds,
the 12 costliest packages).

A no-auth ``docker-registry`` on plain HTTP at 127.0.0.1 is seeded with one OCI image. Each
round runs every row below once, in turn (so a drift in the machine's speed touches every row
alike), after one untimed warm-up run of each:

* ``imagecheck --version`` (the console script beside this interpreter, else ``-m``);
* ``imagecheck check --output json IMAGE``, verified: ``found`` with a ``sha256:`` digest;
* ``skopeo inspect --no-tags --no-creds --tls-verify=false docker://IMAGE``, verified: exit 0
  with a ``Digest``;
* floors, no imagecheck: the interpreter (``python -c pass``), ``import httpx, asyncio, ssl``,
  and what a check cannot do without (those, plus httpcore, anyio and its httpcore backend,
  which the first asynchronous request loads, and click); httpx's own command line is left
  out of them, as ``imagecheck`` leaves it out.

Figures: wall time of each child (``time.perf_counter()`` from spawn to reap, interpreter
start-up included), median and min over the rounds, and each median as a ratio to skopeo's.
Targets, PASS or MISS: ``--version`` <= 50 ms, ``check`` of one image <= 120 ms. Then one
``python -X importtime`` run of the check: the packages whose modules took longest to import
(their own time, summed per top-level package), as a guide to what start-up is made of; the
figures of that run are inflated by the measuring itself.

A wrong answer is exit 1; docker-registry or skopeo missing, or a registry that cannot start,
exit 2. Otherwise 0, targets met or not.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

if not __package__:  # run as `python benchmarks/startup.py`: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (
    BenchmarkError,
    Child,
    check_imagecheck,
    check_skopeo,
    child_env,
    progress,
    require_tools,
    run_child,
    skopeo_argv,
    start_registry,
    tail,
    tool_version,
    wrong_answer,
)
from tests.support.images import seed_many

ROOT = Path(__file__).resolve().parents[1]
TARGETS_S = {"imagecheck --version": 0.050, "imagecheck check": 0.120}
# The floors skip httpx's own command line as imagecheck's does (imagecheck.cli.main).
_NO_HTTPX_CLI = "import sys; sys.modules['httpx._main'] = None; "
FLOOR_IMPORTS = {
    "floor: python -c pass": "pass",
    "floor: import httpx, asyncio, ssl": _NO_HTTPX_CLI + "import httpx, asyncio, ssl",
    "floor: + httpcore, anyio, click": _NO_HTTPX_CLI
    + "import httpx, asyncio, ssl, httpcore, anyio, httpcore._backends.anyio, click",
}


def imagecheck_command() -> list[str]:
    script = Path(sys.executable).with_name("imagecheck")
    return [str(script)] if script.exists() else [sys.executable, "-m", "imagecheck"]


def rows(image: str) -> dict[str, tuple[list[str], Callable[[Child], None]]]:
    """Each row's command line and how its answer is verified."""
    imagecheck = imagecheck_command()
    present = {image}

    def version(child: Child) -> None:
        if child.returncode != 0 or not child.stdout.startswith(b"imagecheck, version "):
            raise wrong_answer(f"--version: exit {child.returncode}, {tail(child.stdout)}")

    def ran(child: Child) -> None:
        if child.returncode != 0:
            raise wrong_answer(f"a floor command failed: {tail(child.stderr)}")

    table: dict[str, tuple[list[str], Callable[[Child], None]]] = {
        "imagecheck --version": ([*imagecheck, "--version"], version),
        "imagecheck check": (
            [*imagecheck, "check", "--output", "json", image],
            lambda child: check_imagecheck([image], present, child),
        ),
        "skopeo inspect": (
            skopeo_argv(image),
            lambda child: check_skopeo([image], present, [child]),
        ),
    }
    for name, code in FLOOR_IMPORTS.items():
        table[name] = ([sys.executable, "-c", code], ran)
    return table


def timed_rounds(
    table: dict[str, tuple[list[str], Callable[[Child], None]]], env: dict[str, str], rounds: int
) -> dict[str, list[float]]:
    """Wall seconds of each row, one run of each per round, every answer verified."""
    for argv, verify in table.values():  # warm-up: page cache, .pyc, the registry's first answer
        verify(run_child(argv, env))
    times: dict[str, list[float]] = {name: [] for name in table}
    for _ in range(rounds):
        for name, (argv, verify) in table.items():
            start = time.perf_counter()
            child = run_child(argv, env)
            times[name].append(time.perf_counter() - start)
            verify(child)
    return times


def top_imports(argv: Sequence[str], env: dict[str, str], top: int) -> list[tuple[str, float]]:
    """``python -X importtime ARGV``: milliseconds of import per top-level package (each
    module's own time, summed), the costliest first."""
    child = run_child([sys.executable, "-X", "importtime", *argv], env)
    if child.returncode != 0:
        raise wrong_answer(f"-X importtime {' '.join(argv)}: {tail(child.stderr)}")
    per_package: collections.Counter[str] = collections.Counter()
    for line in child.stderr.decode(errors="replace").splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        per_package[name.strip().split(".")[0]] += int(own)
    return [(name, us / 1000) for name, us in per_package.most_common(top)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--top", type=int, default=12, help="packages in the import table")
    parser.add_argument("--json", action="store_true", help="figures as JSON on stdout")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except BenchmarkError as exc:
        print(f"startup: {exc}", file=sys.stderr)
        return exc.exit_code


def run(args: argparse.Namespace) -> int:
    binary = require_tools()
    with tempfile.TemporaryDirectory(prefix="startup-") as scratch:
        workdir = Path(scratch)
        (workdir / "docker-config").mkdir()
        env = child_env(ROOT, workdir / "docker-config")
        registry = start_registry(workdir / "registry", binary)
        try:
            with httpx.Client() as client:
                image = f"{registry.host}/{seed_many(client, registry.url, 1, 1)[0]}"
            table = rows(image)
            progress(f"{len(table)} rows, {args.rounds} rounds, one image at {registry.host}")
            times = timed_rounds(table, env, args.rounds)
            imports = top_imports(["-m", "imagecheck", "check", "-o", "json", image], env, args.top)
        finally:
            registry.stop()
    summary = figures(times, imports)
    report(summary)
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


def figures(times: dict[str, list[float]], imports: list[tuple[str, float]]) -> dict[str, object]:
    skopeo = statistics.median(times["skopeo inspect"])
    rows_out = {
        name: {
            "median_ms": round(1000 * statistics.median(t), 1),
            "min_ms": round(1000 * min(t), 1),
            "x_skopeo": round(statistics.median(t) / skopeo, 2),
        }
        for name, t in times.items()
    }
    targets = {
        name: {
            "target_ms": 1000 * limit,
            "median_ms": rows_out[name]["median_ms"],
            "met": statistics.median(times[name]) <= limit,
        }
        for name, limit in TARGETS_S.items()
    }
    return {
        "rounds": len(times["skopeo inspect"]),
        "python": sys.version.split()[0],
        "skopeo": tool_version(["skopeo", "--version"]),
        "rows": rows_out,
        "targets": targets,
        "imports_ms_by_package": dict(imports),
    }


def report(summary: dict[str, object]) -> None:
    out = sys.stderr
    rows_out = summary["rows"]
    targets = summary["targets"]
    assert isinstance(rows_out, dict)
    assert isinstance(targets, dict)
    print(f"\n{summary['rounds']} rounds, python {summary['python']}", file=out)
    print(f"{'row':38} {'median ms':>10} {'min ms':>8} {'x skopeo':>9}", file=out)
    for name, row in rows_out.items():
        print(
            f"{name:38} {row['median_ms']:>10.1f} {row['min_ms']:>8.1f} {row['x_skopeo']:>9.2f}",
            file=out,
        )
    print("\ntargets", file=out)
    for name, target in targets.items():
        verdict = "PASS" if target["met"] else "MISS"
        print(
            f"  {verdict}  {name}: median {target['median_ms']:.1f} ms "
            f"(target <= {target['target_ms']:.0f} ms)",
            file=out,
        )
    imports = summary["imports_ms_by_package"]
    assert isinstance(imports, dict)
    print("\nimports of one `imagecheck check` by package (-X importtime, own time):", file=out)
    for name, ms in imports.items():
        print(f"  {name:24} {ms:7.1f} ms", file=out)


if __name__ == "__main__":
    sys.exit(main())
