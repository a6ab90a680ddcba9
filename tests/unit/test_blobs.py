"""The deep check's odd answers, the network faked with respx (the ordinary ones are tested
against the real registry in tests/integration/test_deep.py): a HEAD refused, statuses other
than 200 and 404, descriptors of other shapes, schema 1."""

from __future__ import annotations

import asyncio
import hashlib
import json

import httpx
import pytest
import respx

from imagecheck._deadline import Deadline
from imagecheck.reference import parse_reference
from imagecheck.registry import ClientOptions, ImageChecker
from imagecheck.registry._retry import RetryPolicy
from imagecheck.result import CheckResult, Status

REGISTRY = "https://registry.test"
IMAGE = "registry.test/app:1.0"
CONFIG = "sha256:" + "c" * 64
LAYER = "sha256:" + "1" * 64
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
SCHEMA1 = "application/vnd.docker.distribution.manifest.v1+json"

pytestmark = pytest.mark.usefixtures("small_trust_store")


def manifest(config: object = CONFIG, layers: object = None) -> bytes:
    layers = [{"digest": LAYER}] if layers is None else layers
    document = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"digest": config}}
    return json.dumps({**document, "layers": layers}).encode()


def serve(router: respx.Router, body: bytes, media_type: str = OCI_MANIFEST) -> None:
    router.get(f"{REGISTRY}/v2/").respond(200)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    headers = {"Content-Type": media_type, "Docker-Content-Digest": digest}
    router.get(f"{REGISTRY}/v2/app/manifests/1.0").respond(200, content=body, headers=headers)


def blob(router: respx.Router, digest: str, method: str = "HEAD") -> respx.Route:
    return router.route(method=method, url=f"{REGISTRY}/v2/app/blobs/{digest}")


def deep_check(router: respx.Router) -> CheckResult:
    async def main() -> CheckResult:
        async with ImageChecker(
            ClientOptions(deep=True, platform=None),
            transport=httpx.MockTransport(router.async_handler),
            retry_policy=RetryPolicy(retries=1, sleep=_no_sleep, rng=lambda: 0.0),
        ) as checker:
            return await checker.check(parse_reference(IMAGE), Deadline.after(30))

    return asyncio.run(main())


async def _no_sleep(_: float) -> None:
    return None


def test_every_blob_is_asked_with_head(router: respx.Router) -> None:
    serve(router, manifest())
    config, layer = blob(router, CONFIG).respond(200), blob(router, LAYER).respond(200)
    result = deep_check(router)
    assert result.status is Status.FOUND, result.message
    assert "its config and 1 layer(s) present" in result.message
    assert "this machine's" in result.message  # no platform asked: the host's is named
    assert config.call_count == layer.call_count == 1


@pytest.mark.parametrize("refused", [405, 400, 501])
@pytest.mark.parametrize("ranged", [206, 200], ids=["206", "200-whole"])
def test_a_refused_head_falls_back_to_one_byte(
    router: respx.Router, refused: int, ranged: int
) -> None:
    serve(router, manifest())
    blob(router, CONFIG).respond(200)
    blob(router, LAYER).respond(refused)
    # A registry that ignores Range answers the whole blob: only a prefix of it is read.
    get = blob(router, LAYER, "GET").respond(ranged, content=b"\x1f" * (1 << 20))
    result = deep_check(router)
    assert result.status is Status.FOUND, result.message
    assert get.calls.last.request.headers["Range"] == "bytes=0-0"


def test_a_refused_head_then_404_is_missing(router: respx.Router) -> None:
    serve(router, manifest())
    blob(router, CONFIG).respond(200)
    blob(router, LAYER).respond(405)
    blob(router, LAYER, "GET").respond(404)
    result = deep_check(router)
    assert result.status is Status.MISSING
    assert f"layer {LAYER} of " in result.message


@pytest.mark.parametrize(
    ("status", "expected", "text"),
    [
        (404, Status.MISSING, f"config {CONFIG} of "),
        (403, Status.DENIED, "HTTP 403"),
        (401, Status.DENIED, "HTTP 401"),
        (418, Status.ERROR, f"HTTP 418 for config {CONFIG}"),
        (503, Status.ERROR, "HTTP 503"),
    ],
)
def test_blob_status_to_result(
    router: respx.Router, status: int, expected: Status, text: str
) -> None:
    serve(router, manifest())
    blob(router, CONFIG).respond(status)
    blob(router, LAYER).respond(200)
    result = deep_check(router)
    assert result.status is expected
    assert text in result.message


def test_two_missing_blobs_name_the_first_and_count_the_rest(router: respx.Router) -> None:
    other = "sha256:" + "2" * 64
    serve(router, manifest(layers=[{"digest": LAYER}, {"digest": other}]))
    blob(router, CONFIG).respond(200)
    blob(router, LAYER).respond(404)
    blob(router, other).respond(404)
    result = deep_check(router)
    assert result.status is Status.MISSING
    assert f"layer {LAYER}" in result.message and "(and 1 more)" in result.message


@pytest.mark.parametrize(
    "body",
    [
        manifest(config="sha256:../../v2/_catalog"),
        manifest(config="md5:abc"),
        manifest(layers=[{"digest": 5}]),
        manifest(layers={"digest": LAYER}),
        manifest(layers=["sha256:" + "1" * 64]),
        b'{"schemaVersion": 2, "layers": []}',
    ],
    ids=["path-in-digest", "unknown-algorithm", "number", "not-a-list", "not-objects", "no-config"],
)
def test_a_descriptor_of_another_shape_is_an_error_and_nothing_is_asked(
    router: respx.Router, body: bytes
) -> None:
    serve(router, body)
    blobs = router.route(method="HEAD", path__startswith="/v2/app/blobs/").respond(200)
    result = deep_check(router)
    assert result.status is Status.ERROR
    assert blobs.call_count == 0


def test_schema1_layers_are_its_fs_layers(router: respx.Router) -> None:
    body = json.dumps(
        {
            "schemaVersion": 1,
            "architecture": "amd64",
            "fsLayers": [{"blobSum": LAYER}, {"blobSum": LAYER}],
        }
    ).encode()
    serve(router, body, SCHEMA1)
    layer = blob(router, LAYER).respond(200)
    result = deep_check(router)
    assert result.status is Status.FOUND, result.message
    assert "1 layer(s) present" in result.message and "config" not in result.message
    assert layer.call_count == 1  # the same layer twice is asked once
