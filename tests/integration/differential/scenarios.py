"""The differential matrix: each scenario is a reference, the way every puller reaches its
registry, and the verdict the kubelet's pull gives (containerd's, measured: a scenario whose
containerd verdict is not ``kubelet`` fails, so the table cannot drift from the runtime).

``imagecheck`` is set only where imagecheck answers otherwise on purpose; ``difference``
then names the entry of README's "Where imagecheck and the kubelet differ" that explains it.
``skopeo`` is set where containers/image (CRI-O's puller) answers otherwise; that is recorded,
not a failure of imagecheck.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from tests.integration.differential.oracle import Access, Mirror, Verdict
from tests.integration.differential.site import LONG_REPOSITORY, LONG_TAG, Site
from tests.support.endpoint import RegistryEndpoint
from tests.support.faultproxy import (
    HTML_502_PAGE,
    Respond,
    StripHeaders,
)
from tests.support.net import free_port

FOUND, MISSING, DENIED, ERROR = Verdict.FOUND, Verdict.MISSING, Verdict.DENIED, Verdict.ERROR
MANIFESTS = r"^/v2/.+/manifests/"
ZERO_DIGEST = "sha256:" + "0" * 64


@dataclass(frozen=True)
class Case:
    reference: str
    access: Access
    # The host (``host:port``) imagecheck's answer must name, where a route has several.
    answered_by: str = ""


Prepare = Callable[[Site], AbstractContextManager[Case]]


@dataclass(frozen=True)
class Scenario:
    id: str
    group: str
    what: str
    kubelet: Verdict
    prepare: Prepare
    imagecheck: Verdict | None = None
    difference: str | None = None
    skopeo: Verdict | None = None
    # imagecheck's own options for this scenario (the pullers have none to match).
    options: tuple[str, ...] = ()

    @property
    def imagecheck_expected(self) -> Verdict:
        return self.imagecheck or self.kubelet

    @property
    def skopeo_expected(self) -> Verdict:
        return self.skopeo or self.kubelet


def _endpoint(site: Site, name: str) -> RegistryEndpoint:
    endpoint: RegistryEndpoint = getattr(site, name)
    return endpoint


def on(registry: str, name: str, *, user: str | None = None) -> Prepare:
    """``name`` (``repo:tag``, ``repo@digest``) on one of the site's registries."""

    @contextmanager
    def prepare(site: Site) -> Iterator[Case]:
        endpoint = _endpoint(site, registry)
        yield Case(endpoint.ref(name), site.access(endpoint, user=user))

    return prepare


def by_digest(
    registry: str,
    repo: str,
    sample: str,
    *,
    tag: str = "",
    child: int | None = None,
    user: str | None = None,
) -> Prepare:
    """``repo[:tag]@<digest of sample>`` (``child``: of that index's n-th platform image)."""

    @contextmanager
    def prepare(site: Site) -> Iterator[Case]:
        endpoint = _endpoint(site, registry)
        images = {**endpoint.images.manifests, **site.extra.manifests}
        manifest = images[sample]
        if child is not None:
            manifest = manifest.children[child]
        name = f"{repo}{':' + tag if tag else ''}@{manifest.digest}"
        yield Case(endpoint.ref(name), site.access(endpoint, user=user))

    return prepare


def digest_literal(registry: str, repo: str, digest: str, *, tag: str = "") -> Prepare:
    @contextmanager
    def prepare(site: Site) -> Iterator[Case]:
        endpoint = _endpoint(site, registry)
        yield Case(
            endpoint.ref(f"{repo}{':' + tag if tag else ''}@{digest}"), site.access(endpoint)
        )

    return prepare


def through_proxy(name: str, *rules: tuple[str | None, str, object, int | None]) -> Prepare:
    """``name`` on the plain registry, through a fault proxy with ``rules``
    (method, path regex, action, times)."""

    @contextmanager
    def prepare(site: Site) -> Iterator[Case]:
        with site.proxy(site.plain) as proxy:
            for method, path, action, times in rules:
                proxy.on(method, path, action, times=times)  # type: ignore[arg-type]
            yield Case(proxy.ref(name), Access(registry=proxy.host, plain_http=True))

    return prepare


def renamed_host(host: str, name: str) -> Prepare:
    """``name`` on the plain registry, named through ``host`` (same port)."""

    @contextmanager
    def prepare(site: Site) -> Iterator[Case]:
        port = site.plain.host.rsplit(":", 1)[1]
        registry = f"{host}:{port}"
        yield Case(f"{registry}/{name}", Access(registry=registry, plain_http=True))

    return prepare


