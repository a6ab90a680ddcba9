"""Stand-ins for the Google endpoints the Google cloud source speaks, each answering as its
documentation says, on 127.0.0.1 (``tests/support/cloudstandin.py``: recorded requests,
faults for the next requests):

* :class:`MetadataServer`: the GCE metadata server, or GKE Workload Identity's GKE metadata
  server, over plain HTTP as the real one is. ``GET /computeMetadata/v1/instance/
  service-accounts/default/token`` and ``.../email``; a request without
  ``Metadata-Flavor: Google`` is refused with 403, every answer carries that header, and
  with no service account (Workload Identity not bound) the account's paths are 404,
  https://cloud.google.com/compute/docs/metadata/querying-metadata and
  https://cloud.google.com/compute/docs/access/authenticate-workloads#applications
* :class:`GoogleSTS`: Google STS's token exchange (``POST /v1/token``, a form), over HTTPS. It
  checks the form's fixed fields, the audience (another pool's provider is ``invalid_target``)
  and the subject token, a JWT whose ``exp`` must be in the future (else ``invalid_grant``),
  as STS validates an OIDC token, signature aside; errors are OAuth 2.0 errors,
  https://cloud.google.com/iam/docs/reference/sts/rest/v1/TopLevel/token
* :class:`IAMCredentials`: ``generateAccessToken`` (``POST /v1/projects/-/serviceAccounts/
  EMAIL:generateAccessToken``, JSON), over HTTPS. The bearer token must be one the STS
  stand-in issued (else 401 ``UNAUTHENTICATED``), the account one the federated identity may
  impersonate (else 403 ``PERMISSION_DENIED``), the lifetime ``<n>s`` up to 43200 seconds;
  errors are Google API errors (AIP-193),
  https://cloud.google.com/iam/docs/reference/credentials/rest/v1/projects.serviceAccounts/generateAccessToken

Each issues one fixed access token (``access_token``, settable: a token that rotates), so a
registry can be told to accept exactly that one: :func:`google_registry` runs the real
registry in token mode under ``us-docker.pkg.dev`` and ``gcr.io`` for the end-to-end tests.
:func:`oauth_error` and :func:`google_error` make the error replies tests inject with
:meth:`~CloudStandIn.fail_next`.
"""

from __future__ import annotations

import json
import re
import secrets
import ssl
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from imagecheck.authn.cloud._hosts import CloudRegistry, cloud_registry
from imagecheck.authn.cloud._http import CloudHTTP
from tests.support.cloudnet import NameServer, make_cloud_tls
from tests.support.cloudstandin import CloudStandIn, Received, Reply
from tests.support.endpoint import TOKEN_ISSUER, TOKEN_SERVICE
from tests.support.pki import TLSMaterial, make_token_signer
from tests.support.registry import LocalRegistry, TokenAuthSettings
from tests.support.tokenserver import TokenServer

ACCOUNT_PATH = "/computeMetadata/v1/instance/service-accounts/default"
TOKEN_PATH = f"{ACCOUNT_PATH}/token"
EMAIL_PATH = f"{ACCOUNT_PATH}/email"
STS_PATH = "/v1/token"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
SUBJECT_TYPES = frozenset({JWT_TYPE, "urn:ietf:params:oauth:token-type:id_token"})
AUDIENCE = (
    "//iam.googleapis.com/projects/123456789/locations/global/workloadIdentityPools/"
    "imagecheck-pool/providers/imagecheck-k8s"
)
SERVICE_ACCOUNT = "puller@imagecheck-test.iam.gserviceaccount.com"
MAX_LIFETIME = 43200
_GENERATE = re.compile(r"/v1/projects/-/serviceAccounts/(?P<email>[^/]+):generateAccessToken")
_JSON = {"Content-Type": "application/json; charset=utf-8"}
_FLAVOR = {"Metadata-Flavor": "Google"}


def access_token(prefix: str) -> str:
    """A fresh token in the shape Google's are (``ya29.`` and URL-safe text)."""
    return f"ya29.{prefix}-{secrets.token_urlsafe(24)}"


def json_reply(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(body).encode(), {**_JSON, **(headers or {})})


def oauth_error(status: int, error: str, description: str) -> Reply:
    """An OAuth 2.0 error (RFC 6749 section 5.2), as STS answers one."""
    return json_reply(status, {"error": error, "error_description": description})


def google_error(status: int, code: str, message: str) -> Reply:
    """A Google API error (AIP-193), as IAM Credentials answers one."""
    return json_reply(status, {"error": {"code": status, "message": message, "status": code}})


def metadata_reply(status: int, body: bytes, content_type: str = "text/plain") -> Reply:
    return Reply(status, body, {"Content-Type": content_type, **_FLAVOR})


def subject_jwt(subject: str = "system:serviceaccount:ci:puller", lifetime: int = 3600) -> str:
    """A ServiceAccount token as the kubelet projects it (a JWT; a negative ``lifetime``: one
    that has expired). Signed with a throw-away key: STS's signature check is not stood in."""
    now = int(time.time())
    claims = {
        "iss": "https://kubernetes.default.svc",
        "sub": subject,
        "aud": ["imagecheck-pool"],
        "iat": now - 10,
        "exp": now + lifetime,
    }
    return jwt.encode(claims, secrets.token_bytes(32), algorithm="HS256")


