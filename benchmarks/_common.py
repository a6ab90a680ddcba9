"""What the benchmarks share: children reaped with their own peak memory, requests counted in
the registries' access logs, skopeo's command line and how its answers are verified, and the
tools and registries a benchmark needs (a missing one is exit 2, a wrong answer exit 1).

Imported as ``benchmarks._common`` (the repository root is on ``sys.path`` in the dev venv's
editable install; each script adds it when run otherwise).
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from tests.support.registry import LocalRegistry, find_registry_binary

EXIT_WRONG_ANSWER = 1
EXIT_UNAVAILABLE = 2

PEAK_RSS_METHOD = (
    "os.wait4() on each child: that process's own ru_maxrss (KiB on Linux), in one more run "
    "of each tool after the timed rounds, each child forked by a small Python trampoline "
    "(a child forked by the benchmark itself inherits its RSS; the trampoline's floor is "
    "about 8 MiB); for skopeo, the largest of its processes"
)


class BenchmarkError(Exception):
    """Ends the run with ``exit_code`` and a one-line reason."""

    def __init__(self, reason: str, exit_code: int) -> None:
        super().__init__(reason)
        self.exit_code = exit_code


def wrong_answer(reason: str) -> BenchmarkError:
    return BenchmarkError(reason, EXIT_WRONG_ANSWER)


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# -- children --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Child:
    """A finished child process: exit code, output, and its peak resident set (see
    :func:`run_child` for when that figure means anything)."""

    returncode: int
    stdout: bytes
    stderr: bytes
    max_rss_kib: int


Spawn = Callable[[Sequence[str]], Child]
"""Runs one command line to the end (``run_child`` with the environment bound)."""

# Linux keeps the peak RSS of the address space a process had *before* exec in its rusage
# (fs/exec.c, setmax_mm_hiwater_rss), and a child forked or vforked from this process starts
# with this process's resident set: ru_maxrss from wait4 would then never be below the
# benchmark's own 35-50 MiB, whatever the child used. This trampoline (python -I -S, about
# 8 MiB) forks the child instead and reports its wait4 status and ru_maxrss on a pipe.
_TRAMPOLINE = """\
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
os.write(int(sys.argv[1]), f"{status} {usage.ru_maxrss}".encode())
"""


def run_child(argv: Sequence[str], env: dict[str, str], *, small_parent: bool = False) -> Child:
    """Run ``argv`` and reap it with ``wait4``, whose rusage covers that one process only.

    Only with ``small_parent`` is ``max_rss_kib`` the child's own peak (above the
    trampoline's ~8 MiB floor); without it, it is at least this process's RSS. The trampoline
    costs a Python start-up, so timed runs go without it.
    """
    if not small_parent:
        return _spawn(argv, env, ())
    report_r, report_w = os.pipe()
    try:
        trampoline = [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, str(report_w), *argv]
        child = _spawn(trampoline, env, (report_w,))
        os.close(report_w)
        report_w = -1
        status, max_rss = (int(word) for word in os.read(report_r, 64).split())
    finally:
        os.close(report_r)
        if report_w >= 0:
            os.close(report_w)
    return replace(child, returncode=os.waitstatus_to_exitcode(status), max_rss_kib=max_rss)


def _spawn(argv: Sequence[str], env: dict[str, str], pass_fds: tuple[int, ...]) -> Child:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        # Files, not pipes: nothing to drain while waiting, so wait4 cannot deadlock.
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, pass_fds=pass_fds
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait
        out.seek(0)
        err.seek(0)
        return Child(process.returncode, out.read(), err.read(), usage.ru_maxrss)


def child_env(package_root: Path, docker_config: Path) -> dict[str, str]:
    # Byte-compile imagecheck first, as `pip install` does: with PYTHONDONTWRITEBYTECODE set (as
    # on these machines) an editable tree would otherwise be compiled anew by every run.
    compileall.compile_dir(str(package_root / "imagecheck"), quiet=1)
    env = dict(os.environ)
    # The child imports this same imagecheck, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_root), env.get("PYTHONPATH")]))
    # No credentials for either tool (skopeo has --no-creds), and no proxy for 127.0.0.1.
    env["DOCKER_CONFIG"] = str(docker_config)
    for name in ("NO_PROXY", "no_proxy"):
        env[name] = ",".join(filter(None, [env.get(name), "127.0.0.1", "localhost"]))
    return env


def tail(data: bytes, limit: int = 300) -> str:
    text = data.decode("utf-8", errors="replace").strip().replace("\n", " | ")
    return text[-limit:] or "(empty)"


def tool_version(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=10)
    return done.stdout.strip() or done.stderr.strip() or "unknown"


def cli_default(command: click.Command, option: str) -> object:
    """What ``command`` uses for ``option`` when it is not given (read from click)."""
    return next((p.default for p in command.params if p.name == option), None)


# -- requests, counted by the registries -----------------------------------------------------


@dataclass(frozen=True)
class RunFigures:
    """One tool over the whole workload, once: time and requests (memory is measured apart,
    by :func:`peak_rss_kib`)."""

    seconds: float
    requests: int
    pings: int


class RequestWindow:
    """Counts the registries' requests between ``open()`` and ``close()`` from their access
    logs, summed over every registry given."""

    def __init__(self, *registries: LocalRegistry) -> None:
        self.registries = registries
        self.start_counts = [0] * len(registries)
        self.start_offsets = [0] * len(registries)

    def open(self) -> None:
        for i, registry in enumerate(self.registries):
            self.start_counts[i] = registry.request_count()  # waits until the log is still
            self.start_offsets[i] = registry.access_log_path.stat().st_size

    def close(self) -> tuple[int, int]:
        """``(requests, pings)`` since ``open()``."""
        requests = pings = 0
        for registry, count, offset in zip(
            self.registries, self.start_counts, self.start_offsets, strict=True
        ):
            requests += registry.request_count() - count
            with registry.access_log_path.open("rb") as log:
                log.seek(offset)
                added = log.read().decode("utf-8", errors="replace")
            pings += sum(1 for line in added.splitlines() if '"GET /v2/ HTTP/' in line)
        return requests, pings


def measure(
    registries: Sequence[LocalRegistry],
    run: Callable[[Spawn], list[Child]],
    check: Callable[[list[Child]], None],
    env: dict[str, str],
) -> RunFigures:
    """Run once, counting time and requests; ``check`` raises before a wrong run is kept."""
    window = RequestWindow(*registries)
    window.open()
    started = time.perf_counter()
    children = run(lambda argv: run_child(argv, env))
    seconds = time.perf_counter() - started
    requests, pings = window.close()
    check(children)
    return RunFigures(seconds, requests, pings)


def peak_rss_kib(
    run: Callable[[Spawn], list[Child]],
    check: Callable[[list[Child]], None],
    env: dict[str, str],
) -> int:
    """Run once more, untimed, each child forked by the small trampoline: the largest child's
    own peak RSS. Its answers are checked too."""
    children = run(lambda argv: run_child(argv, env, small_parent=True))
    check(children)
    return max(c.max_rss_kib for c in children)


# -- imagecheck check ------------------------------------------------------------------------


def imagecheck_argv(images: Sequence[str], options: Sequence[str] = ()) -> list[str]:
    return [sys.executable, "-m", "imagecheck", "check", "--output", "json", *options, *images]


def check_imagecheck(
    images: Sequence[str], present: Set[str], child: Child, tool: str = "imagecheck"
) -> None:
    """``imagecheck check --output json`` (or ``floor.py``, which answers alike): one result
    per image, in order, ``found`` with a ``sha256:`` digest for a present image and
    ``missing`` for an absent one; exit 1 when any is absent, else 0."""
    expected_exit = 0 if all(image in present for image in images) else 1
    try:
        results = json.loads(child.stdout)
    except ValueError:
        results = None
    if not isinstance(results, list) or len(results) != len(images):
        raise wrong_answer(
            f"{tool} exited {child.returncode} without a JSON array of "
            f"{len(images)} results; stderr: {tail(child.stderr)}"
        )
    wrong = []
    for image, result in zip(images, results, strict=True):
        if not isinstance(result, dict):
            wrong.append(f"{image}: {result!r} is not a result object")
        elif result.get("image") != image:
            wrong.append(f"{image}: answered for {result.get('image')!r}")
        else:
            wrong.extend(result_errors(image, result, present))
    if wrong:
        raise wrong_answer(f"{tool} answered {len(wrong)} image(s) wrongly: " + wrong[0])
    if child.returncode != expected_exit:
        raise wrong_answer(f"{tool} exited {child.returncode}, expected {expected_exit}")


def result_errors(image: str, result: dict[str, Any], present: Set[str]) -> list[str]:
    """What is wrong with one JSON result for ``image`` (nothing: an empty list)."""
    want = "found" if image in present else "missing"
    got, digest = result.get("status"), result.get("digest")
    if got != want:
        return [f"{image}: {got} ({result.get('message')}), expected {want}"]
    if want == "found" and not (isinstance(digest, str) and digest.startswith("sha256:")):
        return [f"{image}: found without a sha256 digest ({digest!r})"]
    return []


# -- skopeo ----------------------------------------------------------------------------------


def skopeo_argv(image: str) -> list[str]:
    return [
        "skopeo",
        "inspect",
        "--no-tags",
        "--no-creds",
        "--tls-verify=false",
        f"docker://{image}",
    ]


def check_skopeo(images: Sequence[str], present: Set[str], children: Sequence[Child]) -> None:
    """skopeo exits 0 with a ``Digest`` for a present image, non-zero with the registry's
    ``manifest unknown`` for an absent one; raise on the first that does not."""
    wrong = []
    for image, child in zip(images, children, strict=True):
        if image in present:
            if child.returncode != 0 or b'"Digest"' not in child.stdout:
                wrong.append(f"{image}: exit {child.returncode}, expected 0 ({tail(child.stderr)})")
        elif child.returncode == 0 or b"manifest unknown" not in child.stderr:
            # Non-zero for any reason is not enough: it must be the registry saying "missing".
            wrong.append(
                f"{image}: exit {child.returncode} ({tail(child.stderr)}), "
                "expected non-zero with 'manifest unknown'"
            )
    if wrong:
        raise wrong_answer(f"skopeo answered {len(wrong)} image(s) wrongly: " + wrong[0])


# -- what a benchmark needs ------------------------------------------------------------------


def require_tools() -> str:
    """The ``docker-registry`` binary; exit 2 when it or skopeo is missing."""
    binary = find_registry_binary()
    if binary is None:
        raise BenchmarkError(
            "docker-registry not found (apt-get install docker-registry)", EXIT_UNAVAILABLE
        )
    if shutil.which("skopeo") is None:
        raise BenchmarkError("skopeo not found (apt-get install skopeo)", EXIT_UNAVAILABLE)
    return binary


def start_registry(workdir: Path, binary: str) -> LocalRegistry:
    """A started no-auth registry in ``workdir``; exit 2 when it cannot start."""
    registry = LocalRegistry(workdir, binary=binary)
    try:
        registry.start()
    except RuntimeError as exc:
        first_line = str(exc).splitlines()[0]
        raise BenchmarkError(
            f"cannot start docker-registry: {first_line}", EXIT_UNAVAILABLE
        ) from None
    return registry
