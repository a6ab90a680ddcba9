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

from imagecheck._files import MAX_CA_FILE, read_regular_file
from imagecheck.errors import CertificateError, UsageError
from imagecheck.routes import HostTLS

_HASHED_CERT_RE = re.compile(r"^[0-9a-f]{8}\.[0-9]+$")


def is_loopback(host: str) -> bool:
    """Whether containerd lets ``host`` (no port, no brackets) fall back to plain HTTP: exactly
    ``localhost`` in lowercase, or a loopback address (127.0.0.0/8, ::1, and ::1's IPv4-mapped
    forms, as Go's ``net.IP.IsLoopback`` reads them).

    containerd's ``docker.IsLocalhost`` (remotes/docker/resolver.go, v1.6 and v1.7;
    core/remotes/docker/resolver.go in v2), which ``ConfigureHosts``
    (remotes/docker/config/hosts.go) and the CRI plugin's ``defaultScheme`` ask, compares
    ``host == "localhost"``: ``LocalHost:5000`` is not local there, so it gets HTTPS only.
    """
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


class Trust:
    """The CAs a client verifies with: the ``ca_files`` ones from the start, the system store
    from the first HTTPS request that needs it (``load``). A plain-HTTP local registry never
    pays for parsing the store, nor does the HTTPS probe of a loopback registry's ping."""

    def __init__(self, ca_files: Sequence[Path] = ()) -> None:
        self.context = verifying_context(ca_files)
        self._loaded = False

    def load(self) -> bool:
        """Add the system store; False when it was there already (nothing changed)."""
        if self._loaded:
            return False
        load_system_trust(self.context)
        self._loaded = True
        return True


def verifying_context(ca_files: Sequence[Path] = ()) -> ssl.SSLContext:
    """A verifying TLS context with only the ``ca_files`` CAs in it (cheap: a few certificates).
    ``load_system_trust`` adds the rest when a connection first needs it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # hostname check and CERT_REQUIRED on
    for path in ca_files:
        # Read through the one safe reader: a FIFO or /dev/zero as a CA file must not block
        # or fill memory; OpenSSL then parses the PEM text.
        data = read_regular_file(path, limit=MAX_CA_FILE, what="CA file", error=UsageError)
        try:
            ctx.load_verify_locations(cadata=data.decode("ascii"))
        except (UnicodeDecodeError, ValueError, ssl.SSLError) as exc:
            reason = "not PEM text" if isinstance(exc, UnicodeDecodeError) else exc
            raise UsageError(f"cannot load CA file {path}: {reason}") from None
    env_file = os.environ.get("SSL_CERT_FILE")
    if env_file and not os.path.exists(env_file):
        raise UsageError(f"SSL_CERT_FILE {env_file} does not exist")
    if env_file and not os.path.isfile(env_file):  # OpenSSL would block on a FIFO
        raise UsageError(f"SSL_CERT_FILE {env_file} is not a regular file")
    return ctx


def trusted_context(ca_files: Sequence[Path] = ()) -> ssl.SSLContext:
    """A verifying context with ``ca_files`` and the system store (or ``SSL_CERT_FILE``/
    ``SSL_CERT_DIR``) loaded at once: for an endpoint that is always HTTPS."""
    ctx = verifying_context(ca_files)
    load_system_trust(ctx)
    return ctx


def load_system_trust(ctx: ssl.SSLContext) -> None:
    """Add ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set, else the system store, else certifi
    (which httpx already depends on).

    The system store is used through its hashed directory when there is one: OpenSSL then
    looks a CA up when a handshake needs it, instead of parsing the whole bundle first (as a
    bundle file, which SSL_CERT_FILE names, must be, at a cost every start-up would pay).
    """
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


def _has_hashed_certs(directory: str) -> bool:
    """Whether ``directory`` holds OpenSSL ``<hash>.<n>`` links (made by c_rehash)."""
    try:
        with os.scandir(directory) as entries:
            return any(_HASHED_CERT_RE.match(entry.name) for entry in entries)
    except OSError:
        return False


def endpoint_context(tls: HostTLS, ca_files: Sequence[Path] = ()) -> ssl.SSLContext:
    """The context of an endpoint whose runtime configuration gives TLS settings, as
    containerd builds it (``remotes/docker/config/hosts.go``): no verification with
    ``skip_verify``, else the system store with the checker's and the endpoint's CAs; its
    client certificates either way. A file that cannot be used is a certificate error naming
    it (the configuration's reader has checked what it could)."""
    try:
        ctx = (
            insecure_ssl_context()
            if tls.skip_verify
            else verifying_context((*ca_files, *tls.ca_files))
        )
        if not tls.skip_verify:
            load_system_trust(ctx)
    except UsageError as exc:
        raise CertificateError(str(exc)) from None
    for cert, key in tls.client_pairs:
        try:
            ctx.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as exc:
            raise CertificateError(f"cannot load client certificate {cert}: {exc}") from None
    return ctx


def insecure_ssl_context() -> ssl.SSLContext:
    """For hosts named insecure only: TLS without verification, as Docker does."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx
