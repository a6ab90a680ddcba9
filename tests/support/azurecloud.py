"""Stand-ins for the Azure endpoints the ACR credential flow speaks (``imagecheck/authn/
_azure.py``, ``_azuread.py``), each a :class:`~tests.support.cloudstandin.CloudStandIn`
answering as its documentation says, and checking what it is sent as the real one does:

* :class:`AzureAD`, the Microsoft identity platform's token endpoint over HTTPS, for the
  client credentials grant with a federated credential: it checks the tenant, the client,
  the grant, the scope, and the assertion (signed by the cluster's issuer, for the audience
  ``api://AzureADTokenExchange``, the subject its federated credential names, within its
  time range: ``AADSTS700024`` otherwise). Errors carry ``error``, ``error_description``
  (with the trace and correlation lines Azure AD adds) and ``error_codes``.
  https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-client-creds-grant-flow#third-case-access-token-request-with-a-federated-credential,
  https://learn.microsoft.com/en-us/entra/identity-platform/reference-error-codes
* :class:`IMDS`, the instance metadata service's managed identity endpoint over plain HTTP:
  ``Metadata: true`` required, an ``X-Forwarded-For`` refused, ``api-version`` and
  ``resource`` required, a user-assigned identity chosen by ``client_id`` (required when
  there are several and no system-assigned one); ``expires_in`` and ``expires_on`` are strings.
  https://learn.microsoft.com/en-us/entra/identity/managed-identities-azure-resources/how-to-use-vm-token#get-a-token-using-http,
  https://learn.microsoft.com/en-us/azure/virtual-machines/instance-metadata-service (no
  ``X-Forwarded-For``; its error text here is made up)
* :class:`ACRExchange`, ACR's ``POST /oauth2/exchange``: ``grant_type=access_token``, the
  registry's name as ``service``, an Azure AD access token for ACR's audience (signed by the
  stand-ins' Azure AD, unexpired, of the ``tenant`` given), answered ``{"refresh_token"}``, a
  JWT with ACR's refresh token claims. Refusals use the registry's ``{"errors": [...]}`` shape.
  https://github.com/Azure/acr/blob/main/docs/AAD-OAuth.md

The registry side (ACR's ``/oauth2/token`` and the front serving all of it on the registry's
name) is ``tests/support/acrfront.py``.

The tokens they hand each other are JWTs signed by a :class:`Mint`: one for the cluster's
ServiceAccount issuer (:func:`federated_token`), one for Azure AD.
"""

from __future__ import annotations

import json
import re
import secrets
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jwt
import pytest

from imagecheck.authn.cloud._hosts import CloudRegistry, cloud_registry
from tests.support.cloudstandin import CloudStandIn, Received, Reply

TENANT = "0d5a2c1e-7b0e-4c3f-9a51-3f6f2b8e41aa"
CLIENT_ID = "5f1a0b8c-2d4e-4f60-8a7b-9c0d1e2f3a4b"
OTHER_CLIENT_ID = "a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"
SUBJECT = "system:serviceaccount:apps:puller"
ISSUER = "https://oidc.prod-aks.azure.test/cluster/"
EXCHANGE_AUDIENCE = "api://AzureADTokenExchange"
ACR_AUDIENCE = "https://containerregistry.azure.net"
JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
IMDS_PATH = "/metadata/identity/oauth2/token"
REGISTRY = "myregistry.azurecr.io"
_AAD_PATH = re.compile(r"/([^/]+)/oauth2/v2\.0/token")


class Mint:
    """Signs JWTs with a key of its own (HS256) and checks the ones it signed."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self._key, algorithm="HS256")

    def check(self, token: str, audience: str | Iterable[str]) -> dict[str, Any]:
        """The claims of ``token``; ``jwt.InvalidTokenError`` (expired, not yet valid, another
        audience, another key) otherwise."""
        claims: dict[str, Any] = jwt.decode(
            token, self._key, algorithms=["HS256"], audience=audience
        )
        return claims


def federated_token(
    issuer: Mint, *, subject: str = SUBJECT, lifetime: int = 3600, start: float | None = None
) -> str:
    """A projected ServiceAccount token as AKS mounts it for workload identity."""
    now = int(time.time() if start is None else start)
    return issuer.sign(
        {
            "iss": ISSUER,
            "sub": subject,
            "aud": [EXCHANGE_AUDIENCE],
            "iat": now,
            "nbf": now,
            "exp": now + lifetime,
            "kubernetes.io": {"namespace": "apps", "serviceaccount": {"name": "puller"}},
        }
    )


def workload_env(token_file: Path, **extra: str) -> dict[str, str]:
    """The variables AKS's workload identity webhook gives a pod, and ``extra``."""
    return {
        "AZURE_FEDERATED_TOKEN_FILE": str(token_file),
        "AZURE_CLIENT_ID": CLIENT_ID,
        "AZURE_TENANT_ID": TENANT,
        **extra,
    }


def acr_registry(host: str) -> CloudRegistry:
    """``host`` (``name[:port]``) classified, as the keychain hands it to the source."""
    found = cloud_registry(host)
    assert found is not None, host
    return found