class MetadataServer(CloudStandIn):
    """See the module docstring. ``bound=False``: no service account (404)."""

    def __init__(
        self,
        *,
        email: str = SERVICE_ACCOUNT,
        expires_in: int = 3599,
        bound: bool = True,
        server: str = "GKE Metadata Server",
    ) -> None:
        super().__init__(None)
        self._defaults = (email, expires_in, bound, server)
        self.reset()

    def reset(self) -> None:
        """Forget requests and faults; back to the constructor's settings, a new token."""
        self.clear()
        self.email, self.expires_in, self.bound, self.server = self._defaults
        self.access_token = access_token("metadata")

    @property
    def host(self) -> str:
        """What ``GCE_METADATA_HOST`` is set to for it."""
        return f"127.0.0.1:{self.port}"

    def answer(self, request: Received) -> Reply:
        if request.headers.get("metadata-flavor") != "Google":
            return self._text(403, "Missing required header: Metadata-Flavor")
        if request.method != "GET":
            return self._text(405, "Method not allowed")
        if request.path in (TOKEN_PATH, EMAIL_PATH) and not self.bound:
            return self._text(404, "Not Found: no service account for this instance")
        if request.path == TOKEN_PATH:
            body = {
                "access_token": self.access_token,
                "expires_in": self.expires_in,
                "token_type": "Bearer",
            }
            return json_reply(200, body, {**_FLAVOR, "Server": self.server})
        if request.path == EMAIL_PATH:
            return self._text(200, self.email)
        return self._text(404, "Not Found")

    def _text(self, status: int, text: str) -> Reply:
        headers = {"Content-Type": "text/plain; charset=utf-8", "Server": self.server, **_FLAVOR}
        return Reply(status, text.encode(), headers)

    def token_requests(self) -> list[Received]:
        return [r for r in self.requests if r.path == TOKEN_PATH]


class GoogleSTS(CloudStandIn):
    """See the module docstring."""

    def __init__(
        self, ssl_context: ssl.SSLContext, *, audience: str = AUDIENCE, expires_in: int = 3599
    ) -> None:
        super().__init__(ssl_context)
        self._defaults = (audience, expires_in)
        self.issued: set[str] = set()
        self.reset()

    def reset(self) -> None:
        """Forget requests and faults; back to the constructor's settings, a new token."""
        self.clear()
        self.audience, self.expires_in = self._defaults
        self.access_token = access_token("sts")

    @property
    def token_url(self) -> str:
        return f"{self.url}{STS_PATH}"

    def answer(self, request: Received) -> Reply:
        if request.method != "POST" or request.path != STS_PATH:
            return google_error(404, "NOT_FOUND", "The requested URL was not found.")
        if not request.headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded"
        ):
            return oauth_error(400, "invalid_request", "Invalid content type.")
        problem = self._problem(request.form)
        if problem is not None:
            return problem
        self.issued.add(self.access_token)
        body = {
            "access_token": self.access_token,
            "issued_token_type": ACCESS_TOKEN_TYPE,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
        }
        return json_reply(200, body)

    def _problem(self, form: dict[str, str]) -> Reply | None:
        fixed = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
            "scope": CLOUD_PLATFORM,
        }
        for name, value in fixed.items():
            if form.get(name) != value:
                return oauth_error(400, "invalid_request", f"Invalid value for {name}.")
        if form.get("subject_token_type") not in SUBJECT_TYPES:
            return oauth_error(400, "invalid_request", "Invalid subject_token_type.")
        if form.get("audience") != self.audience:
            return oauth_error(
                400,
                "invalid_target",
                'The target service indicated by the "audience" parameters is invalid. This '
                "might either be because the pool or provider is disabled or deleted or "
                "because it doesn't exist.",
            )
        return _subject_problem(form.get("subject_token", ""))

    def subjects(self) -> list[str]:
        """The subject tokens received, in order."""
        return [r.form.get("subject_token", "") for r in self.requests]


def _subject_problem(token: str) -> Reply | None:
    try:
        claims = jwt.decode(token, options={"verify_signature": False, "verify_exp": False})
    except jwt.PyJWTError:
        return oauth_error(400, "invalid_grant", "Unable to parse the ID Token.")
    if not isinstance(claims.get("exp"), int) or claims["exp"] <= time.time():
        issued = claims.get("iat", "?")
        return oauth_error(400, "invalid_grant", f"ID Token issued at {issued} is expired.")
    return None


