"""Where a webhook is served (``serve``'s ``/validate``, ``gate``'s ``/mutate``): the address,
the TLS pair the API server needs, and plain HTTP for tests."""

from __future__ import annotations

from pathlib import Path

import click

from imagecheck.cli._options import Decorator, stacked
from imagecheck.errors import UsageError


def listen_options(listen_help: str, insecure_help: str) -> Decorator:
    """``--listen``, ``--tls-cert``, ``--tls-key``, ``--insecure-http``."""
    return stacked(
        click.option("--listen", default="0.0.0.0:8443", show_default=True,
                     metavar="HOST:PORT", help=listen_help),
        click.option("--tls-cert", type=click.Path(dir_okay=False, path_type=Path),
                     help="PEM certificate (chain) for --listen; reloaded when the file "
                     "changes."),
        click.option("--tls-key", type=click.Path(dir_okay=False, path_type=Path),
                     help="PEM private key; reloaded with the certificate."),
        click.option("--insecure-http", is_flag=True, help=insecure_help),
    )  # fmt: skip


def tls_pair(
    command: str, tls_cert: Path | None, tls_key: Path | None, insecure_http: bool
) -> tuple[Path, Path] | None:
    """The certificate and key, both or neither (None: plain HTTP, asked for)."""
    if (tls_cert is None) != (tls_key is None):
        raise UsageError("--tls-cert and --tls-key go together")
    if tls_cert is None or tls_key is None:
        if not insecure_http:
            raise UsageError(
                f"{command} needs --tls-cert and --tls-key (or --insecure-http for tests)"
            )
        return None
    return tls_cert, tls_key
