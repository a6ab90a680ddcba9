"""The node's own registry configuration: containerd is given a ``hosts.toml`` tree as its
``config_path`` (``ctr images pull --hosts-dir``), imagecheck the same directory
(``--hosts-dir``), and they must agree, scenario by scenario; imagecheck's answer must name
the host that answered.

The upstream is the plain registry (it lacks ``mirror/only:1``); the mirror is the mirror
registry (it lacks ``sample/app:docker``) behind a fault proxy, so that it can be reached over
TLS, under a path prefix, or only with a header. skopeo reads no hosts.toml: it asks the
upstream, and its column says what the upstream alone answers.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from tests.integration.differential.oracle import Access, Verdict
from tests.integration.differential.scenarios import Case, Prepare, Scenario
from tests.integration.differential.site import Site
from tests.support.faultproxy import FaultProxy, Forward, Handle, Request, Respond
from tests.support.net import free_port

FOUND, MISSING, ERROR = Verdict.FOUND, Verdict.MISSING, Verdict.ERROR
GROUP = "hosts.toml"
MIRROR_KEY = ("X-Mirror-Key", "k-7f3a")
PREFIX = "/mirror-root"
_ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)


@dataclass(frozen=True)
class Mirror:
    """How the mirror is reached: over TLS, under :data:`PREFIX` only, only with
    :data:`MIRROR_KEY`."""

    tls: bool = False
    prefix: bool = False
    header: bool = False


def _mirror_proxy_rules(proxy: FaultProxy, mirror: Mirror) -> None:
    if mirror.prefix:
        # Only the prefixed API root answers: a client asking /v2/ gets nothing.
        proxy.on(None, r"^/v2/", Respond(404))
    if mirror.header:
        name, value = MIRROR_KEY

        def decide(request: Request) -> Forward | Respond:
            return Forward() if request.header(name) == value else Respond(403)

        proxy.on(None, "", Handle(decide))


def hosts(
    name: str,
    toml: str,
    *,
    answered_by: str = "",
    mirror: Mirror | None = None,
    upstream_down: bool = False,
    directory: str = "{registry}",
) -> Prepare:
    """``name`` (``{digest}`` stands for mirror/only:1's digest) on the upstream registry,
    with ``toml`` as its hosts.toml in ``directory``. In both, ``{registry}`` is the
    upstream's ``host:port`` (or a closed port when ``upstream_down``), ``{mirror}`` the
    mirror's, ``{ca}`` the test CA's file. ``answered_by``: ``"mirror"`` or ``"upstream"``,
    the host imagecheck must name."""

    @contextmanager
    def prepare(site: Site) -> Iterator[Case]:
        reached = mirror or Mirror()
        context = site.tls.server_context() if reached.tls else None
        rewrite = (PREFIX + "/", "/v2/") if reached.prefix else None
        with FaultProxy(site.mirror.url, ssl_context=context, rewrite=rewrite) as proxy:
            _mirror_proxy_rules(proxy, reached)
            registry = f"127.0.0.1:{free_port()}" if upstream_down else site.plain.host
            values = {
                "registry": registry,
                "mirror": proxy.host,
                "ca": str(site.tls.ca_file),
                "digest": _digest(site.mirror.url, "mirror/only", "1"),
            }
            tree = Path(tempfile.mkdtemp(prefix=f"certs-{uuid.uuid4().hex[:6]}-", dir=site.workdir))
            host_dir = tree / directory.format(**values)
            host_dir.mkdir()
            (host_dir / "hosts.toml").write_text(toml.format(**values), encoding="utf-8")
            mirror_url = f"{'https' if reached.tls else 'http'}://{proxy.host}"
            named = {"mirror": mirror_url, "upstream": f"http://{registry}", "": ""}[answered_by]
            access = Access(registry=registry, plain_http=True, hosts_dir=tree)
            answered = f"answered by {named}" if named else ""
            yield Case(f"{registry}/{name.format(**values)}", access, answered_by=answered)

    return prepare


def _digest(base_url: str, repo: str, tag: str) -> str:
    with httpx.Client(timeout=10.0, trust_env=False) as client:
        answer = client.head(f"{base_url}/v2/{repo}/manifests/{tag}", headers={"Accept": _ACCEPT})
        answer.raise_for_status()
        return answer.headers["Docker-Content-Digest"]


SERVER = 'server = "http://{registry}"\n\n'
MIRROR = '[host."http://{mirror}"]\n  capabilities = ["pull", "resolve"]\n'
# Braces doubled: the text goes through str.format with the scenario's values.
HEADER = f'  header = {{{{ "{MIRROR_KEY[0]}" = "{MIRROR_KEY[1]}" }}}}\n'
PULL_ONLY = '[host."http://{mirror}"]\n  capabilities = ["pull"]\n'

_HOSTS: tuple[Scenario, ...] = (
    Scenario(
        "hosts-mirror-has-it",
        GROUP,
        "mirror host holds it, upstream does not",
        FOUND,
        hosts("mirror/only:1", SERVER + MIRROR, answered_by="mirror"),
        skopeo=MISSING,
    ),
    Scenario(
        "hosts-mirror-lacks-it",
        GROUP,
        "mirror host lacks it, the server holds it",
        FOUND,
        hosts("sample/app:docker", SERVER + MIRROR, answered_by="upstream"),
    ),
    Scenario(
        "hosts-neither",
        GROUP,
        "neither the mirror host nor the server holds it",
        MISSING,
        hosts("sample/app:nope", SERVER + MIRROR),
    ),
    Scenario(
        "hosts-upstream-down",
        GROUP,
        "mirror-only: the server is a closed port, the mirror holds it",
        FOUND,
        hosts("sample/app:1.0.0", SERVER + MIRROR, answered_by="mirror", upstream_down=True),
        skopeo=ERROR,
    ),
    Scenario(
        "hosts-upstream-down-missing",
        GROUP,
        "mirror-only: the server is a closed port, the mirror lacks it",
        ERROR,
        hosts("sample/app:docker", SERVER + MIRROR, answered_by="upstream", upstream_down=True),
    ),
    Scenario(
        "hosts-server-blocked",
        GROUP,
        'server with capabilities = ["push"]: never asked to pull; the mirror lacks it',
        MISSING,
        hosts("sample/app:docker", SERVER + '  capabilities = ["push"]\n\n' + MIRROR),
        skopeo=FOUND,
    ),
    Scenario(
        "hosts-pull-only-tag",
        GROUP,
        'mirror with capabilities = ["pull"], by tag: not asked',
        MISSING,
        hosts("mirror/only:1", SERVER + PULL_ONLY),
    ),
    Scenario(
        "hosts-pull-only-digest",
        GROUP,
        'mirror with capabilities = ["pull"], by digest: asked',
        FOUND,
        hosts("mirror/only@{digest}", SERVER + PULL_ONLY, answered_by="mirror"),
        skopeo=MISSING,
    ),
    Scenario(
        "hosts-override-path",
        GROUP,
        "mirror serving the API under a path prefix, override_path = true",
        FOUND,
        hosts(
            "mirror/only:1",
            SERVER + '[host."http://{mirror}' + PREFIX + '"]\n  override_path = true\n',
            answered_by="mirror",
            mirror=Mirror(prefix=True),
        ),
        skopeo=MISSING,
    ),
    Scenario(
        "hosts-tls-ca",
        GROUP,
        "mirror over TLS, its CA given with ca",
        FOUND,
        hosts(
            "mirror/only:1",
            SERVER + '[host."https://{mirror}"]\n  ca = "{ca}"\n',
            answered_by="mirror",
            mirror=Mirror(tls=True),
        ),
        skopeo=MISSING,
    ),
    Scenario(
        "hosts-tls-skip-verify",
        GROUP,
        "mirror over TLS, skip_verify = true",
        FOUND,
        hosts(
            "mirror/only:1",
            SERVER + '[host."https://{mirror}"]\n  skip_verify = true\n',
            answered_by="mirror",
            mirror=Mirror(tls=True),
        ),
        skopeo=MISSING,
    ),
    Scenario(
        "hosts-tls-untrusted",
        GROUP,
        "mirror over TLS, no CA given: its failure is the answer",
        ERROR,
        hosts(
            "mirror/only:1",
            SERVER + '[host."https://{mirror}"]\n',
            answered_by="mirror",
            mirror=Mirror(tls=True),
        ),
        skopeo=MISSING,
    ),
    Scenario(
        "hosts-header",
        GROUP,
        "mirror that answers only with a header, given with header",
        FOUND,
        hosts(
            "mirror/only:1",
            SERVER + MIRROR + HEADER,
            answered_by="mirror",
            mirror=Mirror(header=True),
        ),
        skopeo=MISSING,
    ),
    Scenario(
        "hosts-no-host-table",
        GROUP,
        "server only, no [host] table: containerd 1.6 ignores the file",
        MISSING,
        hosts("mirror/only:1", 'server = "http://{mirror}"\n'),
    ),
    Scenario(
        "hosts-default-dir",
        GROUP,
        "_default directory: its mirror serves every registry",
        FOUND,
        hosts("mirror/only:1", MIRROR, answered_by="mirror", directory="_default"),
        skopeo=MISSING,
    ),
)

# JSON output: a found result's message (which says the host that answered) is in it.
HOSTS = tuple(replace(scenario, options=("--output", "json")) for scenario in _HOSTS)
