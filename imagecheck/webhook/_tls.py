"""The webhook's certificate: reloaded into the live TLS context when cert-manager rotates it."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from pathlib import Path

log = logging.getLogger("imagecheck.webhook")


class CertReloader:
    """Reloads the key pair into the live context when either file changes (cert-manager
    writes new files into the mounted secret; kubelet swaps them atomically).

    OpenSSL drops the old key before it finds that a new certificate does not match it, so a
    pair is first tried on a scratch context, and only a pair that loads goes live. Should the
    files change again in between and the live load fail, the last good pair (kept in
    memory) is put back: the server never ends up without a usable certificate.
    """

    def __init__(self, ctx: ssl.SSLContext, cert: Path, key: Path) -> None:
        self.ctx, self.cert, self.key = ctx, cert, key
        self._stamp = self._mtimes()
        self._good = (cert.read_bytes(), key.read_bytes())
        ctx.load_cert_chain(cert, key)

    def _mtimes(self) -> tuple[float, float]:
        return (self.cert.stat().st_mtime, self.key.stat().st_mtime)

    def reload_if_changed(self) -> bool:
        try:
            stamp = self._mtimes()
            if stamp == self._stamp:
                return False
            pair = (self.cert.read_bytes(), self.key.read_bytes())
            _load_pair(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), pair)
        except (OSError, ssl.SSLError) as exc:
            log.error("certificate reload failed; keeping the old one", extra={"error": str(exc)})
            return False
        try:
            _load_pair(self.ctx, pair)
        except (OSError, ssl.SSLError) as exc:  # pragma: no cover - needs a racing writer
            _load_pair(self.ctx, self._good)
            log.error("certificate reload failed; restored the old one", extra={"error": str(exc)})
            return False
        self._stamp, self._good = stamp, pair
        log.info("certificate reloaded", extra={"cert": str(self.cert)})
        return True

    async def watch(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.reload_if_changed()


def _load_pair(ctx: ssl.SSLContext, pair: tuple[bytes, bytes]) -> None:
    """Load a certificate and key given as bytes, through memory files: nothing is written
    to disk (the root filesystem is read-only) and both come from one consistent read."""
    fds = [os.memfd_create("imagecheck-tls", os.MFD_CLOEXEC) for _ in pair]
    try:
        for fd, data in zip(fds, pair, strict=True):
            os.write(fd, data)
        ctx.load_cert_chain(f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}")
    finally:
        for fd in fds:
            os.close(fd)
