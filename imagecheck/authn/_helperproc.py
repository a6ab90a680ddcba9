"""One credential helper process: ``docker-credential-<name> get``, run synchronously
(:func:`run_helper`) or on the event loop (:func:`ask_helper`), its output capped and its
answer read. The protocol is described in :mod:`imagecheck.authn._helpers`, which asks each helper
once per server URL.

The bounded runners themselves (:func:`run_capped`, :func:`run_bounded`) know nothing of the
helper protocol: the kubelet's credential provider plugins (``_credproviders.py``) run through
them too, so every credential program gets the same time limit, output cap and reaping.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field

from imagecheck._capped import MAX_ERROR_BODY, MAX_HELPER_OUTPUT, parse_json
from imagecheck._text import printable
from imagecheck.errors import CredentialsError

HELPER_PREFIX = "docker-credential-"
DEFAULT_HELPER_TIMEOUT = 10.0
# A helper's answer is a small JSON object; its error output a line or two.
_NOT_FOUND = "credentials not found"
# Helpers' error text is shown to help a person; never more than this of it.
_MAX_SHOWN = 200


@dataclass(frozen=True, slots=True)
class HelperAnswer:
    """What a helper answered. ``username == "<token>"`` means ``secret`` is an identity token."""

    username: str
    secret: str = field(repr=False)
    helper: str = ""

    @property
    def is_identity_token(self) -> bool:
        return self.username == "<token>"


def helper_executable(name: str) -> str:
    return f"{HELPER_PREFIX}{name}"


def run_helper(
    name: str, server_url: str, *, timeout: float = DEFAULT_HELPER_TIMEOUT
) -> HelperAnswer | None:
    """Ask helper ``name`` for ``server_url``'s credentials; ``None`` when it has none.

    Raises :class:`CredentialsError` naming the helper when it is missing, fails, hangs past
    ``timeout`` or prints something that is not its JSON answer. Its standard output is never
    echoed (it may hold the secret); only its exit status and error output, briefly.
    """
    exe = helper_executable(name)
    path = shutil.which(exe)
    if path is None:
        raise CredentialsError(f"credential helper {exe} is not on PATH")
    try:
        proc = run_capped([path, "get"], server_url, timeout, f"credential helper {exe}")
    except subprocess.TimeoutExpired:
        raise CredentialsError(
            f"credential helper {exe} did not answer within {timeout:g}s"
        ) from None
    except OSError as exc:
        raise CredentialsError(f"credential helper {exe} could not run: {exc.strerror}") from None
    return _answer(exe, proc.returncode, proc.stdout, proc.stderr)


# How long a killed helper may take to be reaped (it exits at once unless the machine is
# starved of CPU).
_REAP_KILLED = 10.0


async def ask_helper(name: str, server_url: str, *, timeout: float) -> HelperAnswer | None:
    """:func:`run_helper` for the event loop (:func:`run_bounded`). Raises ``TimeoutError``
    at ``timeout``; the caller says what that means."""
    exe = helper_executable(name)
    path = shutil.which(exe)
    if path is None:
        raise CredentialsError(f"credential helper {exe} is not on PATH")
    code, stdout, stderr = await run_bounded(
        [path, "get"], server_url.encode(), timeout=timeout, what=f"credential helper {exe}"
    )
    return _answer(exe, code, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"))


async def run_bounded(
    argv: list[str],
    stdin: bytes,
    *,
    timeout: float,
    what: str,
    env: dict[str, str] | None = None,
) -> tuple[int, bytes, bytes]:
    """Run ``argv`` on the event loop with ``stdin`` as its input: ``(exit status, stdout,
    stderr)``. It runs as an asyncio subprocess in a session of its own, its output is capped
    at ``MAX_HELPER_OUTPUT`` (a :class:`CredentialsError` naming ``what``), and when
    ``timeout`` passes or the caller is cancelled (the deadline), it and every process it
    started are killed and reaped. Raises ``TimeoutError`` at ``timeout``."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group: killed with what it starts
        )
    except OSError as exc:
        raise CredentialsError(f"{what} could not run: {exc.strerror}") from None
    reads = [
        asyncio.ensure_future(_read_capped(proc.stdout, what)),
        asyncio.ensure_future(_read_capped(proc.stderr, what)),
    ]
    tasks = [*reads, asyncio.ensure_future(_send(proc.stdin, stdin))]
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(*tasks)
            code = await proc.wait()
        stdout, stderr = (read.result() for read in reads)
    except BaseException:  # timed out, cancelled at the deadline, or printed too much
        for task in tasks:  # gather leaves the others running when one fails
            task.cancel()
        await _kill(proc)
        raise
    return code, stdout, stderr


