"""Which Azure identity would ask (``imagecheck/authn/cloud/_azure.py``), decided from the
environment and the machine's DMI chassis asset tag, without a request; and the local inputs a
flow reads (the federated token file, the IDs, the endpoint overrides), each refused in one
line that names where it came from and never what it holds. Nothing here reaches a network:
:class:`NoNetwork` fails any request."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn.cloud._azure import AZURE_ASSET_TAG, AzureSource
from imagecheck.authn.cloud._hosts import CloudRegistry, Service
from imagecheck.authn.cloud._http import CloudAnswer, CloudHTTP
from imagecheck.authn.cloud._keychain import CloudKeychain
from imagecheck.errors import CredentialsError
from imagecheck.reference import parse_reference
from tests.support.azurecloud import CLIENT_ID, REGISTRY, TENANT, acr_registry, workload_env

SECRET = "eyJzZWNyZXQ.c2VjcmV0LWZlZGVyYXRlZC10b2tlbg.c2lnbmF0dXJl"


class NoNetwork(CloudHTTP):
    """Counts the requests a source tries, and refuses them."""

    asked: list[str]

    async def send(self, method: str, url: str, **kwargs: Any) -> CloudAnswer:
        self.asked.append(url)
        raise AssertionError(f"no request expected, got {method} {url}")


def no_network() -> NoNetwork:
    http = NoNetwork()
    object.__setattr__(http, "asked", [])
    return http


def acr(host: str = REGISTRY) -> CloudRegistry:
    return acr_registry(host)


@pytest.fixture
def dmi(tmp_path: Path) -> Path:
    """A DMI directory with no chassis asset tag: a machine that is not Azure."""
    path = tmp_path / "dmi"
    path.mkdir()
    return path


def azure_vm(dmi: Path, tag: bytes = AZURE_ASSET_TAG + b"\n") -> Path:
    (dmi / "chassis_asset_tag").write_bytes(tag)
    return dmi


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "azure-identity-token"
    path.write_text(SECRET, encoding="ascii")
    return path


# --- plausibility ---------------------------------------------------------------------------

WI = {
    "AZURE_FEDERATED_TOKEN_FILE": "@file",
    "AZURE_CLIENT_ID": CLIENT_ID,
    "AZURE_TENANT_ID": TENANT,
}
IMDS = {"AZURE_POD_IDENTITY_AUTHORITY_HOST": "http://127.0.0.1:9"}

# (id, environment, Azure's asset tag in DMI, the identity or None)
PLAUSIBILITY: list[tuple[str, dict[str, str], bool, str | None]] = [
    ("nothing", {}, False, None),
    ("workload-identity", WI, False, f"AKS workload identity {CLIENT_ID}"),
    ("workload-identity-before-imds", {**WI, **IMDS}, True, f"AKS workload identity {CLIENT_ID}"),
    ("workload-without-tenant", {**WI, "AZURE_TENANT_ID": ""}, False, None),
    ("workload-without-client", {k: v for k, v in WI.items() if k != "AZURE_CLIENT_ID"}, False,
     None),
    ("workload-without-file", {k: v for k, v in WI.items() if "FILE" not in k}, False, None),
    ("incomplete-workload-on-azure-vm", {**WI, "AZURE_TENANT_ID": ""}, True,
     f"managed identity {CLIENT_ID}"),
    ("client-id-alone", {"AZURE_CLIENT_ID": CLIENT_ID}, False, None),
    ("azure-vm", {}, True, "the VM's default managed identity"),
    ("azure-vm-user-assigned", {"AZURE_CLIENT_ID": CLIENT_ID}, True,
     f"managed identity {CLIENT_ID}"),
    ("imds-override", IMDS, False, "the VM's default managed identity"),
    ("empty-imds-override", {"AZURE_POD_IDENTITY_AUTHORITY_HOST": ""}, False, None),
    ("other-clouds", {"AWS_ROLE_ARN": "arn:aws:iam::1:role/x", "GOOGLE_APPLICATION_CREDENTIALS":
                      "/x.json", "AZURE_CLIENT_SECRET": "s"}, False, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("env", "on_azure", "expected"),
    [case[1:] for case in PLAUSIBILITY],
    ids=[case[0] for case in PLAUSIBILITY],
)
def test_which_identity_would_ask(
    env: dict[str, str], on_azure: bool, expected: str | None, dmi: Path, token_file: Path
) -> None:
    env = {k: str(token_file) if v == "@file" else v for k, v in env.items()}
    source = AzureSource(env, azure_vm(dmi) if on_azure else dmi)
    assert source.identity(acr()) == expected


@pytest.mark.parametrize(
    "tag",
    [b"7783-7084-3265-9085-8269-3286-77", b"7783-7084-3265-9085-8269-3286-77\n", AZURE_ASSET_TAG],
    ids=["bare", "newline", "constant"],
)
def test_azures_asset_tag_makes_imds_plausible(dmi: Path, tag: bytes) -> None:
    assert AzureSource({}, azure_vm(dmi, tag)).identity(acr()) is not None


@pytest.mark.parametrize(
    "tag",
    [b"None\n", b"", b"7783-7084-3265-9085-8269-3286-78\n", b"Microsoft Corporation\n",
     b"x7783-7084-3265-9085-8269-3286-77"],
    ids=["hyper-v", "empty", "one-digit-off", "vendor-not-tag", "prefixed"],
)  # fmt: skip
def test_other_asset_tags_are_not_azure(dmi: Path, tag: bytes) -> None:
    assert AzureSource({}, azure_vm(dmi, tag)).identity(acr()) is None


def test_an_unreadable_asset_tag_is_not_azure_and_does_not_block(dmi: Path) -> None:
    os.mkfifo(dmi / "chassis_asset_tag")  # opening a FIFO to read would wait for a writer
    assert AzureSource({}, dmi).identity(acr()) is None
    assert AzureSource({}, dmi / "missing").identity(acr()) is None


def test_the_asset_tag_is_read_once(dmi: Path) -> None:
    source = AzureSource({}, azure_vm(dmi))
    (dmi / "chassis_asset_tag").unlink()
    assert source.identity(acr()) is not None


def implausible_keychain(dmi: Path, http: CloudHTTP, env: dict[str, str]) -> CloudKeychain:
    return CloudKeychain(env, http=http, dmi_dir=dmi)


@pytest.mark.parametrize(
    "env", [{}, {"AZURE_CLIENT_ID": CLIENT_ID}, {**WI, "AZURE_TENANT_ID": ""}], ids=str
)
def test_no_identity_sends_nothing_and_offers_nothing(dmi: Path, env: dict[str, str]) -> None:
    http = no_network()
    keychain = CloudKeychain(env, http=http, dmi_dir=dmi)
    found = asyncio.run(keychain.aresolve(parse_reference(f"{REGISTRY}/app:1"), Deadline.after(5)))
    assert found == ()
    assert http.asked == []


LOOK_ALIKES = [
    f"{REGISTRY}.evil.test",
    "myregistryazurecr.io",
    "evil-azurecr.io",
    "MyRegistry.azurecr.io",
    "myregistry.azurecr.com",
    "abc.azurecr.io",  # a registry name is 5 to 50 characters
    "my-registry.azurecr.io",  # letters and digits only
    "a.myregistry.azurecr.io",
]


@pytest.mark.parametrize("host", LOOK_ALIKES)
def test_look_alike_hosts_get_nothing(host: str, dmi: Path, token_file: Path) -> None:
    http = no_network()
    keychain = CloudKeychain(workload_env(token_file), http=http, dmi_dir=azure_vm(dmi))
    found = asyncio.run(keychain.aresolve(parse_reference(f"{host}/app:1"), Deadline.after(5)))
    assert found == ()
    assert http.asked == []


# --- local inputs, refused before any request ------------------------------------------------


def run(source: AzureSource, host: str = REGISTRY) -> None:
    asyncio.run(source.token(acr(host), no_network(), Deadline.after(5)))


def refused(source: AzureSource) -> str:
    with pytest.raises(CredentialsError) as caught:
        run(source)
    message = str(caught.value)
    assert "\n" not in message
    assert SECRET not in message
    return message


def test_a_missing_token_file_is_named(tmp_path: Path, dmi: Path) -> None:
    missing = tmp_path / "gone"
    message = refused(AzureSource(workload_env(missing), dmi))
    assert (
        message == f"the federated token file (AZURE_FEDERATED_TOKEN_FILE) {missing} does not exist"
    )


def test_a_fifo_token_file_is_refused_without_waiting(tmp_path: Path, dmi: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    message = refused(AzureSource(workload_env(fifo), dmi))
    assert message.endswith(f"{fifo}: a FIFO, not a regular file")
    assert "AZURE_FEDERATED_TOKEN_FILE" in message


def test_a_huge_token_file_is_refused(token_file: Path, dmi: Path) -> None:
    token_file.write_text(SECRET + "A" * (64 * 1024), encoding="ascii")
    message = refused(AzureSource(workload_env(token_file), dmi))
    assert message.endswith(f"{token_file}: larger than 64 KiB")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "is empty"),
        (b" \n", "is empty"),
        (SECRET.encode() + b".extra", "does not hold a JWT (three base64url parts)"),
        (SECRET.replace(".", "").encode(), "does not hold a JWT (three base64url parts)"),
        (b"Bearer " + SECRET.encode(), "does not hold a JWT (three base64url parts)"),
        (SECRET.encode() + b"\xff", "does not hold a JWT (three base64url parts)"),
        (b'{"token": "' + SECRET.encode() + b'"}', "does not hold a JWT (three base64url parts)"),
    ],
    ids=["empty", "blank", "four-parts", "one-part", "scheme", "binary", "json"],
)
def test_a_malformed_token_file_is_refused(
    token_file: Path, dmi: Path, content: bytes, problem: str
) -> None:
    token_file.write_bytes(content)
    message = refused(AzureSource(workload_env(token_file), dmi))
    assert (
        message == f"the federated token file (AZURE_FEDERATED_TOKEN_FILE) {token_file} {problem}"
    )


BAD_VALUES = [
    ("AZURE_CLIENT_ID", "not-a-guid", "AZURE_CLIENT_ID is not a client ID (a GUID)"),
    ("AZURE_CLIENT_ID", f"{CLIENT_ID}/../x", "AZURE_CLIENT_ID is not a client ID (a GUID)"),
    ("AZURE_TENANT_ID", "../../evil.test/x", "AZURE_TENANT_ID is not a tenant ID (a GUID or a "
     "domain name)"),
    ("AZURE_TENANT_ID", "contoso", "AZURE_TENANT_ID is not a tenant ID (a GUID or a domain name)"),
    ("AZURE_TENANT_ID", f"{TENANT}?x=1", "AZURE_TENANT_ID is not a tenant ID (a GUID or a domain "
     "name)"),
    ("AZURE_AUTHORITY_HOST", "http://login.microsoftonline.com", "AZURE_AUTHORITY_HOST is not an "
     "https URL"),
    ("AZURE_AUTHORITY_HOST", "https://user:pw@login.microsoftonline.com", "AZURE_AUTHORITY_HOST "
     "is not an https URL"),
    ("AZURE_AUTHORITY_HOST", "https://login.microsoftonline.com:99999", "AZURE_AUTHORITY_HOST is "
     "not an https URL"),
    ("AZURE_AUTHORITY_HOST", "https://login.microsoftonline.com/?x#y", "AZURE_AUTHORITY_HOST is "
     "not an https URL"),
    ("AZURE_AUTHORITY_HOST", "https://", "AZURE_AUTHORITY_HOST is not an https URL"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "value", "expected"), BAD_VALUES)
def test_bad_workload_values_are_named_not_shown(
    token_file: Path, dmi: Path, name: str, value: str, expected: str
) -> None:
    assert refused(AzureSource(workload_env(token_file, **{name: value}), dmi)) == expected


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"AZURE_POD_IDENTITY_AUTHORITY_HOST": "169.254.169.254"},
         "AZURE_POD_IDENTITY_AUTHORITY_HOST is not an http or https URL"),
        ({"AZURE_POD_IDENTITY_AUTHORITY_HOST": "file:///etc/passwd"},
         "AZURE_POD_IDENTITY_AUTHORITY_HOST is not an http or https URL"),
        ({"AZURE_POD_IDENTITY_AUTHORITY_HOST": "http://a@169.254.169.254"},
         "AZURE_POD_IDENTITY_AUTHORITY_HOST is not an http or https URL"),
        ({"AZURE_POD_IDENTITY_AUTHORITY_HOST": "http://169.254.169.254", "AZURE_CLIENT_ID": "me"},
         "AZURE_CLIENT_ID is not a client ID (a GUID)"),
    ],
    ids=["no-scheme", "file", "userinfo", "client-id"],
)  # fmt: skip
def test_bad_managed_identity_values_are_named(
    dmi: Path, env: dict[str, str], expected: str
) -> None:
    assert refused(AzureSource(env, dmi)) == expected


def test_a_suffix_with_no_known_cloud_gets_nothing(dmi: Path, token_file: Path) -> None:
    odd = CloudRegistry(Service.ACR, "myregistry.azurecr.zz", dns_suffix="azurecr.zz")
    assert AzureSource(workload_env(token_file), dmi).identity(odd) is None