def _json(status: int, body: dict[str, Any]) -> Reply:
    return Reply(status, json.dumps(body).encode(), {"Content-Type": "application/json"})


def aad_error(status: int, error: str, code: int, description: str) -> Reply:
    """An error as Azure AD words it, trace and correlation lines included."""
    trace, correlation = uuid.uuid4(), uuid.uuid4()
    stamp = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())
    return _json(
        status,
        {
            "error": error,
            "error_description": f"AADSTS{code}: {description}\r\nTrace ID: {trace}\r\n"
            f"Correlation ID: {correlation}\r\nTimestamp: {stamp}",
            "error_codes": [code],
            "timestamp": stamp,
            "trace_id": str(trace),
            "correlation_id": str(correlation),
        },
    )


def access_claims(audience: str, tenant: str, client_id: str, lifetime: int) -> dict[str, Any]:
    """An Azure AD access token's claims (v1 tokens: ``appid``, ``tid``)."""
    now = int(time.time())
    return {
        "aud": audience,
        "iss": f"https://sts.windows.net/{tenant}/",
        "iat": now,
        "nbf": now,
        "exp": now + lifetime,
        "appid": client_id,
        "oid": str(uuid.uuid5(uuid.NAMESPACE_URL, client_id)),
        "sub": str(uuid.uuid5(uuid.NAMESPACE_URL, client_id)),
        "tid": tenant,
    }


class AzureAD(CloudStandIn):
    """Azure AD's ``/<tenant>/oauth2/v2.0/token`` for one app with one federated credential."""

    def __init__(
        self,
        ssl_context: Any,
        *,
        cluster: Mint,
        aad: Mint,
        tenant: str = TENANT,
        client_id: str = CLIENT_ID,
        subject: str = SUBJECT,
        resources: Iterable[str] = (ACR_AUDIENCE,),
        lifetime: int = 3599,
    ) -> None:
        super().__init__(ssl_context)
        self.cluster, self.aad = cluster, aad
        self.tenant, self.client_id, self.subject = tenant, client_id, subject
        self.resources = frozenset(resources)
        self.lifetime = lifetime

    def answer(self, request: Received) -> Reply:
        match = _AAD_PATH.fullmatch(request.path)
        if request.method != "POST" or match is None:
            return Reply(404, b"")
        form = request.form
        refused = self._refusal(match[1], form)
        if refused is not None:
            return refused
        resource = form["scope"].removesuffix("/.default")
        claims = access_claims(resource, self.tenant, self.client_id, self.lifetime)
        token = self.aad.sign(claims)
        return _json(
            200,
            {
                "token_type": "Bearer",
                "expires_in": self.lifetime,
                "ext_expires_in": self.lifetime,
                "access_token": token,
            },
        )

    def _refusal(self, tenant: str, form: dict[str, str]) -> Reply | None:
        if tenant != self.tenant:
            return aad_error(400, "invalid_request", 90002, f"Tenant '{tenant}' not found.")
        if form.get("grant_type") != "client_credentials":
            return aad_error(
                400, "unsupported_grant_type", 70003, "The app requested an unsupported grant type."
            )
        if form.get("client_assertion_type") != JWT_BEARER or not form.get("client_assertion"):
            return aad_error(
                400,
                "invalid_request",
                7000218,
                "The request body must contain "
                "the following parameter: 'client_assertion' or 'client_secret'.",
            )
        if form.get("client_id") != self.client_id:
            return aad_error(
                400,
                "unauthorized_client",
                700016,
                "Application with identifier "
                f"'{form.get('client_id')}' was not found in the directory.",
            )
        scope = form.get("scope", "")
        if not scope.endswith("/.default") or scope.removesuffix("/.default") not in self.resources:
            return aad_error(
                400,
                "invalid_resource",
                500011,
                f"The resource principal named {scope} was not found in the tenant named {tenant}.",
            )
        return self._assertion_refusal(form["client_assertion"])

    def _assertion_refusal(self, assertion: str) -> Reply | None:
        try:
            claims = self.cluster.check(assertion, EXCHANGE_AUDIENCE)
        except (jwt.ExpiredSignatureError, jwt.ImmatureSignatureError):
            return aad_error(
                400,
                "invalid_client",
                700024,
                "Client assertion is not within its "
                f"valid time range. Current time: {time.time():.0f}.",
            )
        except jwt.InvalidTokenError:
            return aad_error(
                401, "invalid_client", 700027, "Client assertion failed signature validation."
            )
        if claims.get("sub") != self.subject or claims.get("iss") != ISSUER:
            return aad_error(
                400,
                "invalid_client",
                70021,
                "No matching federated identity "
                f"record found for presented assertion subject '{claims.get('sub')}'.",
            )
        return None


