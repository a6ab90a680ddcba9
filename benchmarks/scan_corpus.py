"""Find the images in the real-world corpus: files/s and peak memory, no network (issue #13).

Usage: ``python benchmarks/scan_corpus.py [--rounds K] [--corpus DIR] [--json]`` (defaults:
5 rounds over tests/fixtures/corpus).

Each round runs, one after the other:

* ``python -m imagecheck scan --list --output json DIR``: find and list every occurrence,
  nothing checked. Until ``scan --list`` exists, ``python -c`` calling
  :func:`imagecheck.scanning.scan_paths` on DIR in a child process stands in for it (the row
  says which ran): the same finding, without the CLI's start-up and printing;
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
# Stands in for `scan --list` until the flag exists: the occurrences, as JSON, on stdout.
FALLBACK = (
    "import json, sys\n"
    "from imagecheck.scanning import scan_paths\n"
    "found, problems = scan_paths([sys.argv[1]])\n"
    "print(json.dumps([[o.file, o.line, o.image, o.skipped] for o in found]))\n"
)


def scanned_files(corpus: Path) -> int:
    """The files scan reads in ``corpus``: YAML, JSON and Dockerfiles."""
    return sum(
        1
        for path in corpus.rglob("*")
        if path.is_file() and (path.suffix in SCANNED_SUFFIXES or "dockerfile" in path.name.lower())
    )


def has_list_flag(env: dict[str, str]) -> bool:
    child = run_child([sys.executable, "-m", "imagecheck", "scan", "--help"], env)
    return b"--list" in child.stdout


def scan_argv(corpus: Path, with_list: bool) -> list[str]:
    if with_list:
        return [
            sys.executable,
            "-m",
            "imagecheck",
            "scan",
            "--list",
            "--output",
            "json",
            str(corpus),
        ]
    return [sys.executable, "-c", FALLBACK, str(corpus)]


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
    files = scanned_files(corpus)
    with_list = has_list_flag(env)
    scan_name = "imagecheck scan --list" if with_list else "scan_paths (no --list yet)"
    rows = {
        scan_name: (scan_argv(corpus, with_list), check_scan),
        "grep -rn image:": ([grep, "-rn", "image:", str(corpus)], check_grep),
    }
    figures: dict[str, dict[str, float | int]] = {}
    for name, (command, check) in rows.items():
        progress(f"{name}: {args.rounds} rounds")
        times, child = timed(command, env, args.rounds)
        found = check(child)
        peak = run_child(command, env, small_parent=True)
        check(peak)
        median = statistics.median(times)
        figures[name] = {
            "median_s": round(median, 4),
            "min_s": round(min(times), 4),
            "files_per_s": round(files / median, 1),
            "peak_rss_mib": round(peak.max_rss_kib / 1024, 1),
            "found": found,
        }
    start = time.perf_counter()
    occurrences, _ = scan_paths([str(corpus)])
    in_process = time.perf_counter() - start
    summary = {
        "corpus": str(corpus),
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
    print(f"corpus: {summary['files']} files, {summary['rounds']} rounds", file=out)
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
