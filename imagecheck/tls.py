"""TLS trust for registry connections, and which hosts may go without it. Pure setup, no I/O
beyond reading CA files."""

from __future__ import annotations

import ipaddress
import os
import re
import ssl
from collections.abc import Sequence
from pathlib import Path

import certifi

from imagecheck.errors import UsageError

_HASHED_CERT_RE = re.compile(r"^[0-9a-f]{8}\.[0-9]+$")


def is_loopback(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 and ::1: Docker treats them as insecure registries."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def make_ssl_context(ca_files: Sequence[Path] = ()) -> ssl.SSLContext:
    """A verifying TLS context: ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set, else the system
    store, else certifi (which httpx already depends on); plus each ``--ca-file``.

    The system store is used through its hashed directory when there is one: OpenSSL then
    looks a CA up when a handshake needs it, instead of parsing the whole bundle (~25 ms, a
    large share of a check's start-up) before the first request.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # hostname check and CERT_REQUIRED on
    env_file = os.environ.get("SSL_CERT_FILE") or None
    env_dir = os.environ.get("SSL_CERT_DIR") or None
    paths = ssl.get_default_verify_paths()
    try:
        if env_file or env_dir:
            ctx.load_verify_locations(cafile=env_file, capath=env_dir)
        elif paths.capath and _has_hashed_certs(paths.capath):
            ctx.load_verify_locations(capath=paths.capath)
        elif paths.cafile and os.path.isfile(paths.cafile):
            ctx.load_verify_locations(cafile=paths.cafile)
        else:  # a minimal image without ca-certificates
            ctx.load_verify_locations(cafile=certifi.where())
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(
            f"cannot load CA certificates from SSL_CERT_FILE/SSL_CERT_DIR: {exc}"
        ) from None
    for path in ca_files:
        try:
            ctx.load_verify_locations(cafile=str(path))
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"cannot load CA file {path}: {exc}") from None
    return ctx


def _has_hashed_certs(directory: str) -> bool:
    """Whether ``directory`` holds OpenSSL ``<hash>.<n>`` links (made by c_rehash)."""
    try:
        with os.scandir(directory) as entries:
            return any(_HASHED_CERT_RE.match(entry.name) for entry in entries)
    except OSError:
        return False


def insecure_ssl_context() -> ssl.SSLContext:
    """For ``--insecure-registry`` hosts only: TLS without verification, as Docker does."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx
