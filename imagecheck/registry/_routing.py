"""A check along a route: the endpoints a node's runtime would ask, in its order, and what
their answers make together (``imagecheck.routes`` says which endpoints; this asks them).

* Endpoints that may not answer the reference (a tag at a host without ``resolve``, a tag at a
  digest-only mirror) are left out, as the runtime leaves them out.
* The first endpoint that has the image ends the check: found, named.
* Otherwise the route's ``verdict`` rule: containerd keeps the first failure that is not a
  404 (``FIRST_FAILURE``); containers/image reports the last source's (``LAST_HOST``). Every
  endpoint asked is listed in the message.
* A blocked route is denied: without a request when it has no endpoint for the reference;
  else its endpoints are asked first, and only a found image overrides the refusal
  (containers/image asks a blocked registry's mirrors before refusing the registry).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from imagecheck.errors import UsageError
from imagecheck.reference import Reference
from imagecheck.result import CheckResult, Status
from imagecheck.routes import Endpoint, Route, Router, Verdict

AskEndpoint = Callable[[Endpoint, Reference], Awaitable[CheckResult]]


def route_of(
    ref: Reference, image: str, router: Router | None, mirrors: Sequence[tuple[str, str]]
) -> Route | CheckResult:
    """``ref``'s route: the router's, else the mirrors given for its registry, in order, then
    the registry itself. A reference the router cannot route (a short name its configuration
    leaves ambiguous) is an invalid result."""
    if router is not None:
        try:
            return router.route(ref, image)
        except UsageError as exc:
            return CheckResult(image, ref, Status.INVALID, message=str(exc))
    endpoints = [Endpoint(m, ref.repository, mirror=True) for s, m in mirrors if s == ref.registry]
    return Route((*endpoints, Endpoint(ref.api_host, ref.repository)))


def endpoint_reference(ref: Reference, endpoint: Endpoint) -> Reference:
    """``ref`` as asked at ``endpoint``: its own when the endpoint is its registry, else the
    endpoint's host and repository (credentials are looked up for that host)."""
    if endpoint.host == ref.api_host and endpoint.repository == ref.repository:
        return ref
    return replace(ref, registry=endpoint.host, repository=endpoint.repository)


async def check_route(
    route: Route, ref: Reference, image: str, ask: AskEndpoint, *, named: bool
) -> CheckResult:
    """The result of asking ``route``'s endpoints for ``ref``. ``named``: say which endpoint
    answered (a route a runtime's configuration made; the plain route needs no saying)."""
    endpoints = [endpoint for endpoint in route.endpoints if endpoint.serves(ref)]
    if route.blocked is not None and not endpoints:
        return CheckResult(image, ref, Status.DENIED, message=route.blocked)
    if not endpoints:
        kind = "a digest" if ref.digest else "a tag"
        where = f" in {route.source}" if route.source else ""
        message = f"{ref}: no host{where} may answer {kind} reference for {ref.registry}"
        return CheckResult(image, ref, Status.MISSING, message=message, registry=ref.api_host)
    asked: list[tuple[Endpoint, CheckResult]] = []
    for endpoint in endpoints:
        result = await ask(endpoint, endpoint_reference(ref, endpoint))
        asked.append((endpoint, result))
        if result.status is Status.FOUND:
            break
    endpoint, result = _final(asked, route.verdict)
    if route.blocked is not None and result.status is not Status.FOUND:
        also = "; ".join(f"{e.name}: {r.status.value}" for e, r in asked)
        message = f"{route.blocked}; also asked: {also}"
        return CheckResult(image, ref, Status.DENIED, message=message)
    return _described(result, endpoint, asked, named=named)


def _final(
    asked: list[tuple[Endpoint, CheckResult]], verdict: Verdict
) -> tuple[Endpoint, CheckResult]:
    last = asked[-1]
    if last[1].status is Status.FOUND or verdict is Verdict.LAST_HOST:
        return last
    failures = [pair for pair in asked if pair[1].status is not Status.MISSING]
    return failures[0] if failures else last


def _described(
    result: CheckResult,
    endpoint: Endpoint,
    asked: list[tuple[Endpoint, CheckResult]],
    *,
    named: bool,
) -> CheckResult:
    others = [f"{e.name}: {r.status.value}" for e, r in asked if e is not endpoint]
    message = result.message
    if named:
        origin = f" ({endpoint.origin})" if endpoint.origin else ""
        message = f"{message}; answered by {endpoint.name}{origin}"
        if others:
            message = f"{message}; also asked: {'; '.join(others)}"
    elif others:
        message = f"{message} (mirrors: {'; '.join(others)})"
    if message is result.message and result.registry == endpoint.host:
        return result  # the plain route's one host: nothing to add (no copy per check)
    return replace(result, message=message, registry=endpoint.host)