def default_port(host: str, name: str) -> Prepare:
    """``host/name`` with no port: HTTPS on 443, where nothing listens on a test machine."""

    @contextmanager
    def prepare(site: Site) -> Iterator[Case]:
        yield Case(f"{host}/{name}", Access(registry=host))

    return prepare


def redirected(name: str) -> Prepare:
    """The manifest request is answered 307 with the same path on another host (the plain
    registry itself), as registries that serve content from a CDN or a second node do."""

    @contextmanager
    def prepare(site: Site) -> Iterator[Case]:
        with site.proxy(site.plain) as proxy:
            path = f"/v2/{name.split(':', maxsplit=1)[0]}/manifests/{name.split(':')[1]}"
            proxy.on(None, "^" + path + "$", Respond(307, {"Location": site.plain.url + path}))
            yield Case(proxy.ref(name), Access(registry=proxy.host, plain_http=True))

    return prepare


def mirrored(
    name: str, *, mirror_fault: Respond | None = None, upstream_down: bool = False
) -> Prepare:
    """``name`` on the plain registry with one mirror (the mirror registry, through a proxy
    that may fail); ``upstream_down`` names a registry where nothing listens."""

    @contextmanager
    def prepare(site: Site) -> Iterator[Case]:
        with site.proxy(site.mirror) as mirror:
            if mirror_fault is not None:
                mirror.on(None, MANIFESTS, mirror_fault)
            registry = site.plain.host
            if upstream_down:
                registry = f"127.0.0.1:{free_port()}"
            access = Access(registry=registry, plain_http=True, mirrors=(Mirror(mirror.url),))
            yield Case(f"{registry}/{name}", access)

    return prepare


def nothing_listening(name: str) -> Prepare:
    @contextmanager
    def prepare(site: Site) -> Iterator[Case]:
        registry = f"127.0.0.1:{free_port()}"
        yield Case(f"{registry}/{name}", Access(registry=registry, plain_http=True))

    return prepare


def untrusted_tls(name: str) -> Prepare:
    """The TLS registry with no CA given to anyone: the certificate cannot be verified."""

    @contextmanager
    def prepare(site: Site) -> Iterator[Case]:
        access = Access(
            registry=site.basic.host, user=(site.basic.username or "", site.basic.password or "")
        )
        yield Case(site.basic.ref(name), access)

    return prepare


