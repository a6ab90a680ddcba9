"""Find the images in the real-world corpus: files/s and peak memory, no network (issue #13).

Usage: ``python benchmarks/scan_corpus.py [--rounds K] [--copies N] [--corpus DIR] [--json]``
(defaults: 5 rounds over 40 copies of tests/fixtures/corpus, some 2,800 files: the size of the
3,300-file survey that issue #13 reports).

The corpus is copied N times into a temporary directory (each copy in a directory of its own),
so that the figures measure finding images, not the interpreter's start-up. Each round runs,
one after the other:

* ``python -m imagecheck scan --list --output json DIR``: find and list every occurrence,
  nothing checked, no network; verified: exactly N times the occurrences of one copy;
* ``grep -rn image: DIR``: the floor, a text search that reads every file but understands
  none (it misses Dockerfiles and JSON, and finds commented-out lines).

Figures: files scanned per second from the median wall time over the rounds (files are those
scan reads: YAML, JSON and Dockerfiles; grep reads them all), and each child's own peak RSS
(``os.wait4`` through the small trampoline of ``_common.run_child``, one more untimed run), as
``check_many.py`` takes them. Also printed: ``scan_paths(DIR)`` in this process, the finding
alone without interpreter start-up. A child that fails (exit not 0, or scan output that is not
a JSON list of occurrences) is exit 1; a missing corpus or grep is exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

if not __package__:  # run as `python benchmarks/scan_corpus.py`: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (
    EXIT_UNAVAILABLE,
    PEAK_RSS_METHOD,
    BenchmarkError,
    Child,
    progress,
    run_child,
    tail,
    wrong_answer,
)
from imagecheck.scanning import scan_paths

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
SCANNED_SUFFIXES = (".yaml", ".yml", ".json")


def scanned_files(corpus: Path) -> int:
    """The files scan reads in ``corpus``: YAML, JSON and Dockerfiles."""
    return sum(
        1
        for path in corpus.rglob("*")
        if path.is_file() and (path.suffix in SCANNED_SUFFIXES or "dockerfile" in path.name.lower())
    )


def scan_argv(corpus: Path) -> list[str]:
    return [sys.executable, "-m", "imagecheck", "scan", "--list", "-o", "json", str(corpus)]


def check_scan(child: Child) -> int:
    """The number of occurrences listed; exit 0 or 2 (``--list`` on invalid references)."""
    if child.returncode not in (0, 2):
        raise wrong_answer(f"scan exited {child.returncode}: {tail(child.stderr)}")
    try:
        report = json.loads(child.stdout)
    except ValueError:
        raise wrong_answer(f"scan wrote no JSON: {tail(child.stdout)}") from None
    occurrences = report.get("occurrences") if isinstance(report, dict) else report
    if not isinstance(occurrences, list):
        raise wrong_answer(f"scan's JSON has no list of occurrences: {tail(child.stdout)}")
    return len(occurrences)


def check_grep(child: Child) -> int:
    if child.returncode != 0:
        raise wrong_answer(f"grep exited {child.returncode}: {tail(child.stderr)}")
    return len(child.stdout.splitlines())


def timed(argv: Sequence[str], env: dict[str, str], rounds: int) -> tuple[list[float], Child]:
    times: list[float] = []
    child = None
    for _ in range(rounds):
        start = time.perf_counter()
        child = run_child(argv, env)
        times.append(time.perf_counter() - start)
    assert child is not None
    return times, child


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--copies", type=int, default=40)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--json", action="store_true", help="figures as JSON on stdout")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except BenchmarkError as exc:
        print(f"scan_corpus: {exc}", file=sys.stderr)
        return exc.exit_code


def run(args: argparse.Namespace) -> int:
    corpus: Path = args.corpus.resolve()
    grep = shutil.which("grep")
    if not corpus.is_dir() or grep is None:
        raise BenchmarkError(f"no corpus at {corpus}, or no grep", EXIT_UNAVAILABLE)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    one_copy, _ = scan_paths([str(corpus)])
    with tempfile.TemporaryDirectory(prefix="scan-corpus-") as scratch:
        tree = Path(scratch)
        for copy in range(args.copies):
            shutil.copytree(corpus, tree / f"copy{copy:03d}", symlinks=True)
        return measure(args, tree, grep, env, len(one_copy) * args.copies)


def measure(
    args: argparse.Namespace, tree: Path, grep: str, env: dict[str, str], expected: int
) -> int:
    files = scanned_files(tree)
    rows = {
        "imagecheck scan --list": (scan_argv(tree), check_scan),
        "grep -rn image:": ([grep, "-rn", "image:", str(tree)], check_grep),
    }
    figures: dict[str, dict[str, float | int]] = {}
    for name, (command, check) in rows.items():
        progress(f"{name}: {args.rounds} rounds")
        times, child = timed(command, env, args.rounds)
        found = check(child)
        peak = run_child(command, env, small_parent=True)
        check(peak)
        if name.startswith("imagecheck") and found != expected:
            raise wrong_answer(f"scan listed {found} occurrences, not {expected}")
        median = statistics.median(times)
        figures[name] = {
            "median_s": round(median, 4),
            "min_s": round(min(times), 4),
            "files_per_s": round(files / median, 1),
            "peak_rss_mib": round(peak.max_rss_kib / 1024, 1),
            "found": found,
        }
    start = time.perf_counter()
    occurrences, _ = scan_paths([str(tree)])
    in_process = time.perf_counter() - start
    summary = {
        "corpus": str(args.corpus),
        "copies": args.copies,
        "files": files,
        "rounds": args.rounds,
        "rows": figures,
        "scan_paths_in_process_s": round(in_process, 4),
        "scan_paths_occurrences": len(occurrences),
        "peak_rss_method": PEAK_RSS_METHOD,
    }
    report(summary)
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


def report(summary: dict[str, object]) -> None:
    out = sys.stderr
    print(
        f"corpus: {summary['copies']} copies, {summary['files']} files, {summary['rounds']} rounds",
        file=out,
    )
    print(f"{'row':32} {'median s':>9} {'files/s':>9} {'peak MiB':>9} {'found':>6}", file=out)
    rows = summary["rows"]
    assert isinstance(rows, dict)
    for name, f in rows.items():
        print(
            f"{name:32} {f['median_s']:>9} {f['files_per_s']:>9} {f['peak_rss_mib']:>9}"
            f" {f['found']:>6}",
            file=out,
        )
    print(
        f"scan_paths in this process: {summary['scan_paths_in_process_s']} s, "
        f"{summary['scan_paths_occurrences']} occurrences",
        file=out,
    )


if __name__ == "__main__":
    sys.exit(main())
