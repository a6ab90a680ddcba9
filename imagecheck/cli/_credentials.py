"""``--username`` with ``--password-stdin`` or ``IMAGECHECK_PASSWORD``: the credentials a
command line is given, read once, after the references are known to be valid."""

from __future__ import annotations

import os
import sys

from imagecheck.authn import Credentials
from imagecheck.cli._settings import CheckSettings
from imagecheck.errors import UsageError

# --password-stdin: a password or token (a JWT is a few KiB) on one line.
MAX_PASSWORD = 64 * 1024


def read_credentials(settings: CheckSettings) -> Credentials | None:
    """``--username`` with ``--password-stdin`` or ``IMAGECHECK_PASSWORD``, if given."""
    username = settings.username
    password = os.environ.get("IMAGECHECK_PASSWORD")
    if settings.password_stdin:
        if not username:
            raise UsageError("--password-stdin needs --username (or IMAGECHECK_USERNAME)")
        password = _password_from_stdin()
    if not username:
        return None
    if not password:
        raise UsageError("--username needs a password: --password-stdin or IMAGECHECK_PASSWORD")
    # A password with a newline (from IMAGECHECK_PASSWORD) is a CredentialsError naming it.
    return Credentials(username=username, password=password, source="--username")


def _password_from_stdin() -> str:
    line = sys.stdin.readline(MAX_PASSWORD + 1)
    if len(line) > MAX_PASSWORD:
        raise UsageError(
            f"--password-stdin: the password is longer than {MAX_PASSWORD // 1024} KiB"
        )
    password = line.rstrip("\r\n")
    if not password:
        raise UsageError("--password-stdin: nothing was read from standard input")
    return password