async def _send(stdin: asyncio.StreamWriter | None, data: bytes) -> None:
    assert stdin is not None
    with contextlib.suppress(ConnectionError):  # a helper may exit without reading it
        stdin.write(data)
        await stdin.drain()
        # Closed, not waited for: a cancellation in wait_closed() (the deadline) cancels the
        # future asyncio sets when the pipe closes, which then logs "Exception in callback
        # ... InvalidStateError" on stderr. The exit, awaited next, comes after every pipe.
        stdin.close()


async def _read_capped(stream: asyncio.StreamReader | None, what: str) -> bytes:
    assert stream is not None
    data = await stream.read(MAX_HELPER_OUTPUT + 1)
    chunks = [data]
    size = len(data)
    while data and size <= MAX_HELPER_OUTPUT:
        data = await stream.read(MAX_HELPER_OUTPUT + 1 - size)
        chunks.append(data)
        size += len(data)
    if size > MAX_HELPER_OUTPUT:
        raise CredentialsError(f"{what} printed more than {MAX_HELPER_OUTPUT // 1024} KiB")
    return b"".join(chunks)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """Kill the helper's process group (the helper, and what it started that is still
    there, even if the helper itself has exited) and reap the helper."""
    killed = True
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        # Only then the helper alone: Popen.kill() polls first, which would reap the helper
        # behind asyncio's child watcher ("Unknown child process pid N" on stderr).
        try:
            proc.kill()
        except ProcessLookupError:
            pass  # already gone: reaped below at once
        except PermissionError:
            killed = False
    # A SIGKILLed helper always exits: wait for it on this loop, even on a loaded machine
    # where that takes a while, or the child watcher reports it after the loop has closed
    # ("Loop ... that handles pid N is closed" on stderr). One we could not kill gets 1 s.
    # Close its pipes first: asyncio reports the exit only once every pipe has closed, and a
    # pipe whose reader was cancelled with its buffer full is never read to its end, so the
    # wait below lasted its whole bound (10 s) about one time in two. Only the pipes: closing
    # the whole transport now would poll the process, which would reap it behind the child
    # watcher's back ("Unknown child process pid N" on stderr).
    transport = getattr(proc, "_transport", None)
    if isinstance(transport, asyncio.SubprocessTransport):
        for fd in (0, 1, 2):
            pipe = transport.get_pipe_transport(fd)
            if pipe is not None:
                pipe.close()
    # A cancellation that lands meanwhile (the run's deadline cancels the check that is
    # killing its helper) waits for the reaping too, within the same bound, then goes on.
    await _reap_uncancelled(proc, _REAP_KILLED if killed else 1.0)
    # Release the transport now, on this loop, not at garbage collection after the loop may
    # have closed.
    if isinstance(transport, asyncio.SubprocessTransport):
        transport.close()


