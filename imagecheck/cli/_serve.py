"""``imagecheck serve``: the admission webhook (the ``webhook`` extra, imported on use)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path

import click

from imagecheck.cli._credentials import read_credentials
from imagecheck.cli._listen import listen_options, tls_pair
from imagecheck.cli._logs import setup_json_logging
from imagecheck.cli._options import MAX_TTL, registry_options
from imagecheck.cli._settings import CheckSettings, require_credentials_host, with_settings
from imagecheck.cli._types import Count, Seconds, listen_address
from imagecheck.errors import UsageError
from imagecheck.webhook import _limits as limits

SERVE_HELP = """\b
Endpoints: POST /validate (AdmissionReview admission.k8s.io/v1), GET /healthz, /readyz,
/metrics (Prometheus). Logs are JSON lines on stderr.
Exit codes: 0 stopped by SIGTERM/SIGINT; 2 usage error (bad option, certificate, config)."""


@click.command(epilog=SERVE_HELP)
@listen_options(
    "Address to serve on.",
    "Serve plain HTTP without --tls-cert/--tls-key (tests only: the API "
    "server only calls webhooks over HTTPS).",
)
@click.option(
    "--mode",
    type=click.Choice(["deny", "warn"]),
    default="deny",
    show_default=True,
    help="deny: refuse objects with missing images; warn: allow them with warnings.",
)
@click.option(
    "--on-error",
    type=click.Choice(["fail", "pass"]),
    default="pass",
    show_default=True,
    help="What a denial or a failing registry does: pass (allow, with a warning) or "
    "fail (refuse). Missing images are always refused in deny mode.",
)
@click.option(
    "--review-deadline",
    type=Seconds(0.5, 30),
    default=8.0,
    show_default=True,
    help="Seconds to answer a review; keep it below the webhook's timeoutSeconds.",
)
@click.option(
    "--cache-ttl",
    type=Seconds(0, MAX_TTL),
    default="60s",
    show_default=True,
    metavar="DURATION",
    help="How long a tag found stays cached (found digests stay for good).",
)
@click.option(
    "--missing-ttl",
    type=Seconds(0, MAX_TTL),
    default="10s",
    show_default=True,
    metavar="DURATION",
    help="How long a missing image stays cached.",
)
@click.option(
    "--use-pod-pull-secrets",
    is_flag=True,
    help="Also offer the pull secrets a reviewed pod names, read through the Kubernetes API "
    "(RBAC: get on those secrets in the pods' namespaces).",
)
@click.option(
    "--read-timeout",
    type=Seconds(0.1, 3600),
    default=f"{limits.DEFAULT_READ_TIMEOUT:g}s",
    show_default=True,
    help="How long a client may take over its TLS handshake, a request's headers, and its "
    "body; a connection that is slower is closed.",
)
@click.option(
    "--max-connections",
    type=Count(1, 100_000),
    default=limits.DEFAULT_MAX_CONNECTIONS,
    show_default=True,
    help="Client connections open at once. One more closes the oldest idle connection "
    "(one that never sent a request first). Measured: an idle TLS connection costs about "
    "0.06 MiB, one whose client never reads its answers about 1.2 MiB.",
)
@click.option(
    "--max-images-per-review",
    type=Count(1, 10_000),
    default=limits.DEFAULT_MAX_IMAGES,
    show_default=True,
    help="Distinct images checked per review; the rest are refused as not checked "
    "(whatever --on-error says).",
)
@click.option(
    "--cert-reload-interval",
    type=Seconds(0, MAX_TTL),
    default="10s",
    show_default=True,
    metavar="DURATION",
    help="How often to look for a rotated --tls-cert/--tls-key.",
)
@registry_options
@with_settings
def serve(
    listen: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    insecure_http: bool,
    mode: str,
    review_deadline: float,
    cache_ttl: float,
    missing_ttl: float,
    cert_reload_interval: float,
    use_pod_pull_secrets: bool,
    read_timeout: float,
    max_connections: int,
    max_images_per_review: int,
    settings: CheckSettings,
) -> None:
    """Run the validating admission webhook: refuse workloads whose images do not exist.

    Needs the webhook extra: pip install 'imagecheck[webhook]'.
    """
    try:  # the optional extra: imported only here
        from imagecheck.webhook import _server as server  # noqa: PLC0415
        from imagecheck.webhook import _telemetry as telemetry  # noqa: PLC0415
    except ImportError as exc:
        raise UsageError(
            f"serve needs the webhook extra: pip install 'imagecheck[webhook]' ({exc.name})"
        ) from None
    require_credentials_host(settings, "serve")
    host, port = listen_address(listen)
    tls_pair("serve", tls_cert, tls_key, insecure_http)
    client_options = settings.client_options()
    serve_settings = server.ServeSettings(
        host=host,
        port=port,
        tls_cert=tls_cert,
        tls_key=tls_key,
        warn_only=mode == "warn",
        errors_pass=settings.on_error == "pass",
        review_deadline=review_deadline,
        tag_ttl=cache_ttl,
        missing_ttl=missing_ttl,
        reload_interval=max(0.1, cert_reload_interval),
        pod_pull_secrets=use_pod_pull_secrets,
        read_timeout=read_timeout,
        max_connections=max_connections,
        max_images=max_images_per_review,
    )
    setup_json_logging(telemetry.JsonFormatter(), settings.verbose)
    telemetry.lean_records()
    keychain = settings.keychain(read_credentials(settings))
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(server.serve(serve_settings, client_options, keychain))
    except (OSError, ssl.SSLError) as exc:  # the address or the certificate: the OS's words
        raise UsageError(f"cannot serve on {listen}: {exc}") from None


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (the webhook extra installs it), else
    asyncio's own. Under 50 concurrent reviews, the loop itself (epoll, callbacks, TLS
    records through ``ssl.MemoryBIO``) was most of the server's CPU per review; libuv's loop
    does that work in C."""
    try:
        import uvloop  # noqa: PLC0415 - only serve runs it
    except ImportError:
        return None
    return uvloop.new_event_loop