CORE: tuple[Scenario, ...] = (
    # -- what is there, what is not (plain registry) --
    Scenario(
        "oci-manifest",
        "found/missing",
        "OCI manifest by tag",
        FOUND,
        on("plain", "sample/app:1.0.0"),
    ),
    Scenario(
        "docker-schema2",
        "found/missing",
        "Docker schema 2 by tag",
        FOUND,
        on("plain", "sample/app:docker"),
    ),
    Scenario(
        "oci-index",
        "found/missing",
        "OCI index listing linux/amd64",
        FOUND,
        on("plain", "sample/app:multi"),
    ),
    Scenario(
        "docker-list",
        "found/missing",
        "Docker manifest list listing linux/amd64",
        FOUND,
        on("plain", "sample/app:list"),
    ),
    Scenario(
        "missing-tag", "found/missing", "tag never pushed", MISSING, on("plain", "sample/app:1.0.1")
    ),
    Scenario(
        "missing-repo",
        "found/missing",
        "repository that does not exist",
        MISSING,
        on("plain", "nobody/nothing:1"),
    ),
    Scenario(
        "digest",
        "found/missing",
        "by digest",
        FOUND,
        by_digest("plain", "sample/app", "sample/app:1.0.0"),
    ),
    Scenario(
        "digest-missing",
        "found/missing",
        "digest not in the repository",
        MISSING,
        digest_literal("plain", "sample/app", ZERO_DIGEST),
    ),
    Scenario(
        "digest-other-repo",
        "found/missing",
        "digest of another repository's image",
        MISSING,
        by_digest("plain", "sample/other", "sample/app:1.0.0"),
    ),
    Scenario(
        "index-child-digest",
        "found/missing",
        "linux/amd64 image of an index, by digest",
        FOUND,
        by_digest("plain", "sample/app", "sample/app:multi", child=0),
    ),
    Scenario(
        "tag-at-digest",
        "found/missing",
        "tag@digest, tag missing: the digest decides",
        FOUND,
        by_digest("plain", "sample/app", "sample/app:1.0.0", tag="1.0.1"),
        skopeo=ERROR,
    ),
    Scenario(
        "tag-at-wrong-digest",
        "found/missing",
        "tag@digest, tag found, digest missing",
        MISSING,
        digest_literal("plain", "sample/app", ZERO_DIGEST, tag="1.0.0"),
        skopeo=ERROR,
    ),
    Scenario(
        "index-foreign",
        "platform",
        "index without linux/amd64 (arm64, s390x)",
        MISSING,
        on("plain", "diff/foreign:1"),
    ),
    Scenario(
        "single-foreign",
        "platform",
        "single manifest whose config is linux/arm64",
        FOUND,
        on("plain", "diff/arm-only:1"),
        imagecheck=MISSING,
        difference="foreign-platform",
    ),
    Scenario(
        "child-foreign-digest",
        "platform",
        "linux/arm64 image of an index, by digest",
        FOUND,
        by_digest("plain", "sample/app", "sample/app:multi", child=1),
        imagecheck=MISSING,
        difference="foreign-platform",
    ),
    Scenario(
        "layer-gone",
        "found/missing",
        "manifest found, its layer blob deleted",
        MISSING,
        on("plain", "diff/no-layer:1"),
        imagecheck=FOUND,
        difference="layers",
        skopeo=FOUND,
    ),
    Scenario(
        "layer-gone-deep",
        "found/missing",
        "manifest found, its layer blob deleted; imagecheck --deep",
        MISSING,
        on("plain", "diff/no-layer:1"),
        skopeo=FOUND,
        options=("--deep",),
    ),
    # -- Basic auth over TLS --
    Scenario(
        "basic-found",
        "basic auth",
        "right credentials",
        FOUND,
        on("basic", "sample/app:1.0.0", user="right"),
    ),
    Scenario(
        "basic-index",
        "basic auth",
        "right credentials, OCI index",
        FOUND,
        on("basic", "sample/app:multi", user="right"),
    ),
    Scenario(
        "basic-missing-tag",
        "basic auth",
        "right credentials, tag never pushed",
        MISSING,
        on("basic", "sample/app:nope", user="right"),
    ),
    Scenario(
        "basic-missing-repo",
        "basic auth",
        "right credentials, no such repository",
        MISSING,
        on("basic", "nobody/nothing:1", user="right"),
    ),
    Scenario(
        "basic-anonymous", "basic auth", "no credentials", DENIED, on("basic", "sample/app:1.0.0")
    ),
    Scenario(
        "basic-wrong",
        "basic auth",
        "wrong password",
        DENIED,
        on("basic", "sample/app:1.0.0", user="wrong"),
    ),
    Scenario(
        "basic-untrusted",
        "basic auth",
        "certificate from a CA nobody was given",
        ERROR,
        untrusted_tls("sample/app:1.0.0"),
    ),
    # -- token auth over TLS --
    Scenario(
        "token-anon-public",
        "token auth",
        "anonymous, public repository",
        FOUND,
        on("token", "sample/app:1.0.0"),
    ),
    Scenario(
        "token-anon-index",
        "token auth",
        "anonymous, public Docker manifest list",
        FOUND,
        on("token", "sample/app:list"),
    ),
    Scenario(
        "token-anon-private",
        "token auth",
        "anonymous, private repository",
        DENIED,
        on("token", "private/secret:1.0"),
    ),
    Scenario(
        "token-anon-no-repo",
        "token auth",
        "anonymous, repository that does not exist",
        DENIED,
        on("token", "nobody/nothing:1"),
    ),
    Scenario(
        "token-anon-missing-tag",
        "token auth",
        "anonymous, public repository, tag never pushed",
        MISSING,
        on("token", "sample/app:nope"),
    ),
    Scenario(
        "token-user-private",
        "token auth",
        "right credentials, private repository",
        FOUND,
        on("token", "private/secret:1.0", user="right"),
    ),
    Scenario(
        "token-user-digest",
        "token auth",
        "right credentials, by digest",
        FOUND,
        by_digest("token", "private/secret", "private/secret:1.0", user="right"),
    ),
    Scenario(
        "token-user-missing-tag",
        "token auth",
        "right credentials, tag never pushed",
        MISSING,
        on("token", "private/secret:2.0", user="right"),
    ),
    Scenario(
        "token-user-no-repo",
        "token auth",
        "right credentials, no such repository",
        MISSING,
        on("token", "nobody/nothing:1", user="right"),
    ),
    Scenario(
        "token-wrong",
        "token auth",
        "wrong password",
        DENIED,
        on("token", "private/secret:1.0", user="wrong"),
    ),
    # -- registry quirks and failures, through the fault proxy --
    Scenario(
        "head-405",
        "quirks",
        "HEAD answered 405 (GET works)",
        FOUND,
        through_proxy("sample/app:1.0.0", ("HEAD", MANIFESTS, Respond(405), None)),
    ),
    Scenario(
        "no-digest-header",
        "quirks",
        "no Docker-Content-Digest header",
        FOUND,
        through_proxy(
            "sample/app:1.0.0", (None, MANIFESTS, StripHeaders(("Docker-Content-Digest",)), None)
        ),
    ),
    Scenario(
        "html-404",
        "quirks",
        "404 with an HTML body",
        MISSING,
        through_proxy(
            "sample/app:1.0.0",
            (
                None,
                MANIFESTS,
                Respond(404, {"Content-Type": "text/html"}, b"<html><body>Not Found</body></html>"),
                None,
            ),
        ),
    ),
    Scenario(
        "html-502-once",
        "quirks",
        "one HTML 502 from a front proxy, then the registry",
        FOUND,
        through_proxy(
            "sample/app:1.0.0",
            (None, MANIFESTS, Respond(502, {"Content-Type": "text/html"}, HTML_502_PAGE), 1),
        ),
    ),
    Scenario(
        "503-twice",
        "quirks",
        "503 twice, then the registry",
        FOUND,
        through_proxy("sample/app:1.0.0", (None, MANIFESTS, Respond(503), 2)),
    ),
    Scenario(
        "429-retry-after",
        "quirks",
        "429 with Retry-After: 1, then the registry",
        FOUND,
        through_proxy("sample/app:1.0.0", (None, MANIFESTS, Respond(429, {"Retry-After": "1"}), 1)),
    ),
    Scenario(
        "500-always",
        "quirks",
        "500 on every manifest request",
        ERROR,
        through_proxy("sample/app:1.0.0", (None, MANIFESTS, Respond(500), None)),
    ),
    Scenario(
        "redirect",
        "quirks",
        "307 to another host holding the manifest",
        FOUND,
        redirected("sample/app:1.0.0"),
    ),
    Scenario(
        "unreachable", "quirks", "nothing listening", ERROR, nothing_listening("sample/app:1.0.0")
    ),
    # -- mirrors (hosts.toml, registries.conf, --mirror) --
    Scenario(
        "mirror-has-it",
        "mirrors",
        "mirror holds it, upstream does not",
        FOUND,
        mirrored("mirror/only:1"),
    ),
    Scenario(
        "mirror-lacks-it",
        "mirrors",
        "mirror lacks it, upstream holds it",
        FOUND,
        mirrored("sample/app:docker"),
    ),
    Scenario(
        "mirror-failing",
        "mirrors",
        "mirror answers 500, upstream holds it",
        FOUND,
        mirrored("sample/app:1.0.0", mirror_fault=Respond(500)),
    ),
    Scenario(
        "mirror-upstream-down",
        "mirrors",
        "upstream unreachable, mirror holds it",
        FOUND,
        mirrored("sample/app:1.0.0", upstream_down=True),
    ),
    Scenario("mirror-neither", "mirrors", "neither holds it", MISSING, mirrored("sample/app:nope")),
    # -- references --
    Scenario(
        "localhost",
        "references",
        "localhost:PORT, plain HTTP",
        FOUND,
        renamed_host("localhost", "sample/app:1.0.0"),
    ),
    Scenario(
        "localhost-mixed-case",
        "references",
        "LocalHost:PORT: not loopback to containerd, so HTTPS",
        ERROR,
        renamed_host("LocalHost", "sample/app:1.0.0"),
        skopeo=FOUND,
    ),
    Scenario(
        "separators",
        "references",
        "path with . _ __ -, tag with capitals",
        FOUND,
        on("plain", "diff/sep.a_b__c-d:V1.0_rc-1"),
    ),
    Scenario(
        "tag-128",
        "references",
        "tag of 128 characters",
        FOUND,
        on("plain", f"diff/tags:{LONG_TAG}"),
    ),
    Scenario(
        "uppercase-first",
        "references",
        "LOCALHOST/...: a first component in capitals is a registry host (port 443)",
        ERROR,
        default_port("LOCALHOST", "sample/app:1.0.0"),
        skopeo=Verdict.INVALID,
    ),
    Scenario(
        "port-zero",
        "references",
        "registry port 0 (127.0.0.1:0)",
        ERROR,
        default_port("127.0.0.1:0", "sample/app:1.0.0"),
        imagecheck=Verdict.INVALID,
        difference="host-port",
        skopeo=Verdict.ERROR,
    ),
    Scenario(
        "long-path",
        "references",
        "repository path of 255 characters",
        FOUND,
        on("plain", f"{LONG_REPOSITORY}:1"),
        skopeo=Verdict.INVALID,
    ),
)
