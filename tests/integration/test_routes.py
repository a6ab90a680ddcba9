"""Routes against the real registry: the checker asks the endpoints a runtime's configuration
gives (``imagecheck.routes``), in order, each the way it says (scheme, API root, TLS, query,
headers), and combines their answers by the route's rule. The readers of containerd's
hosts.toml and of registries.conf have their own tests; these hold the checker to a Route."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest

from imagecheck._deadline import Deadline
from imagecheck.reference import Reference, parse_reference
from imagecheck.registry import ClientOptions, ImageChecker
from imagecheck.result import CheckResult, Status
from imagecheck.routes import Endpoint, HostTLS, Route, Verdict
from tests.support.endpoint import RegistryEndpoint
from tests.support.pathproxy import PathProxy

SOURCE = "registry.example.test"


@dataclass(frozen=True)
class FixedRouter:
    route_: Route

    def route(self, ref: Reference, text: str) -> Route:
        return self.route_


def _check(route: Route, image: str, ca_files: tuple[Path, ...] = ()) -> CheckResult:
    async def run() -> CheckResult:
        options = ClientOptions(router=FixedRouter(route), retries=0, timeout=5, ca_files=ca_files)
        async with ImageChecker(options) as checker:
            return await checker.check(parse_reference(image), Deadline.after(30))

    return asyncio.run(run())


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_an_override_path_endpoint_is_asked_under_its_root_with_query_and_headers(
    registry_plain: RegistryEndpoint,
) -> None:
    with PathProxy(registry_plain.url, "/artifactory/api/docker/remote/v2", ("x-mirror",)) as p:
        endpoint = Endpoint(
            p.host,
            "sample/app",
            scheme="http",
            path="/artifactory/api/docker/remote/v2",
            headers=(("X-Mirror", "yes"),),
            namespace=SOURCE,
            mirror=True,
            origin="hosts.toml under test",
        )
        result = _check(Route((endpoint,)), f"{SOURCE}/sample/app:1.0.0")
    assert result.status is Status.FOUND, result.message
    assert result.registry == p.host
    assert f"answered by http://{p.host} (hosts.toml under test)" in result.message
    manifests = [s for s in p.seen if "/manifests/" in s.path]
    assert manifests, p.seen
    for seen in manifests:
        assert seen.path == "/artifactory/api/docker/remote/v2/sample/app/manifests/1.0.0"
        assert seen.query == f"ns={SOURCE}"
        assert seen.headers == {"x-mirror": "yes"}
    # No request went to /v2/ at the proxy's root: the root is the configured one.
    assert all(s.path.startswith("/artifactory/") for s in p.seen)


def test_the_first_failure_is_the_answer_under_containerds_rule(
    registry_plain: RegistryEndpoint,
) -> None:
    down = Endpoint(_closed_port(), "sample/app", scheme="http", mirror=True, origin="m")
    upstream = Endpoint(registry_plain.host, "sample/nope", origin="server")
    image = f"{registry_plain.host}/sample/nope:1"
    first = _check(Route((down, upstream), Verdict.FIRST_FAILURE), image)
    last = _check(Route((down, upstream), Verdict.LAST_HOST), image)
    assert first.status is Status.ERROR, first.message
    assert f"also asked: {registry_plain.host}: missing" in first.message
    assert last.status is Status.MISSING, last.message
    assert f"also asked: http://{down.host}: error" in last.message


def test_a_found_image_at_a_later_endpoint_wins_over_an_earlier_failure(
    registry_plain: RegistryEndpoint,
) -> None:
    down = Endpoint(_closed_port(), "sample/app", scheme="http", mirror=True)
    upstream = Endpoint(registry_plain.host, "sample/app")
    result = _check(
        Route((down, upstream), Verdict.FIRST_FAILURE), f"{registry_plain.host}/sample/app:1.0.0"
    )
    assert result.status is Status.FOUND, result.message
    assert result.registry == registry_plain.host


def test_endpoints_that_may_not_answer_the_reference_are_not_asked(
    registry_plain: RegistryEndpoint,
) -> None:
    digest = registry_plain.images["sample/app:1.0.0"].digest
    with PathProxy(registry_plain.url, "/v2") as p:
        digest_only = Endpoint(p.host, "sample/app", scheme="http", tags=False, mirror=True)
        upstream = Endpoint(registry_plain.host, "sample/app")
        route = Route((digest_only, upstream))
        by_tag = _check(route, f"{registry_plain.host}/sample/app:1.0.0")
        assert by_tag.status is Status.FOUND and by_tag.registry == registry_plain.host
        assert p.seen == []
        by_digest = _check(route, f"{registry_plain.host}/sample/app@{digest}")
    assert by_digest.status is Status.FOUND and by_digest.registry == p.host


def test_no_endpoint_left_is_missing_and_says_why() -> None:
    route = Route((Endpoint("mirror.invalid", "x", tags=False),), source="hosts.toml in /d")
    result = _check(route, "registry.example.test/x:1")
    assert result.status is Status.MISSING
    assert "no host in hosts.toml in /d may answer a tag reference" in result.message


def test_a_blocked_route_is_denied_without_a_request() -> None:
    reason = "registry.example.test is blocked in /etc/containers/registries.conf"
    route = Route((Endpoint("registry.example.test", "x"),), blocked=reason)
    result = _check(route, "registry.example.test/x:1")
    assert result.status is Status.DENIED
    assert result.message == reason


def test_an_endpoint_trusts_its_own_ca(registry_token: RegistryEndpoint) -> None:
    assert registry_token.ca_file is not None
    image = registry_token.ref("sample/app:1.0.0")
    plain = Endpoint(registry_token.host, "sample/app")
    with_ca = Endpoint(registry_token.host, "sample/app", tls=HostTLS((registry_token.ca_file,)))
    unverified = Endpoint(registry_token.host, "sample/app", tls=HostTLS(skip_verify=True))
    assert _check(Route((plain,)), image).status is Status.ERROR  # no CA: not trusted
    assert _check(Route((with_ca,)), image).status is Status.FOUND
    assert _check(Route((unverified,)), image).status is Status.FOUND


def test_a_pinned_scheme_is_not_probed(registry_plain: RegistryEndpoint) -> None:
    image = registry_plain.ref("sample/app:1.0.0")
    https = Endpoint(registry_plain.host, "sample/app", scheme="https")
    probed = Endpoint(registry_plain.host, "sample/app")
    pinned = _check(Route((https,)), image)
    assert pinned.status is Status.ERROR, pinned.message
    assert _check(Route((probed,)), image).status is Status.FOUND


@pytest.mark.parametrize("missing", ["ca", "client"])
def test_an_unusable_tls_file_is_an_error_naming_it(
    registry_token: RegistryEndpoint, tmp_path: Path, missing: str
) -> None:
    gone = tmp_path / "gone.pem"
    tls = HostTLS((gone,)) if missing == "ca" else HostTLS(client_pairs=((gone, None),))
    result = _check(
        Route((Endpoint(registry_token.host, "sample/app", tls=tls),)),
        registry_token.ref("sample/app:1.0.0"),
    )
    assert result.status is Status.ERROR
    assert str(gone) in result.message
