"""The pod harness (tests/support/pod.py): ``examples/job.yaml``'s initContainer (the image,
under runc) guards the main container. A failed check leaves the main image out of the node
entirely: no manifest, config or layer of it in containerd's content store; a found one lets
the kubelet pull it and run it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.image.images import Image, Registry, built_image, into_containerd
from tests.support.jobexample import init_container
from tests.support.pod import content_digests, image_names, run_pod
from tests.support.runc import Container, Runner
from tests.support.tinyimage import TinyImage

IMAGE = os.environ.get("IMAGECHECK_IMAGE", "localhost/imagecheck:dev")
MAIN_REPO = "team/train"
NO_AUTHS = {".dockerconfigjson": b'{"auths": {}}'}

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def image() -> Iterator[Image]:
    yield from built_image(IMAGE)


@pytest.fixture(scope="module")
def main_image(registry: Registry) -> TinyImage:
    """The main container's image, in the registry as team/train:1.0.0 (and no other tag)."""
    tiny = TinyImage.build(b"train ran\n")
    with httpx.Client(timeout=30, trust_env=False) as client:
        tiny.push(client, f"http://{registry.host}", MAIN_REPO, "1.0.0")
    return tiny


@pytest.fixture
def node(runner: Runner, image: Image) -> Runner:
    """A node of its own: a containerd namespace (its own content store) holding only the
    imagecheck image, as after the kubelet pulled the initContainer's image."""
    fresh = Runner(runner.daemon, f"node-{uuid.uuid4().hex[:8]}", runner.scratch)
    into_containerd(fresh, image)
    return fresh


def test_a_failed_check_leaves_the_main_image_out_of_the_node(
    node: Runner, registry: Registry, main_image: TinyImage
) -> None:
    before = content_digests(node)
    main = registry.ref(f"{MAIN_REPO}:9.9.9")
    outcome = run_pod(node, init_container(IMAGE, main, NO_AUTHS), Container(main), plain_http=True)
    assert outcome.init.code == 1, outcome.init.output
    assert outcome.init.termination_message.startswith(f"imagecheck: missing {main} ")
    assert (outcome.main, outcome.phase) == (None, "Failed")
    assert image_names(node) == {IMAGE}
    assert content_digests(node) == before
    assert not content_digests(node) & main_image.digests


def test_a_found_check_lets_the_main_container_be_pulled_and_run(
    node: Runner, registry: Registry, main_image: TinyImage
) -> None:
    main = registry.ref(f"{MAIN_REPO}:1.0.0")
    outcome = run_pod(node, init_container(IMAGE, main, NO_AUTHS), Container(main), plain_http=True)
    assert outcome.init.code == 0, outcome.init.output
    assert outcome.main is not None
    assert (outcome.main.code, outcome.main.stdout) == (0, "train ran\n")
    assert outcome.phase == "Succeeded"
    assert image_names(node) == {IMAGE, main}
    assert main_image.digests <= content_digests(node)
