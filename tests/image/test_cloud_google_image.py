"""The scratch image runs the Google cloud flow: the image (built or reused as
``test_image.py`` does), run by scripts/image-run.sh as a GKE pod with Workload Identity would
run it (``GCE_METADATA_HOST`` at the metadata server stand-in, the CA mounted read-only), with
``us-docker.pkg.dev`` and ``gcr.io`` resolved to the token-mode registry here
(``tests/support/cloudnet.py``), whose token server accepts only the stand-in's access token.

The image's standard library is pruned to what static analysis and traced runs import, and
``authn/cloud/_keychain.py`` imports the cloud sources by name: this is the test that the
Google source and what it imports are in the image, and that the termination message says
what a pod's status would show.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.image.images import BUILDAH_ENV, RUN, Image, built_image
from tests.support.cloudstandin import Fault
from tests.support.googlecloud import (
    GOOGLE_HOSTS,
    SERVICE_ACCOUNT,
    GoogleRegistry,
    MetadataServer,
    google_registry,
    metadata_reply,
)

IMAGE = os.environ.get("IMAGECHECK_IMAGE", "localhost/imagecheck:dev")
CA = "/ca/ca.pem"
TERMINATION_LOG = "/termination/log"

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def image() -> Iterator[Image]:
    yield from built_image(IMAGE)


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
    site: GoogleRegistry, metadata: MetadataServer, tmp_path: Path, *images: str
) -> tuple[subprocess.CompletedProcess[str], str]:
    """``check IMAGES`` in the image as a GKE pod runs it; the output and the termination
    message it wrote."""
    log = tmp_path / "termination-log"
    log.write_text("")
    log.chmod(0o666)  # written by 65532 in the container
    options: Sequence[str] = [
        "-v", f"{site.tls.ca_file}:{CA}:ro",
        "-v", f"{log}:{TERMINATION_LOG}",
        "-e", f"GCE_METADATA_HOST={metadata.host}",
        "-e", "KUBERNETES_SERVICE_HOST=10.0.0.1",
    ]  # fmt: skip
    args = ["check", "--ca-file", CA, "--termination-log", TERMINATION_LOG, *images]
    done = subprocess.run(
        site.names.command([str(RUN), *options, "--", *args]),
        env=os.environ | BUILDAH_ENV | {"IMAGECHECK_IMAGE": IMAGE},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert metadata.access_token not in done.stdout + done.stderr + log.read_text()
    return done, log.read_text()


def test_found_under_both_names(
    image: Image, google: GoogleRegistry, metadata: MetadataServer, tmp_path: Path
) -> None:
    images = [google.ref("private/secret:1.0", host) for host in GOOGLE_HOSTS]
    done, _ = run_pod(google, metadata, tmp_path, *images)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("found ") == 2
    assert len(metadata.token_requests()) == 1  # one flow for both names


def test_missing_exits_1_and_says_so(
    image: Image, google: GoogleRegistry, metadata: MetadataServer, tmp_path: Path
) -> None:
    missing = google.ref("private/secret:9.9.9", "gcr.io")
    done, message = run_pod(google, metadata, tmp_path, missing)
    assert done.returncode == 1, done.stdout + done.stderr
    assert message.startswith(f"imagecheck: missing {missing} (tag '9.9.9' not found")


def test_a_refused_token_names_the_identity_and_what_it_needs(
    image: Image, google: GoogleRegistry, metadata: MetadataServer, tmp_path: Path
) -> None:
    google.token_server.users = {"oauth2accesstoken": "ya29.some-other-token"}
    private = google.ref("private/secret:1.0")
    done, message = run_pod(google, metadata, tmp_path, private)
    assert done.returncode == 3, done.stdout + done.stderr
    assert message.startswith(
        f"imagecheck: denied {private} (token service 127.0.0.1 refused credentials from the "
        f"pod's Google identity {SERVICE_ACCOUNT} (GKE metadata server at "
        f"http://{metadata.host}), which needs roles/artifactregistry.reader"
    )


def test_a_metadata_server_refusal_is_an_error(
    image: Image, google: GoogleRegistry, metadata: MetadataServer, tmp_path: Path
) -> None:
    metadata.fail_next(Fault(reply=metadata_reply(403, b"Forbidden")), times=5)
    private = google.ref("private/secret:1.0")
    done, message = run_pod(google, metadata, tmp_path, private)
    assert done.returncode == 4, done.stdout + done.stderr
    assert message.startswith(
        f"imagecheck: error {private} (the GKE metadata server at http://{metadata.host}"
        " gave no token for the default service account (HTTP 403: Forbidden)"
    )
    assert google.token_server.requests == []
