"""What a webhook process that lives for months keeps is bounded (issue #10): the token cache
and its locks, the checker's per-image error memory, and the pod pull-secret keychains. Each
test feeds far more distinct keys than the bound and looks at what is left."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import cast

import httpx
import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn import AnonymousKeychain
from imagecheck.errors import ImagecheckError
from imagecheck.kube import KubeClient
from imagecheck.reference import parse_reference
from imagecheck.registry import ClientOptions, ImageChecker
from imagecheck.registry._auth import TokenCache, TokenKey
from imagecheck.registry._retry import RetryPolicy
from imagecheck.registry._tokens import Token
from imagecheck.result import Status
from imagecheck.webhook._podsecrets import PodSecrets


def key(i: int) -> TokenKey:
    return ("https://auth.test/token", "registry.test", f"repository:r{i}:pull", "anonymous")


# -- TokenCache ------------------------------------------------------------------------------


def test_token_cache_keeps_at_most_max_tokens_least_recently_used_first() -> None:
    cache = TokenCache(max_tokens=100)
    for i in range(20_000):
        cache.put(key(i), Token(f"t{i}", expires_at=1e9))
        if i >= 1:
            assert cache.get(key(0), now=0.0) is not None  # used all along: kept
    assert len(cache) == 100
    assert cache.get(key(19_999), now=0.0) is not None
    assert cache.get(key(100), now=0.0) is None


def test_token_cache_drops_an_expired_token_when_it_is_seen() -> None:
    cache = TokenCache()
    cache.put(key(1), Token("old", expires_at=10.0))
    assert cache.get(key(1), now=11.0) is None
    assert len(cache) == 0


def test_token_cache_locks_are_shared_while_used_and_gone_after() -> None:
    cache = TokenCache()

    async def main() -> list[str]:
        order: list[str] = []

        async def fetch(name: str, k: TokenKey, hold: float) -> None:
            async with cache.lock(k):
                order.append(f"{name}+")
                await asyncio.sleep(hold)
                order.append(f"{name}-")

        await asyncio.gather(
            fetch("a", key(1), 0.02), fetch("b", key(1), 0.0), fetch("c", key(2), 0.0)
        )
        # Cancelled while waiting for a held lock: neither the lock nor its holder suffers.
        holder = asyncio.ensure_future(fetch("d", key(3), 0.02))
        await asyncio.sleep(0)
        quitter = asyncio.ensure_future(fetch("e", key(3), 0.0))
        await asyncio.sleep(0)
        quitter.cancel()
        await asyncio.gather(holder, quitter, return_exceptions=True)
        for i in range(10_000):  # one request per repository, as a long-lived webhook sees
            async with cache.lock(key(100 + i)):
                pass
        return order

    order = asyncio.run(main())
    # b waited for a (same key); c did not (another key).
    assert order.index("a-") < order.index("b+")
    assert order.index("c+") < order.index("a-")
    assert "e+" not in order and order[-2:] == ["d+", "d-"]
    assert cache._locks == {}  # no lock outlives its users


# -- ImageChecker's per-image error memory ---------------------------------------------------


@pytest.mark.usefixtures("small_trust_store")
def test_failed_checks_leave_no_per_image_error_memory_behind() -> None:
    def failing(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v2/":
            return httpx.Response(200)
        return httpx.Response(500, json={"errors": [{"code": "UNKNOWN", "message": "down"}]})

    async def main() -> tuple[ImageChecker, set[Status]]:
        async with ImageChecker(
            ClientOptions(retries=0),
            AnonymousKeychain(),
            transport=httpx.MockTransport(failing),
            retry_policy=RetryPolicy(retries=0),
        ) as checker:
            statuses = set()
            for i in range(500):
                image = f"registry.test/app{i}:1"
                result = await checker.check(parse_reference(image), Deadline.after(30))
                statuses.add(result.status)
            return checker, statuses

    checker, statuses = asyncio.run(main())
    assert statuses == {Status.ERROR}
    assert len(checker._last_error) == 0


# -- pod pull secrets ------------------------------------------------------------------------


class FakeKube:
    """Answers every secret with its ``.dockerconfigjson`` for ``registry.test`` (what
    ``KubeClient.pull_secret_json`` returns); counts reads."""

    def __init__(self) -> None:
        self.reads = 0

    def pull_secret_json(self, secret_name: str, namespace: str | None = None) -> str:
        self.reads += 1
        if secret_name.startswith("unreadable"):
            raise ImagecheckError(f"secret {secret_name} is forbidden")
        auth = base64.b64encode(b"u:p").decode()
        return json.dumps({"auths": {"registry.test": {"auth": auth}}})  # .dockerconfigjson


def test_pod_secret_keychains_are_bounded_and_secrets_per_review_too() -> None:
    kube = FakeKube()
    secrets = PodSecrets(cast(KubeClient, kube), AnonymousKeychain())

    async def main() -> None:
        for i in range(3 * PodSecrets.MAX_ENTRIES):
            assert await secrets.keychain(f"ns-{i}", ["regcred"]) is not None
        kube.reads = 0
        names = [f"unreadable-{i}" for i in range(5_000)]
        assert await secrets.keychain("ns", names) is None

    asyncio.run(main())
    assert len(secrets._keychains) == PodSecrets.MAX_ENTRIES
    assert kube.reads == PodSecrets.MAX_SECRETS


def test_registry_hosts_are_remembered_up_to_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A webhook meets any host a pod spec names: what it keeps of each (the ping's scheme and
    challenge) is bounded, least recently used first, and a forgotten host is pinged again."""
    monkeypatch.setattr("imagecheck.registry._ping.MAX_REGISTRIES", 8)
    pings: list[str] = []

    def registry(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v2/":
            pings.append(request.url.host)
            return httpx.Response(200)
        return httpx.Response(404)

    async def main() -> ImageChecker:
        async with ImageChecker(
            ClientOptions(retries=0), AnonymousKeychain(), transport=httpx.MockTransport(registry)
        ) as checker:
            for i in range(40):
                await checker.check(parse_reference(f"r{i}.test/app:1"), Deadline.after(30))
                await checker.check(parse_reference("hot.test/app:1"), Deadline.after(30))
            await checker.check(parse_reference("r0.test/app:1"), Deadline.after(30))
            return checker

    checker = asyncio.run(main())
    assert len(checker._registries) == 8
    assert pings.count("hot.test") == 1  # used all along: never forgotten
    assert pings.count("r0.test") == 2  # forgotten long ago: pinged again
