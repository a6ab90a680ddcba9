"""The Google cloud source end to end: ``python -m imagecheck check`` as a pod runs it, under
``us-docker.pkg.dev:<port>`` and ``gcr.io:<port>`` (resolved to loopback in a private mount
namespace, ``tests/support/cloudnet.py``), with the identity a pod has (``GCE_METADATA_HOST``
for GKE Workload Identity's metadata server; ``GOOGLE_APPLICATION_CREDENTIALS`` and a
projected token file for workload identity federation, with and without impersonation), the
Google stand-ins, and the real registry in token mode whose token server knows exactly one
user: ``oauth2accesstoken`` with the access token the flow under test yields.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.clirun import Run
from tests.support.cloudstandin import Fault
from tests.support.endpoint import RegistryEndpoint
from tests.support.googlecloud import (
    GOOGLE_HOSTS,
    SERVICE_ACCOUNT,
    GoogleRegistry,
    GoogleSTS,
    IAMCredentials,
    MetadataServer,
    google_error,
    google_registry,
    metadata_reply,
    subject_jwt,
    write_external_account,
)

FOUND = "private/secret:1.0"
MISSING = "private/secret:9.9.9"
NEEDS = "which needs roles/artifactregistry.reader on the repository"


@pytest.fixture(scope="module")
def google_site(
    registry_binary: str,
    registry_plain: RegistryEndpoint,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GoogleRegistry]:
    work = tmp_path_factory.mktemp("google-registry")
    with google_registry(work, registry_plain.registry.storage, registry_binary) as site:
        yield site


@pytest.fixture(scope="module")
def stand_ins(
    google_site: GoogleRegistry,
) -> Iterator[tuple[MetadataServer, GoogleSTS, IAMCredentials]]:
    context = google_site.tls.server_context()
    with (
        MetadataServer() as metadata,
        GoogleSTS(context) as sts,
        IAMCredentials(context, sts) as iam,
    ):
        yield metadata, sts, iam


@dataclass
class Pod:
    """A pod with one Google identity: its environment and files, the token its flow yields,
    and what the messages call it."""

    env: dict[str, str]
    token: str
    identity: str
    metadata: MetadataServer
    sts: GoogleSTS
    iam: IAMCredentials
    token_file: Path | None = None

    def secrets(self) -> list[str]:
        tokens = [self.metadata.access_token, self.sts.access_token, self.iam.access_token]
        if self.token_file is not None and self.token_file.exists():
            tokens.append(self.token_file.read_text())
        return [token for token in tokens if token.strip()]


@pytest.fixture(params=["metadata", "federation", "impersonation"])
def pod(
    request: pytest.FixtureRequest,
    google_site: GoogleRegistry,
    stand_ins: tuple[MetadataServer, GoogleSTS, IAMCredentials],
    tmp_path: Path,
) -> Pod:
    """The pod for the flow asked for; the registry accepts exactly that flow's token."""
    metadata, sts, iam = stand_ins
    for stand_in in stand_ins:
        stand_in.reset()
    if request.param == "metadata":
        env = {"GCE_METADATA_HOST": metadata.host, "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
        found = Pod(env, metadata.access_token, SERVICE_ACCOUNT, metadata, sts, iam)
    else:
        token_file = tmp_path / "var/run/secrets/tokens/gcp-ksa/token"
        token_file.parent.mkdir(parents=True)
        token_file.write_text(subject_jwt())
        url = iam.impersonation_url() if request.param == "impersonation" else None
        config = write_external_account(
            tmp_path / "etc/workload-identity/credential-configuration.json",
            token_url=sts.token_url,
            token_file=token_file,
            impersonation_url=url,
        )
        env = {"GOOGLE_APPLICATION_CREDENTIALS": str(config)}
        token, identity = (iam.access_token, SERVICE_ACCOUNT) if url else (sts.access_token, "")
        identity = identity or f"federated from {token_file}"
        found = Pod(env, token, identity, metadata, sts, iam, token_file)
    google_site.accept_only(found.token)
    return found


def check(
    registry: GoogleRegistry, pod: Pod, home: Path, *images: str, env: dict[str, str] | None = None
) -> Run:
    args = ["check", "--ca-file", str(registry.tls.ca_file), "--retries", "0", *images]
    run = registry.names.run_cli(args, home, env={**pod.env, **(env or {})})
    for secret in pod.secrets():
        assert secret not in run.stdout + run.stderr
    return run


def test_found_under_both_names_with_one_flow(
    google_site: GoogleRegistry, pod: Pod, tmp_path: Path
) -> None:
    images = [google_site.ref(FOUND, host) for host in GOOGLE_HOSTS]
    run = check(google_site, pod, tmp_path, *images)
    assert run.code == 0, run.stdout + run.stderr
    assert run.stdout.count("found ") == 2
    # One access token for every Google registry: one flow for both names.
    assert len(pod.metadata.token_requests()) == (1 if "GCE_METADATA_HOST" in pod.env else 0)
    assert len(pod.sts.requests) == (0 if "GCE_METADATA_HOST" in pod.env else 1)
    users = {r.headers.get("authorization", "")[:6] for r in google_site.token_server.requests}
    assert users == {"Basic "}


def test_a_missing_tag_exits_1(google_site: GoogleRegistry, pod: Pod, tmp_path: Path) -> None:
    run = check(google_site, pod, tmp_path, google_site.ref(MISSING, "gcr.io"))
    assert run.code == 1, run.stdout + run.stderr
    assert run.stdout.startswith("missing ")


@pytest.mark.parametrize("how", ["flag", "env"])
def test_cloud_auth_off_is_anonymous_so_denied(
    google_site: GoogleRegistry, pod: Pod, tmp_path: Path, how: str
) -> None:
    image = google_site.ref(FOUND)
    if how == "flag":
        run = check(google_site, pod, tmp_path, "--cloud-auth", "off", image)
    else:
        run = check(google_site, pod, tmp_path, image, env={"IMAGECHECK_CLOUD_AUTH": "off"})
    assert run.code == 3, run.stdout + run.stderr
    assert "anonymously" in run.stdout
    assert pod.metadata.requests == [] and pod.sts.requests == []


def test_a_refusal_by_the_cloud_is_an_error_naming_the_identity(
    google_site: GoogleRegistry, pod: Pod, tmp_path: Path
) -> None:
    if "GCE_METADATA_HOST" in pod.env:
        pod.metadata.fail_next(Fault(reply=metadata_reply(403, b"Forbidden")), times=5)
        said = "GKE metadata server at http://127.0.0.1:"
        named = "gave no token for the default service account (HTTP 403: Forbidden)"
    elif pod.identity == SERVICE_ACCOUNT:
        denied = google_error(403, "PERMISSION_DENIED", "Permission denied.")
        pod.iam.fail_next(Fault(reply=denied), times=5)
        said = f"impersonate {SERVICE_ACCOUNT} (HTTP 403: PERMISSION_DENIED"
        named = "roles/iam.workloadIdentityUser"
    else:
        assert pod.token_file is not None
        pod.token_file.write_text(subject_jwt(lifetime=-60))
        said = f"gave no token for the subject token in {pod.token_file}"
        named = "HTTP 400: invalid_grant"
    run = check(google_site, pod, tmp_path, google_site.ref(FOUND))
    assert run.code == 4, run.stdout + run.stderr
    assert said in run.stdout and named in run.stdout
    assert google_site.token_server.requests == []  # nothing reached the registry's side


def test_a_refusal_by_the_registry_names_the_identity_and_what_it_needs(
    google_site: GoogleRegistry, pod: Pod, tmp_path: Path
) -> None:
    google_site.token_server.users = {"oauth2accesstoken": secrets.token_urlsafe(16)}
    run = check(google_site, pod, tmp_path, google_site.ref(FOUND))
    assert run.code == 3, run.stdout + run.stderr
    assert f"refused credentials from the pod's Google identity {pod.identity}" in run.stdout
    assert NEEDS in run.stdout


@pytest.mark.parametrize("pod", ["federation"], indirect=True)
def test_an_unusable_token_file_is_a_usage_error_naming_it(
    google_site: GoogleRegistry, pod: Pod, tmp_path: Path
) -> None:
    assert pod.token_file is not None
    pod.token_file.write_text("")
    run = check(google_site, pod, tmp_path, google_site.ref(FOUND))
    assert run.code == 2, run.stdout + run.stderr
    assert f"the subject token file {pod.token_file} holds no token" in run.stderr
    assert pod.sts.requests == []