async def _reap_uncancelled(proc: asyncio.subprocess.Process, limit: float) -> None:
    """Wait up to ``limit`` seconds for ``proc``'s exit to be reported on this loop, even
    through a cancellation, which is raised again once the wait is over.

    Reported, not merely waited for: until asyncio's child watcher has handed the exit to
    this loop, the loop must not close, or the watcher prints "Loop ... that handles pid N is
    closed" on stderr. The wait is a task of its own, and ``asyncio.run`` cancels every task
    when its main coroutine ends (the run's deadline, with the helper still being killed):
    a wait cancelled from outside is started again."""
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    cancelled = False
    waiter: asyncio.Future[int] | None = None
    while proc.returncode is None:
        left = end - loop.time()
        if left <= 0:
            break
        if waiter is None or waiter.done():
            waiter = asyncio.ensure_future(proc.wait())
        try:
            await asyncio.wait({waiter}, timeout=left)
        except asyncio.CancelledError:
            cancelled = True
    if waiter is not None and not waiter.done():
        waiter.cancel()
    if cancelled:
        raise asyncio.CancelledError


def _answer(exe: str, returncode: int, stdout: str, stderr: str) -> HelperAnswer | None:
    """What a helper that ran to its end said: credentials, ``None`` (not found), or a
    :class:`CredentialsError` naming it."""
    if returncode != 0:
        if _NOT_FOUND in (stdout + stderr).lower():
            return None
        # Its exit status and the first line of stderr; never stdout, which may hold the
        # Secret (a helper that prints its answer and then fails).
        said = stderr.strip().splitlines()
        first = printable(said[0], _MAX_SHOWN) if said else ""
        raise CredentialsError(
            f"credential helper {exe} failed (exit {returncode})" + (f": {first}" if first else "")
        )
    return _parse_answer(stdout, exe)


def run_capped(
    argv: list[str], stdin: str, timeout: float, what: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout)``
    that never holds more than a helper's answer can be: stdout over ``MAX_HELPER_OUTPUT``
    bytes kills the helper (a CredentialsError); of stderr only the start is kept (read on,
    so the helper does not block on a full pipe). Text is UTF-8, invalid bytes replaced, as
    Go's JSON decoder in docker/cli reads it. Raises ``subprocess.TimeoutExpired`` and
    ``OSError`` as ``subprocess.run`` does. ``what`` names the program in errors."""
    deadline = time.monotonic() + timeout
    proc = subprocess.Popen(  # noqa: S603 - the program is named by the user's config
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        out, err = _collect(proc, stdin.encode(), deadline, what)
        proc.wait(max(0.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return subprocess.CompletedProcess(
        argv,
        proc.returncode,
        out.decode("utf-8", errors="replace"),
        err.decode("utf-8", errors="replace"),
    )


def _collect(
    proc: subprocess.Popen[bytes], stdin: bytes, deadline: float, what: str
) -> tuple[bytes, bytes]:
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        proc.stdin.write(stdin)  # a server URL or a request: far less than a pipe holds
        proc.stdin.close()
    except BrokenPipeError:
        pass  # the helper did not read it; its answer will say so
    out, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ, out)
        selector.register(proc.stderr, selectors.EVENT_READ, err)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(proc.args, 0)
            for key, _ in selector.select(remaining):
                data = os.read(key.fd, 65536)
                if not data:
                    selector.unregister(key.fileobj)
                elif key.data is out:
                    out += data
                    if len(out) > MAX_HELPER_OUTPUT:
                        raise CredentialsError(
                            f"{what} printed more than {MAX_HELPER_OUTPUT // 1024} KiB"
                        )
                else:
                    err += data[: max(0, MAX_ERROR_BODY - len(err))]
    return bytes(out), bytes(err)


def _parse_answer(stdout: str, exe: str) -> HelperAnswer:
    try:
        data = parse_json(stdout, "answer", error=CredentialsError)
    except CredentialsError:
        # Never its text, which may hold the secret; nor where it broke.
        raise CredentialsError(
            f"credential helper {exe} printed something that is not JSON"
        ) from None
    if not isinstance(data, dict):
        raise CredentialsError(f"credential helper {exe} printed JSON that is not an object")
    username, secret = data.get("Username", ""), data.get("Secret", "")
    if not isinstance(username, str) or not isinstance(secret, str) or not secret:
        raise CredentialsError(f"credential helper {exe} answered without Username/Secret strings")
    return HelperAnswer(username, secret, exe)
