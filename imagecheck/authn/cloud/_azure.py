"""Registry credentials for Azure Container Registry from the Azure identity the pod has, as
the kubelet's ``acr-credential-provider`` and ``az acr login`` get them: an Azure AD access
token (``_azuread.py``), exchanged at the registry for an ACR refresh token.

**Which identity, without a request** (:meth:`AzureSource.identity`), in the order of
azure-identity's ``DefaultAzureCredential`` (workload identity before managed identity):

1. *AKS workload identity*: ``AZURE_FEDERATED_TOKEN_FILE``, ``AZURE_CLIENT_ID`` and
   ``AZURE_TENANT_ID`` all set, as the workload identity webhook sets them. The file is read
   when the flow runs, not here: a pod that says it has the identity and lacks the file is a
   one-line error naming the file, not a silent anonymous pull;
2. *a managed identity through IMDS*: only when this is plausibly an Azure VM, that is
   ``AZURE_POD_IDENTITY_AUTHORITY_HOST`` is set (the SDKs' IMDS override), or the machine's
   DMI chassis asset tag (``chassis_asset_tag``, world-readable) is Azure's
   ``7783-7084-3265-9085-8269-3286-77``, as cloud-init tells an Azure VM from another
   Hyper-V guest (``cloudinit/sources/azure/identity.py``, ``ChassisAssetTag``). The tag is
   read once, when the source is made. ``AZURE_CLIENT_ID``, when set, names a user-assigned
   identity;

otherwise None, and the keychain answers nothing: no metadata server is probed off Azure. App
Service and Arc (``IDENTITY_ENDPOINT`` + ``IDENTITY_HEADER``) and service principal secrets
(``AZURE_CLIENT_SECRET``) are left out: neither is how a Kubernetes pod gets an identity.

**Endpoints**, fixed by the registry's cloud (its host suffix: ``_CLOUDS`` holds each one's
Azure AD authority and token audience) and overridable only by the variables the Azure SDKs
honour, never by anything a registry sends: ``AZURE_AUTHORITY_HOST`` replaces the authority
(``https://login.microsoftonline.com`` for ``azurecr.io``), ``AZURE_POD_IDENTITY_AUTHORITY_HOST``
the IMDS base ``http://169.254.169.254``. The audience is ACR's own
(``https://containerregistry.azure.net`` on the public cloud), which a registry accepts even
with "authentication as ARM" disabled, where an ARM-audience token is refused
(https://learn.microsoft.com/en-us/azure/container-registry/container-registry-disable-authentication-as-arm;
``AcrAudience`` in cloud-provider-azure's ``pkg/credentialprovider/azure_credentials.go``).
Azure Germany closed in 2021 and never documented an ACR audience: its ARM audience stands in.

**The exchange** (https://github.com/Azure/acr/blob/main/docs/AAD-OAuth.md, "Calling POST
/oauth2/exchange"): a form POST to ``https://<registry host[:port]>/oauth2/exchange`` itself,
not to a realm a challenge names, with ``grant_type=access_token``, ``service=<registry
host>``, ``tenant`` (the workload identity's, or the access token's ``tid`` claim) and
``access_token``, answered ``{"refresh_token": "<JWT>"}``. The credential is that refresh
token as an identity token, with the null GUID as user name (the same document, "Authenticating
docker with an ACR refresh token"): the registry client trades it at the realm for access
tokens, as ``docker`` does.

**Cache and lifetime**: one credential per registry address (a refresh token's audience is one
registry), kept for the refresh token's ``exp`` claim (read without checking its signature:
only its expiry is wanted, and TLS vouched for the sender), three hours when it has none.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagecheck._capped import parse_json_object
from imagecheck._deadline import Deadline
from imagecheck._files import read_regular_file
from imagecheck._text import printable, redact
from imagecheck.authn._credentials import Credentials, bearer_problem
from imagecheck.authn.cloud._azuread import (
    FEDERATED_TOKEN_FILE,
    ManagedIdentity,
    WorkloadIdentity,
    error_document,
    imds_token,
    oauth_detail,
    post_form,
    workload_token,
)
from imagecheck.authn.cloud._hosts import CloudRegistry
from imagecheck.authn.cloud._http import CloudHTTP, answer_reason, temporary_status
from imagecheck.authn.cloud._keychain import CloudSource, CloudToken
from imagecheck.errors import CloudAuthError, CredentialsError

CLIENT_ID = "AZURE_CLIENT_ID"
TENANT_ID = "AZURE_TENANT_ID"
AUTHORITY_HOST = "AZURE_AUTHORITY_HOST"
IMDS_HOST = "AZURE_POD_IDENTITY_AUTHORITY_HOST"
DEFAULT_IMDS = "http://169.254.169.254"
AZURE_ASSET_TAG = b"7783-7084-3265-9085-8269-3286-77"
# ACR's user name for a refresh token ("the null GUID tells the registry it is one").
NULL_USERNAME = "00000000-0000-0000-0000-000000000000"
# ACR refresh tokens live three hours; the lifetime when one carries no exp claim.
DEFAULT_LIFETIME = 3 * 3600.0
# A sysfs attribute says 4096 bytes whatever it holds.
MAX_DMI_FILE = 4096


@dataclass(frozen=True, slots=True)
class _Cloud:
    authority: str
    audience: str


_CLOUDS = {
    "azurecr.io": _Cloud(
        "https://login.microsoftonline.com", "https://containerregistry.azure.net"
    ),
    "azurecr.us": _Cloud("https://login.microsoftonline.us", "https://containerregistry.azure.us"),
    "azurecr.cn": _Cloud("https://login.chinacloudapi.cn", "https://containerregistry.azure.cn"),
    # An audience ending in "/" gives the scope "<audience>/.default", double slash and all.
    "azurecr.de": _Cloud(
        "https://login.microsoftonline.de", "https://management.core.cloudapi.de/"
    ),
}
_GUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_DOMAIN = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}")


class AzureSource:
    """The Azure identity of this process as a
    :class:`~imagecheck.authn.cloud._keychain.CloudSource` (see the module docstring).
    ``clock`` is the wall clock a token's ``exp`` is read on."""

    def __init__(
        self, env: Mapping[str, str], dmi_dir: Path, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._env = dict(env)
        self._clock = clock
        self._kind = _plausible(self._env, dmi_dir)

    def identity(self, registry: CloudRegistry) -> str | None:
        if self._kind is None or registry.dns_suffix not in _CLOUDS:
            return None
        client = printable(self._env.get(CLIENT_ID, ""), 64)
        if self._kind == "workload":
            return f"AKS workload identity {client}"
        return f"managed identity {client}" if client else "the VM's default managed identity"

    def cache_key(self, registry: CloudRegistry) -> str:
        return registry.address

    async def token(
        self, registry: CloudRegistry, http: CloudHTTP, deadline: Deadline
    ) -> CloudToken:
        cloud = _CLOUDS[registry.dns_suffix]
        tenant: str | None
        if self._kind == "workload":
            who = self._workload(cloud)
            label = f"the AKS workload identity {who.client_id} (tenant {who.tenant})"
            aad = await workload_token(who, cloud.audience, label, http, deadline)
            tenant = who.tenant
            source = (
                f"the pod's Azure identity {who.client_id} (AKS workload identity, tenant {tenant})"
            )
        else:
            managed = self._managed()
            label = _managed_label(managed)
            aad = await imds_token(managed, cloud.audience, label, http, deadline)
            tenant = _tenant_claim(aad)
            source = f"{label} (instance metadata service)"
        refresh, what = await _exchange(registry, aad, tenant, label, http, deadline)
        credentials = Credentials(
            username=NULL_USERNAME,
            identity_token=refresh,
            source=f"{source}, which needs {needs(registry)}",
        )
        return CloudToken(credentials, self._lifetime(refresh, what))

    def _workload(self, cloud: _Cloud) -> WorkloadIdentity:
        authority = self._env.get(AUTHORITY_HOST, "")
        return WorkloadIdentity(
            client_id=_client_id(self._env[CLIENT_ID]),
            tenant=_tenant(self._env[TENANT_ID]),
            token_file=Path(self._env[FEDERATED_TOKEN_FILE]),
            authority=_base_url(authority, AUTHORITY_HOST, ("https",))
            if authority
            else cloud.authority,
        )

    def _managed(self) -> ManagedIdentity:
        client = self._env.get(CLIENT_ID, "")
        imds = self._env.get(IMDS_HOST, "")
        return ManagedIdentity(
            client_id=_client_id(client) if client else None,
            imds=_base_url(imds, IMDS_HOST, ("http", "https")) if imds else DEFAULT_IMDS,
        )

    def _lifetime(self, refresh: str, what: str) -> float:
        exp = _number(jwt_claims(refresh).get("exp"))
        if exp is None:
            return DEFAULT_LIFETIME
        left = exp - self._clock()
        if left <= 0:
            raise CloudAuthError(
                f"{what} answered a refresh token that has already expired (its exp claim):"
                " is this machine's clock right?"
            )
        return left


def source(env: Mapping[str, str], dmi_dir: Path) -> CloudSource:
    """The Azure source ``_keychain._SOURCES`` names: see the module docstring."""
    return AzureSource(env, dmi_dir)


def _plausible(env: Mapping[str, str], dmi_dir: Path) -> str | None:
    """Which identity would ask, "workload" or "imds", or None (the module docstring's rule)."""
    if all(env.get(name) for name in (FEDERATED_TOKEN_FILE, CLIENT_ID, TENANT_ID)):
        return "workload"
    if env.get(IMDS_HOST) or _azure_vm(dmi_dir):
        return "imds"
    return None


def _azure_vm(dmi_dir: Path) -> bool:
    """Whether the DMI chassis asset tag is Azure's. Unreadable (no DMI, a container without
    sysfs, not a regular file) is not Azure."""
    path = dmi_dir / "chassis_asset_tag"
    try:
        tag = read_regular_file(path, limit=MAX_DMI_FILE, what="DMI", error=CredentialsError)
    except CredentialsError:
        return False
    return tag.strip() == AZURE_ASSET_TAG


async def _exchange(
    registry: CloudRegistry,
    aad_token: str,
    tenant: str | None,
    label: str,
    http: CloudHTTP,
    deadline: Deadline,
) -> tuple[str, str]:
    """ACR's refresh token for ``aad_token``, and the name of the endpoint that gave it."""
    url = f"https://{registry.address}/oauth2/exchange"
    what = f"ACR's token exchange at {url}"
    form = {"grant_type": "access_token", "service": registry.host, "access_token": aad_token}
    if tenant:
        form["tenant"] = tenant
    answer = await post_form(http, url, form, what, deadline)
    if answer.status != 200:
        detail = redact(oauth_detail(error_document(answer)), [aad_token])
        hint = f"; it needs {needs(registry)}" if answer.status in (401, 403) else ""
        raise CloudAuthError(
            f"{what} refused the Azure AD token of {label}: {answer_reason(answer, detail)}{hint}",
            temporary=temporary_status(answer.status),
        )
    doc = parse_json_object(answer.body, f"the answer of {what}", error=CloudAuthError)
    refresh = doc.get("refresh_token")
    if not isinstance(refresh, str) or not refresh or bearer_problem(refresh):
        raise CloudAuthError(f"{what} answered no usable refresh_token")
    return refresh, what


def needs(registry: CloudRegistry) -> str:
    """What an identity needs to pull from ``registry``: AcrPull, which a registry with ABAC
    repository permissions does not honour (https://learn.microsoft.com/en-us/azure/
    container-registry/container-registry-rbac-abac-repository-permissions)."""
    return (
        f"the AcrPull role on {registry.host} (Container Registry Repository Reader on a "
        "registry with ABAC repository permissions)"
    )


def _managed_label(who: ManagedIdentity) -> str:
    if who.client_id:
        return f"the VM's Azure managed identity {who.client_id}"
    return "the VM's default Azure managed identity"


def _client_id(value: str) -> str:
    if not _GUID.fullmatch(value):
        raise CredentialsError(f"{CLIENT_ID} is not a client ID (a GUID)")
    return value


def _tenant(value: str) -> str:
    if not (_GUID.fullmatch(value) or _DOMAIN.fullmatch(value)):
        raise CredentialsError(f"{TENANT_ID} is not a tenant ID (a GUID or a domain name)")
    return value


def _base_url(value: str, name: str, schemes: tuple[str, ...]) -> str:
    """``value`` as a base URL without a trailing slash: a scheme of ``schemes`` (a bare host
    is https where only https is, as azure-identity reads an authority), a host, no
    credentials, query or fragment."""
    text = value.strip()
    if "://" not in text and schemes == ("https",):
        text = "https://" + text
    wanted = " or ".join(schemes)
    problem = CredentialsError(f"{name} is not an {wanted} URL")
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        raise problem from None
    if parts.scheme not in schemes or not parts.hostname or "@" in parts.netloc:
        raise problem
    if parts.query or parts.fragment or any(ch.isspace() for ch in text):
        raise problem
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def _tenant_claim(token: str) -> str | None:
    """The tenant an access token was issued in (its ``tid`` claim), when it is a GUID."""
    tid = jwt_claims(token).get("tid")
    return tid if isinstance(tid, str) and _GUID.fullmatch(tid) else None


def jwt_claims(token: str) -> dict[str, Any]:
    """A JWT's payload, unverified (see the module docstring); {} when ``token`` is not a JWT.
    Bounded by the token's own size, which the capped answer it came in bounds."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        raw = base64.urlsafe_b64decode(payload)
        return parse_json_object(raw, "a JWT's payload", error=CloudAuthError)
    except (binascii.Error, ValueError, CloudAuthError):
        return {}


def _number(value: object) -> float | None:
    """A JSON number as a finite float, or None (a bool, a string, 1e999, a 400-digit int)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
