"""Docker credential helpers: ``docker-credential-<name> get``.

The protocol (docker/docker-credential-helpers): the server URL goes to the helper's stdin;
it prints ``{"ServerURL": ..., "Username": ..., "Secret": ...}``, or exits non-zero saying
``credentials not found in native keychain`` when it has nothing for that server. A
``Username`` of ``<token>`` means the secret is an identity (refresh) token, as
``docker-credential-ecr-login``, ``-gcr`` and ``-acr-env`` may answer.
"""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import time
from dataclasses import dataclass, field

from imagecheck.bounded import MAX_ERROR_BODY, MAX_HELPER_OUTPUT, parse_json, printable
from imagecheck.errors import CredentialsError

HELPER_PREFIX = "docker-credential-"
DEFAULT_HELPER_TIMEOUT = 10.0
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
        proc = _run_capped([path, "get"], server_url, timeout, exe)
    except subprocess.TimeoutExpired:
        raise CredentialsError(
            f"credential helper {exe} did not answer within {timeout:g}s"
        ) from None
    except OSError as exc:
        raise CredentialsError(f"credential helper {exe} could not run: {exc.strerror}") from None
    if proc.returncode != 0:
        if _NOT_FOUND in (proc.stdout + proc.stderr).lower():
            return None
        # Its exit status and the first line of stderr; never stdout, which may hold the
        # Secret (a helper that prints its answer and then fails).
        said = proc.stderr.strip().splitlines()
        first = printable(said[0], _MAX_SHOWN) if said else ""
        raise CredentialsError(
            f"credential helper {exe} failed (exit {proc.returncode})"
            + (f": {first}" if first else "")
        )
    return _parse_answer(proc.stdout, exe)


def _run_capped(
    argv: list[str], stdin: str, timeout: float, exe: str
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout)``
    that never holds more than a helper's answer can be: stdout over ``MAX_HELPER_OUTPUT``
    bytes kills the helper (a CredentialsError); of stderr only the start is kept (read on,
    so the helper does not block on a full pipe). Text is UTF-8, invalid bytes replaced, as
    Go's JSON decoder in docker/cli reads it. Raises ``subprocess.TimeoutExpired`` and
    ``OSError`` as ``subprocess.run`` does."""
    deadline = time.monotonic() + timeout
    proc = subprocess.Popen(  # noqa: S603 - the helper is named by the user's config
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = _collect(proc, stdin.encode(), deadline, exe)
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
    proc: subprocess.Popen[bytes], stdin: bytes, deadline: float, exe: str
) -> tuple[bytes, bytes]:
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        proc.stdin.write(stdin)  # a server URL: far less than a pipe holds
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
                            f"credential helper {exe} printed more than {MAX_HELPER_OUTPUT} "
                            "bytes: that is not a credentials answer"
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
