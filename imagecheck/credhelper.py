"""Docker credential helpers: ``docker-credential-<name> get``.

The protocol (docker/docker-credential-helpers): the server URL goes to the helper's stdin;
it prints ``{"ServerURL": ..., "Username": ..., "Secret": ...}``, or exits non-zero saying
``credentials not found in native keychain`` when it has nothing for that server. A
``Username`` of ``<token>`` means the secret is an identity (refresh) token, as
``docker-credential-ecr-login``, ``-gcr`` and ``-acr-env`` may answer.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field

from imagecheck.bounded import printable
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
        proc = subprocess.run(  # noqa: S603 - the helper is named by the user's config
            [path, "get"],
            input=server_url,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
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


def _parse_answer(stdout: str, exe: str) -> HelperAnswer:
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError:
        raise CredentialsError(
            f"credential helper {exe} printed something that is not JSON"
        ) from None
    if not isinstance(data, dict):
        raise CredentialsError(f"credential helper {exe} printed JSON that is not an object")
    username, secret = data.get("Username", ""), data.get("Secret", "")
    if not isinstance(username, str) or not isinstance(secret, str) or not secret:
        raise CredentialsError(f"credential helper {exe} answered without Username/Secret strings")
    return HelperAnswer(username, secret, exe)
