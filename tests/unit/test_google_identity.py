"""Whether a Google identity is plausible here, decided with no request (the environment and
the DMI product name, in Application Default Credentials' order); which hosts get a Google
credential; and one credential per identity, cached and renewed by the keychain."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn.cloud._google import source
from imagecheck.authn.cloud._keychain import CloudKeychain
from imagecheck.reference import parse_reference
from tests.support.aio import sync
from tests.support.cloudstandin import RecordingHTTP
from tests.support.googlecloud import MetadataServer, cloud_http, google_host

GCR = google_host("gcr.io")
METADATA = "the default service account of the GCE metadata server at http://"
EXTERNAL = "the Google external account in GOOGLE_APPLICATION_CREDENTIALS /etc/gcp/config.json"


def dmi(tmp_path: Path, product: str | None) -> Path:
    """A DMI directory whose ``product_name`` holds ``product`` as sysfs shows it."""
    directory = tmp_path / "dmi"
    directory.mkdir(exist_ok=True)
    if product is not None:
        (directory / "product_name").write_text(product + "\n", encoding="utf-8")
    return directory


@pytest.mark.parametrize(
    ("env", "product", "expected"),
    [
        ({}, None, None),
        ({}, "Google Compute Engine", METADATA + "metadata.google.internal"),
        ({}, "Google", METADATA + "metadata.google.internal"),
        ({}, "google compute engine", None),  # google-auth compares as written
        ({}, "Amazon EC2", None),
        ({}, "Virtual Machine", None),
        ({}, "", None),
        ({"GCE_METADATA_HOST": "10.1.2.3:8080"}, None, METADATA + "10.1.2.3:8080"),
        ({"GCE_METADATA_HOST": ""}, None, None),
        ({"GCE_METADATA_HOST": "", "GCE_METADATA_IP": "1.2.3.4"}, None, None),
        ({"GOOGLE_APPLICATION_CREDENTIALS": "/etc/gcp/config.json"}, None, EXTERNAL),
        ({"GOOGLE_APPLICATION_CREDENTIALS": "/etc/gcp/config.json"}, "Google", EXTERNAL),
        (
            {"GOOGLE_APPLICATION_CREDENTIALS": "/etc/gcp/config.json", "GCE_METADATA_HOST": "h"},
            None,
            EXTERNAL,
        ),
        ({"GOOGLE_APPLICATION_CREDENTIALS": ""}, "Google", METADATA + "metadata.google.internal"),
        ({"GOOGLE_APPLICATION_CREDENTIALS": ""}, None, None),
        ({"AWS_ROLE_ARN": "arn:aws:iam::1:role/x", "AZURE_CLIENT_ID": "x"}, None, None),
        (
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1"},
            "Google Compute Engine",
            "the default service account of the GKE metadata server at "
            "http://metadata.google.internal",
        ),
    ],
    ids=[
        "nothing", "gce-dmi", "google-dmi", "lowercase-dmi", "aws-dmi", "azure-dmi", "empty-dmi",
        "metadata-host", "empty-metadata-host", "metadata-ip-alone", "adc", "adc-over-dmi",
        "adc-over-metadata-host", "empty-adc", "empty-adc-no-dmi", "other-clouds", "gke",
    ],
)  # fmt: skip
def test_plausible_identity(
    tmp_path: Path, env: dict[str, str], product: str | None, expected: str | None
) -> None:
    assert source(env, dmi(tmp_path, product)).identity(GCR) == expected


@pytest.mark.parametrize("kind", ["fifo", "directory", "missing-dir"])
def test_an_odd_dmi_file_is_no_identity_and_never_blocks(tmp_path: Path, kind: str) -> None:
    directory = dmi(tmp_path, None)
    if kind == "fifo":
        os.mkfifo(directory / "product_name")
    elif kind == "directory":
        (directory / "product_name").mkdir()
    else:
        directory = tmp_path / "absent"
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(source({}, directory).identity(GCR)))
    worker.start()
    worker.join(timeout=5)
    assert done == [None]


def test_a_huge_dmi_file_is_no_identity(tmp_path: Path) -> None:
    directory = dmi(tmp_path, "Google" + "x" * 10_000)
    assert source({}, directory).identity(GCR) is None


@sync
async def test_no_identity_sends_nothing_and_answers_nothing(tmp_path: Path) -> None:
    http = RecordingHTTP()
    keychain = CloudKeychain({}, http=http, dmi_dir=dmi(tmp_path, "Amazon EC2"))
    for image in ("gcr.io/p/app:1", "us-docker.pkg.dev/p/r/app:1", "eu.gcr.io/p/app:1"):
        assert await keychain.aresolve(parse_reference(image), Deadline.after(5)) == ()
        assert keychain.resolve(parse_reference(image)) == ()
    assert http.sent == []


@pytest.mark.parametrize(
    "image",
    [
        "evilgcr.io/p/app:1",
        "gcr.io.attacker.test/p/app:1",
        "us-docker.pkg.dev.attacker.test/p/r/app:1",
        "docker.pkg.dev/p/r/app:1",
        "pkg.dev/p/r/app:1",
        "us-maven.pkg.dev/p/r/app:1",
        "a.b.gcr.io/p/app:1",
        "GCR.IO/p/app:1",
        "ghcr.io/p/app:1",
        "eu.gcr.io.attacker.test/p/app:1",
    ],
)
@sync
async def test_look_alike_hosts_get_nothing(tmp_path: Path, image: str) -> None:
    http = RecordingHTTP()
    keychain = CloudKeychain({"GCE_METADATA_HOST": "127.0.0.1:9"}, http=http, dmi_dir=tmp_path)
    assert await keychain.aresolve(parse_reference(image), Deadline.after(5)) == ()
    assert http.sent == []


@sync
async def test_one_flow_serves_every_google_host(tmp_path: Path) -> None:
    """An access token is good for every Google registry: one cache entry per identity."""
    with MetadataServer() as metadata:
        env = {"GCE_METADATA_HOST": metadata.host}
        keychain = CloudKeychain(env, http=cloud_http(), dmi_dir=tmp_path)
        images = [
            "gcr.io/p/app:1",
            "eu.gcr.io/p/app:1",
            "us-docker.pkg.dev/p/r/app:1",
            "europe-west1-docker.pkg.dev/p/r/app:1",
            "docker.us-central1.rep.pkg.dev/p/r/app:1",
            "gcr.io:5000/p/app:1",
        ]
        for image in images:
            (creds,) = await keychain.aresolve(parse_reference(image), Deadline.after(5))
            assert (creds.username, creds.password) == ("oauth2accesstoken", metadata.access_token)
        assert keychain.resolve(parse_reference("asia.gcr.io/p/app:1"))  # cached, no loop needed
    assert [r.path.rsplit("/", 1)[1] for r in metadata.requests] == ["token", "email"]


@sync
async def test_a_token_is_renewed_after_three_quarters_of_its_life(tmp_path: Path) -> None:
    now = [1000.0]
    image = parse_reference("us-docker.pkg.dev/p/r/app:1")
    with MetadataServer(expires_in=1200) as metadata:
        env = {"GCE_METADATA_HOST": metadata.host}
        keychain = CloudKeychain(env, http=cloud_http(), dmi_dir=tmp_path, clock=lambda: now[0])
        (first,) = await keychain.aresolve(image, Deadline.after(5))
        now[0] += 800  # (1200 - 60) * 3/4 = 855 seconds: not yet
        assert (await keychain.aresolve(image, Deadline.after(5)))[0] is first
        metadata.access_token = "ya29.renewed"
        now[0] += 100
        (renewed,) = await keychain.aresolve(image, Deadline.after(5))
    assert renewed.password == "ya29.renewed"
    assert len(metadata.token_requests()) == 2
