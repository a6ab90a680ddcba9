"""The scratch image runs the Google cloud flow: the image (built or reused as
``test_image.py`` does), run under containerd + runc (tests/support/runc.py) as a GKE pod with
Workload Identity would run it (``GCE_METADATA_HOST`` at the metadata server stand-in, the CA
mounted read-only), with ``us-docker.pkg.dev`` and ``gcr.io`` resolved to the token-mode
registry here (``tests/support/cloudnet.py``'s ``/etc/hosts``, mounted in the container),
whose token server accepts only the stand-in's access token.

The image's standard library is pruned to what static analysis and traced runs import, and
``authn/cloud/_keychain.py`` imports the cloud sources by name: this is the test that the
Google source and what it imports are in the image, and that the termination message says
what a pod's status would show.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.image.images import Image, built_image, into_containerd
from tests.support.cloudstandin import Fault
from tests.support.googlecloud import (
    GOOGLE_HOSTS,
    SERVICE_ACCOUNT,
    GoogleRegistry,
    MetadataServer,
    google_registry,
    metadata_reply,
)
from tests.support.runc import Container, Exited, Runner

IMAGE = os.environ.get("IMAGECHECK_IMAGE", "localhost/imagecheck:dev")
CA = "/ca/ca.pem"

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def image() -> Iterator[Image]:
    yield from built_image(IMAGE)


@pytest.fixture(scope="module")
def ctr_image(image: Image, runner: Runner) -> str:
    return into_containerd(runner, image)


@pytest.fixture(scope="module")
def metadata_server() -> Iterator[MetadataServer]:
    with MetadataServer() as server:
        yield server


@pytest.fixture(scope="module")
def google_site(
    storage: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GoogleRegistry]:
    with google_registry(tmp_path_factory.mktemp("google-image"), storage) as site:
        yield site


@pytest.fixture
def metadata(metadata_server: MetadataServer) -> MetadataServer:
    metadata_server.reset()
    return metadata_server


@pytest.fixture
def google(google_site: GoogleRegistry, metadata: MetadataServer) -> GoogleRegistry:
    """The registry, its token server knowing only the metadata server's token."""
    google_site.accept_only(metadata.access_token)
    return google_site


def run_pod(
    runner: Runner, image: str, site: GoogleRegistry, metadata: MetadataServer, *images: str
) -> tuple[Exited, str]:
    """``check IMAGES`` in the image as a GKE pod runs it; the result and the termination
    message it wrote."""
    done = runner.run(
        Container(
            image,
            args=("check", "--ca-file", CA, *images),
            env={"GCE_METADATA_HOST": metadata.host, "KUBERNETES_SERVICE_HOST": "10.0.0.1"},
            volumes={CA: site.tls.ca_file, "/etc/hosts": site.names.hosts_file},
        )
    )
    assert metadata.access_token not in done.output + done.termination_log
    return done, done.termination_log


def test_found_under_both_names(
    ctr_image: str, runner: Runner, google: GoogleRegistry, metadata: MetadataServer
) -> None:
    images = [google.ref("private/secret:1.0", host) for host in GOOGLE_HOSTS]
    done, _ = run_pod(runner, ctr_image, google, metadata, *images)
    assert done.code == 0, done.output
    assert done.stdout.count("found ") == 2
    assert len(metadata.token_requests()) == 1  # one flow for both names


def test_missing_exits_1_and_says_so(
    ctr_image: str, runner: Runner, google: GoogleRegistry, metadata: MetadataServer
) -> None:
    missing = google.ref("private/secret:9.9.9", "gcr.io")
    done, message = run_pod(runner, ctr_image, google, metadata, missing)
    assert done.code == 1, done.output
    assert message.startswith(f"imagecheck: missing {missing} (tag '9.9.9' not found")


def test_a_refused_token_names_the_identity_and_what_it_needs(
    ctr_image: str, runner: Runner, google: GoogleRegistry, metadata: MetadataServer
) -> None:
    google.token_server.users = {"oauth2accesstoken": "ya29.some-other-token"}
    private = google.ref("private/secret:1.0")
    done, message = run_pod(runner, ctr_image, google, metadata, private)
    assert done.code == 3, done.output
    assert message.startswith(
        f"imagecheck: denied {private} (token service 127.0.0.1 refused credentials from the "
        f"pod's Google identity {SERVICE_ACCOUNT} (GKE metadata server at "
        f"http://{metadata.host}), which needs roles/artifactregistry.reader"
    )


def test_a_metadata_server_refusal_is_an_error(
    ctr_image: str, runner: Runner, google: GoogleRegistry, metadata: MetadataServer
) -> None:
    metadata.fail_next(Fault(reply=metadata_reply(403, b"Forbidden")), times=5)
    private = google.ref("private/secret:1.0")
    done, message = run_pod(runner, ctr_image, google, metadata, private)
    assert done.code == 4, done.output
    assert message.startswith(
        f"imagecheck: error {private} (the GKE metadata server at http://{metadata.host}"
        " gave no token for the default service account (HTTP 403: Forbidden)"
    )
    assert google.token_server.requests == []