class IMDS(CloudStandIn):
    """The managed identity endpoint of one VM: a system-assigned identity (``system``, its
    client id) and user-assigned ones (``assigned``), plain HTTP."""

    def __init__(
        self,
        *,
        aad: Mint,
        system: str | None = None,
        assigned: Iterable[str] = (),
        tenant: str = TENANT,
        lifetime: int = 86399,
    ) -> None:
        super().__init__(None)
        self.aad, self.system, self.assigned = aad, system, tuple(assigned)
        self.tenant, self.lifetime = tenant, lifetime

    def answer(self, request: Received) -> Reply:
        if request.path != IMDS_PATH or request.method != "GET":
            return Reply(404, b"")
        refused = self._refusal(request)
        if refused is not None:
            return refused
        client = self._identity(request.param("client_id"))
        if client is None:
            return _imds_error("invalid_request", self._missing(request.param("client_id")))
        resource = str(request.param("resource"))
        now = int(time.time())
        token = self.aad.sign(access_claims(resource, self.tenant, client, self.lifetime))
        return _json(
            200,
            {
                "access_token": token,
                "client_id": client,
                "expires_in": str(self.lifetime),
                "expires_on": str(now + self.lifetime),
                "ext_expires_in": str(self.lifetime),
                "not_before": str(now),
                "resource": resource,
                "token_type": "Bearer",
            },
        )

    def _refusal(self, request: Received) -> Reply | None:
        if "x-forwarded-for" in request.headers:
            return _imds_error("invalid_request", "Request contains X-Forwarded-For header")
        if request.headers.get("metadata") != "true":
            return _imds_error("invalid_request", "Required metadata header not specified")
        if not request.param("api-version"):
            return _imds_error("invalid_request", "Required query variable api-version missing")
        if not request.param("resource"):
            return _imds_error("invalid_request", "Required audience parameter not specified")
        return None

    def _identity(self, client_id: str | None) -> str | None:
        known = [c for c in (self.system, *self.assigned) if c]
        if client_id is not None:
            return client_id if client_id in known else None
        if self.system is not None:
            return self.system
        return self.assigned[0] if len(self.assigned) == 1 else None

    def _missing(self, client_id: str | None) -> str:
        if client_id is None and len(self.assigned) > 1:
            return (
                "Multiple user assigned identities exist, please specify the clientId / "
                "resourceId of the identity in the token request"
            )
        return "Identity not found"


def _imds_error(error: str, description: str, status: int = 400) -> Reply:
    return _json(status, {"error": error, "error_description": description})


def acr_errors(status: int, code: str, message: str) -> Reply:
    return _json(status, {"errors": [{"code": code, "message": message, "detail": None}]})


class ACRExchange(CloudStandIn):
    """ACR's ``POST /oauth2/exchange`` for the registry ``registry``. Every refresh token it
    issues is handed to ``on_issue(token, identity)`` (the token server's ``accept``)."""

    def __init__(
        self,
        ssl_context: Any,
        *,
        aad: Mint,
        registry: str = REGISTRY,
        audiences: Iterable[str] = (ACR_AUDIENCE,),
        lifetime: int = 3 * 3600,
        on_issue: Callable[[str, str], None] = lambda token, who: None,
    ) -> None:
        super().__init__(ssl_context)
        self.aad, self.registry = aad, registry
        self.audiences = tuple(audiences)
        self.lifetime = lifetime
        self.on_issue = on_issue
        self.issued: list[str] = []

    def clear(self) -> None:
        super().clear()
        self.issued.clear()

    def answer(self, request: Received) -> Reply:
        if request.path != "/oauth2/exchange" or request.method != "POST":
            return acr_errors(404, "NOT_FOUND", "not found")
        form = request.form
        if form.get("grant_type") != "access_token":
            return acr_errors(400, "UNSUPPORTED", "grant_type must be access_token")
        if form.get("service") != self.registry:
            return acr_errors(
                400, "DENIED", f"service {form.get('service')!r} is not this registry"
            )
        try:
            claims = self.aad.check(form.get("access_token", ""), self.audiences)
        except jwt.InvalidTokenError as exc:
            return acr_errors(401, "UNAUTHORIZED", f"invalid AAD access token: {exc}")
        if form.get("tenant", claims["tid"]) != claims["tid"]:
            return acr_errors(401, "UNAUTHORIZED", "the token is not of the tenant given")
        token = self._refresh_token(claims)
        self.issued.append(token)
        self.on_issue(token, claims["appid"])
        return _json(200, {"refresh_token": token})

    def _refresh_token(self, claims: dict[str, Any]) -> str:
        now = int(time.time())
        return self.aad.sign(
            {
                "jti": str(uuid.uuid4()),
                "sub": claims["appid"],
                "nbf": now,
                "exp": now + self.lifetime,
                "iat": now,
                "iss": "Azure Container Registry",
                "aud": self.registry,
                "version": "1.0",
                "grant_type": "refresh_token",
                "tenant": claims["tid"],
                "permissions": {"actions": ["read"], "notActions": []},
                "roles": [],
            }
        )


def resolve_here(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Resolve ``names`` to 127.0.0.1 in this process (ACR's exchange is on the registry's own
    name, whose certificate the stand-in presents); every other name as before."""
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        wanted = host.decode() if isinstance(host, bytes) else host
        return real("127.0.0.1" if wanted in names else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
