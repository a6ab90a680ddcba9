"""Azure end to end: ``python -m imagecheck check`` in a pod's shoes (its workload identity
variables and projected token file, or a managed identity behind IMDS) against
``myregistry.azurecr.io:<port>``, a name that resolves here (``NameServer``) to a TLS front
serving what ACR serves on that name: ACR's exchange (the stand-in), ``/oauth2/token`` (the
real registry's token server, which takes only the refresh tokens the exchange issued and
grants pull to the identities with the AcrPull role) and ``/v2/`` (the real registry, in
token mode, on the shared sample storage). Only the credential the flow yields gets in:
without it the registry denies, so ``--cloud-auth off`` is a denial."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.acrfront import AcrTokenServer, RegistryFront
from tests.support.azurecloud import (
    CLIENT_ID,
    IMDS,
    OTHER_CLIENT_ID,
    REGISTRY,
    TENANT,
    ACRExchange,
    AzureAD,
    Mint,
    aad_error,
    federated_token,
    workload_env,
)
from tests.support.clirun import Run
from tests.support.cloudnet import NameServer, make_cloud_tls
from tests.support.cloudstandin import Fault, Reply
from tests.support.endpoint import TOKEN_ISSUER, RegistryEndpoint
from tests.support.pki import make_token_signer
from tests.support.registry import LocalRegistry, TokenAuthSettings

PRIVATE = "private/secret:1.0"


@dataclass
class ACR:
    """``myregistry.azurecr.io`` as served here, and the Azure endpoints of its identities."""

    front: RegistryFront
    exchange: ACRExchange
    token_server: AcrTokenServer
    azure_ad: AzureAD
    imds: IMDS
    cluster: Mint
    names: NameServer
    ca_file: Path
    registry: LocalRegistry

    def ref(self, name: str) -> str:
        return f"{REGISTRY}:{self.front.port}/{name}"

    def clear(self) -> None:
        for server in (self.exchange, self.azure_ad, self.imds):
            server.clear()
        self.token_server.reset()
        self.imds.assigned = (CLIENT_ID,)

    def check(self, home: Path, env: dict[str, str], *args: str) -> Run:
        argv = ["check", "--ca-file", str(self.ca_file), *args]
        return self.names.run_cli(argv, home, env=env)

    def secrets(self, *files: Path) -> list[str]:
        """Every token the runs held: federated, Azure AD's (as the exchange got them), ACR's."""
        sent = [r.form.get("access_token", "") for r in self.exchange.requests]
        return [*(f.read_text() for f in files), *filter(None, sent), *self.exchange.issued]


@pytest.fixture(scope="session")
def _acr(
    registry_binary: str,
    registry_plain: RegistryEndpoint,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ACR]:
    workdir = tmp_path_factory.mktemp("acr")
    tls = make_cloud_tls(workdir / "tls", [REGISTRY])
    signer = make_token_signer(workdir / "signer")
    cluster, aad = Mint(), Mint()
    token_server = AcrTokenServer(signer=signer, service=REGISTRY, pullers=[CLIENT_ID])
    with (
        token_server,
        ACRExchange(None, aad=aad, on_issue=token_server.accept) as exchange,
        RegistryFront(tls.server_context()) as front,
        AzureAD(tls.server_context(), cluster=cluster, aad=aad) as azure_ad,
        IMDS(aad=aad, assigned=[CLIENT_ID]) as imds,
    ):
        settings = TokenAuthSettings(
            realm=f"https://{REGISTRY}:{front.port}/oauth2/token",
            service=REGISTRY,
            issuer=TOKEN_ISSUER,
            rootcertbundle=signer.root_bundle,
        )
        registry = LocalRegistry(
            workdir / "registry",
            storage=registry_plain.registry.storage,
            token=settings,
            binary=registry_binary,
        )
        with registry:
            front.route("/v2/", registry.url + "/")
            front.route("/oauth2/token", token_server.realm.removesuffix("/token"), to="/token")
            front.route("/oauth2/exchange", exchange.url)
            names = NameServer(workdir, (REGISTRY,))
            yield ACR(
                front, exchange, token_server, azure_ad, imds, cluster, names, tls.ca_file, registry
            )


@pytest.fixture
def acr(_acr: ACR) -> ACR:
    _acr.clear()
    return _acr


@pytest.fixture
def token_file(tmp_path: Path, acr: ACR) -> Path:
    """The projected ServiceAccount token, where the workload identity webhook mounts it."""
    path = tmp_path / "azure" / "tokens" / "azure-identity-token"
    path.parent.mkdir(parents=True)
    path.write_text(federated_token(acr.cluster), encoding="ascii")
    return path


def pod_env(acr: ACR, token_file: Path) -> dict[str, str]:
    return workload_env(token_file, AZURE_AUTHORITY_HOST=acr.azure_ad.url)


def assert_no_token(run: Run, secrets: list[str]) -> None:
    for secret in secrets:
        assert secret not in run.stdout
        assert secret not in run.stderr


def test_workload_identity_pulls_from_acr(acr: ACR, token_file: Path, tmp_path: Path) -> None:
    run = acr.check(tmp_path, pod_env(acr, token_file), acr.ref(PRIVATE))
    assert run.code == 0, run.stdout + run.stderr
    assert run.stdout.split()[:2] == ["found", acr.ref(PRIVATE)]
    (asked,) = acr.azure_ad.requests
    assert asked.form["client_assertion"] == token_file.read_text()
    (traded,) = acr.exchange.requests
    assert (traded.form["service"], traded.form["tenant"]) == (REGISTRY, TENANT)
    (refresh,) = acr.exchange.issued
    grants = [r for r in acr.token_server.requests if r.form.get("grant_type")]
    assert grants and all(r.form["refresh_token"] == [refresh] for r in grants)
    assert ("POST", "/oauth2/exchange", 200) in acr.front.seen
    assert_no_token(run, acr.secrets(token_file))


def test_a_missing_tag_is_missing(acr: ACR, token_file: Path, tmp_path: Path) -> None:
    run = acr.check(tmp_path, pod_env(acr, token_file), acr.ref("private/secret:2.0"))
    assert run.code == 1, run.stdout + run.stderr
    assert run.stdout.split()[:2] == ["missing", acr.ref("private/secret:2.0")]
    assert_no_token(run, acr.secrets(token_file))


@pytest.mark.parametrize("how", ["flag", "env"])
def test_without_cloud_auth_the_registry_denies(
    acr: ACR, token_file: Path, tmp_path: Path, how: str
) -> None:
    env = pod_env(acr, token_file)
    args = [acr.ref(PRIVATE)]
    if how == "flag":
        args.insert(0, "--cloud-auth=off")
    else:
        env["IMAGECHECK_CLOUD_AUTH"] = "off"
    run = acr.check(tmp_path, env, *args)
    assert run.code == 3, run.stdout + run.stderr
    assert (acr.azure_ad.requests, acr.exchange.requests) == ([], [])


def test_a_managed_identity_behind_imds_pulls_from_acr(acr: ACR, tmp_path: Path) -> None:
    env = {"AZURE_POD_IDENTITY_AUTHORITY_HOST": acr.imds.url, "AZURE_CLIENT_ID": CLIENT_ID}
    run = acr.check(tmp_path, env, acr.ref(PRIVATE))
    assert run.code == 0, run.stdout + run.stderr
    (asked,) = acr.imds.requests
    assert (asked.param("client_id"), asked.headers["metadata"]) == (CLIENT_ID, "true")
    assert len(acr.exchange.issued) == 1
    assert_no_token(run, acr.secrets())


@pytest.mark.parametrize("identity", ["workload", "imds"])
def test_a_cloud_refusal_is_an_error_naming_the_identity(
    acr: ACR, token_file: Path, tmp_path: Path, identity: str
) -> None:
    if identity == "workload":
        env = pod_env(acr, token_file)
        acr.azure_ad.fail_next(Fault(reply=aad_error(403, "access_denied", 50105, "no role")))
        said = f"refused the AKS workload identity {CLIENT_ID} (tenant {TENANT}): HTTP 403"
    else:
        env = {"AZURE_POD_IDENTITY_AUTHORITY_HOST": acr.imds.url}
        acr.imds.fail_next(Fault(reply=Reply(403, b'{"error": "forbidden"}')))
        said = "refused the VM's default Azure managed identity: HTTP 403: forbidden"
    run = acr.check(tmp_path, env, acr.ref(PRIVATE))
    assert run.code == 4, run.stdout + run.stderr
    assert said in run.stdout + run.stderr
    assert acr.exchange.requests == []
    assert_no_token(run, acr.secrets(token_file))


def test_a_registry_refusal_names_the_identity_and_what_it_needs(acr: ACR, tmp_path: Path) -> None:
    acr.imds.assigned = (CLIENT_ID, OTHER_CLIENT_ID)  # the other one has no AcrPull
    env = {"AZURE_POD_IDENTITY_AUTHORITY_HOST": acr.imds.url, "AZURE_CLIENT_ID": OTHER_CLIENT_ID}
    run = acr.check(tmp_path, env, acr.ref(PRIVATE))
    assert run.code == 3, run.stdout + run.stderr
    assert (
        f"with credentials from the VM's Azure managed identity {OTHER_CLIENT_ID} (instance "
        f"metadata service), which needs the AcrPull role on {REGISTRY} (Container Registry "
        "Repository Reader on a registry with ABAC repository permissions)"
    ) in run.stdout + run.stderr
    assert len(acr.exchange.issued) == 1
    assert_no_token(run, acr.secrets())


def test_without_an_identity_nothing_is_asked(acr: ACR, tmp_path: Path) -> None:
    """The anonymous denial is no verdict: the kubelet would have pulled with the node's
    identity, so the check is an error that says so (the keychain core's rule)."""
    run = acr.check(tmp_path, {}, acr.ref(PRIVATE))
    assert run.code == 4, run.stdout + run.stderr
    assert f"no Azure identity in this process to ask {REGISTRY} with" in run.stdout
    assert (acr.azure_ad.requests, acr.imds.requests, acr.exchange.requests) == ([], [], [])


def test_the_front_relays_what_the_registry_answers(acr: ACR) -> None:
    """The front is the registry as its clients meet it: the challenge, the manifest and a
    blob (streamed through) are what the registry itself answers."""
    pull = [{"type": "repository", "name": "private/secret", "actions": ["pull"]}]
    bearer = {"Authorization": f"Bearer {acr.token_server.issue('someone', pull)}"}
    oci = {"Accept": "application/vnd.oci.image.manifest.v1+json", **bearer}
    verify = ssl.create_default_context(cafile=str(acr.ca_file))
    with (
        httpx.Client(
            base_url=f"https://127.0.0.1:{acr.front.port}", verify=verify, trust_env=False
        ) as front,
        httpx.Client(base_url=acr.registry.url, trust_env=False) as registry,
    ):
        challenge = [client.get("/v2/") for client in (front, registry)]
        manifest = [
            client.get("/v2/private/secret/manifests/1.0", headers=oci)
            for client in (front, registry)
        ]
        layer = json.loads(manifest[1].content)["layers"][0]["digest"]
        blob = [
            client.get(f"/v2/private/secret/blobs/{layer}", headers=bearer)
            for client in (front, registry)
        ]
    for relayed, answered in (challenge, manifest, blob):
        assert relayed.status_code == answered.status_code
        assert relayed.content == answered.content
        for name in ("WWW-Authenticate", "Docker-Content-Digest", "Content-Type", "Content-Length"):
            assert relayed.headers.get_list(name) == answered.headers.get_list(name)
    realm = f'realm="https://{REGISTRY}:{acr.front.port}/oauth2/token"'
    assert challenge[0].status_code == 401
    assert realm in challenge[0].headers["WWW-Authenticate"]
    assert (manifest[0].status_code, blob[0].status_code) == (200, 200)


def test_a_missing_token_file_is_a_usage_error_naming_it(acr: ACR, tmp_path: Path) -> None:
    """As a broken credential provider plugin is: one line, exit 2, before any cloud call."""
    gone = tmp_path / "azure" / "tokens" / "azure-identity-token"
    env = workload_env(gone, AZURE_AUTHORITY_HOST=acr.azure_ad.url)
    run = acr.check(tmp_path, env, acr.ref(PRIVATE))
    assert run.code == 2, run.stdout + run.stderr
    assert run.stderr == (
        f"imagecheck: error: the federated token file (AZURE_FEDERATED_TOKEN_FILE) {gone} "
        "does not exist\n"
    )
    assert (acr.azure_ad.requests, acr.exchange.requests) == ([], [])