class IAMCredentials(CloudStandIn):
    """See the module docstring. ``allowed``: the service accounts the federated identity
    holds ``roles/iam.workloadIdentityUser`` on."""

    def __init__(
        self,
        ssl_context: ssl.SSLContext,
        sts: GoogleSTS,
        allowed: Iterable[str] = (SERVICE_ACCOUNT,),
    ) -> None:
        super().__init__(ssl_context)
        self.sts = sts
        self._allowed = frozenset(allowed)
        self.reset()

    def reset(self) -> None:
        """Forget requests and faults; back to the constructor's settings, a new token."""
        self.clear()
        self.allowed = set(self._allowed)
        self.access_token = access_token("iam")

    def impersonation_url(self, email: str = SERVICE_ACCOUNT) -> str:
        quoted = urllib.parse.quote(email, safe="@")
        return f"{self.url}/v1/projects/-/serviceAccounts/{quoted}:generateAccessToken"

    def answer(self, request: Received) -> Reply:
        match = _GENERATE.fullmatch(request.path)
        if request.method != "POST" or match is None:
            return google_error(404, "NOT_FOUND", "The requested URL was not found.")
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        if bearer not in self.sts.issued:
            return google_error(
                401, "UNAUTHENTICATED", "Request had invalid authentication credentials."
            )
        email = urllib.parse.unquote(match["email"])
        if email not in self.allowed:
            return google_error(
                403,
                "PERMISSION_DENIED",
                "Permission 'iam.serviceAccounts.getAccessToken' denied on resource "
                "(or it may not exist).",
            )
        lifetime = _lifetime(request.body)
        if lifetime is None:
            return google_error(400, "INVALID_ARGUMENT", "Invalid value at 'lifetime'.")
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + lifetime))
        return json_reply(200, {"accessToken": self.access_token, "expireTime": expires})


def _lifetime(body: bytes) -> int | None:
    """The asked lifetime in seconds, or None when the body is not a valid request."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    scope = data.get("scope") if isinstance(data, dict) else None
    if not isinstance(scope, list) or CLOUD_PLATFORM not in scope:
        return None
    text = data.get("lifetime", "3600s")
    if not isinstance(text, str) or not re.fullmatch(r"[0-9]+s", text):
        return None
    seconds = int(text[:-1])
    return seconds if 0 < seconds <= MAX_LIFETIME else None


def write_external_account(
    path: Path,
    *,
    token_url: str,
    token_file: Path,
    impersonation_url: str | None = None,
    audience: str = AUDIENCE,
    **extra: Any,
) -> Path:
    """A credential configuration as ``gcloud iam workload-identity-pools create-cred-config``
    writes it for a file-sourced OIDC token (a projected ServiceAccount token)."""
    config: dict[str, Any] = {
        "universe_domain": "googleapis.com",
        "type": "external_account",
        "audience": audience,
        "subject_token_type": JWT_TYPE,
        "token_url": token_url,
        "credential_source": {"file": str(token_file), "format": {"type": "text"}},
    }
    if impersonation_url is not None:
        config["service_account_impersonation_url"] = impersonation_url
    config.update(extra)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


def cloud_http(ca_file: Path | None = None, timeout: float = 5.0) -> CloudHTTP:
    """The cloud HTTP client the keychain uses, trusting ``ca_file`` (the stand-ins' CA)."""
    if ca_file is None:
        return CloudHTTP(timeout=timeout)
    return CloudHTTP(tls=lambda: ssl.create_default_context(cafile=str(ca_file)), timeout=timeout)


def google_host(host: str) -> CloudRegistry:
    """The classifier's answer for a Google registry ``host`` (which must be one)."""
    found = cloud_registry(host)
    assert found is not None, host
    return found


GOOGLE_HOSTS = ("us-docker.pkg.dev", "gcr.io")


@dataclass(frozen=True)
class GoogleRegistry:
    """The registry under Google's names (:data:`GOOGLE_HOSTS`, each with its port), its
    token server, the names (:class:`NameServer`), and the TLS material whose CA signed the
    registry's, the token server's and any stand-in's certificate made from it."""

    port: int
    token_server: TokenServer
    names: NameServer
    tls: TLSMaterial

    def ref(self, name: str, host: str = GOOGLE_HOSTS[0]) -> str:
        return f"{host}:{self.port}/{name}"

    def accept_only(self, token: str) -> None:
        """Let the token server know one user: ``oauth2accesstoken`` with ``token``."""
        self.token_server.reset()
        self.token_server.users = {"oauth2accesstoken": token}


@contextmanager
def google_registry(
    work: Path, storage: Path, binary: str = "docker-registry"
) -> Iterator[GoogleRegistry]:
    """The real registry serving ``storage`` in token mode over TLS, under Google's names;
    its token server knows nobody until :meth:`GoogleRegistry.accept_only`."""
    tls = make_cloud_tls(work / "pki", GOOGLE_HOSTS)
    tls.ca_file.chmod(0o644)  # readable by the image's user, where a test mounts it
    signer = make_token_signer(work / "signer")
    server = TokenServer(
        ssl_context=tls.server_context(), signer=signer, service=TOKEN_SERVICE, issuer=TOKEN_ISSUER
    )
    with server:
        settings = TokenAuthSettings(server.realm, TOKEN_SERVICE, TOKEN_ISSUER, signer.root_bundle)
        registry = LocalRegistry(
            work / "registry", storage=storage, tls=tls.server, token=settings, binary=binary
        )
        with registry:
            yield GoogleRegistry(registry.port, server, NameServer(work, GOOGLE_HOSTS), tls)
