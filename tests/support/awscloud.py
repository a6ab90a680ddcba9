"""Stand-ins for the AWS endpoints the AWS cloud source speaks, each answering as AWS documents
it, over one shared :class:`AwsIam` (the access keys AWS knows, and what each principal may do):

* :class:`StsStandIn`: STS ``AssumeRoleWithWebIdentity``, an unsigned form POST answered in
  XML; it knows which web identity tokens each role trusts, and which have expired
  (https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html,
  https://docs.aws.amazon.com/STS/latest/APIReference/CommonErrors.html);
* :class:`EcrStandIn`: the ECR API's (or, ``public=True``, ECR Public's)
  ``GetAuthorizationToken``, a SigV4-signed JSON 1.1 POST. The signature is checked for real:
  recomputed here from the request as received, with the secret of the key it names, by the
  algorithm as AWS documents it (written out below, apart from the client's signer), and a
  credential scoped to another region or service is refused as AWS refuses it
  (https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_GetAuthorizationToken.html,
  https://docs.aws.amazon.com/AmazonECRPublic/latest/APIReference/API_GetAuthorizationToken.html,
  https://docs.aws.amazon.com/AmazonECR/latest/APIReference/CommonErrors.html,
  https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html);
* :class:`PodIdentityAgent`: EKS Pod Identity's agent, a GET with the pod's token as
  ``Authorization``, answered with ``{AccessKeyId, SecretAccessKey, Token, AccountId,
  Expiration}`` (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html);
  its refusals are not documented, and are shaped as the SDKs' container-credentials spec says
  an error may be, ``{"code", "message"}``.

Each records what it received (``requests``) and takes faults (``fail_next``) from
:class:`~tests.support.cloudstandin.CloudStandIn`; :func:`throttled` and friends are the
refusals AWS sends on a bad day.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import string
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from ssl import SSLContext
from urllib.parse import quote, unquote_to_bytes
from xml.sax.saxutils import escape

import pytest

from imagecheck.authn.cloud._hosts import CloudRegistry, cloud_registry
from imagecheck.authn.cloud._http import CloudHTTP
from tests.support.cloudnet import make_cloud_tls
from tests.support.cloudstandin import CloudStandIn, Fault, Received, Reply
from tests.support.pki import TLSMaterial

ACCOUNT = "123456789012"
REGION = "us-east-1"
REGISTRY = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com"
ECR_TARGET = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"
ECR_PUBLIC_TARGET = "SpencerFrontendService.GetAuthorizationToken"
GET_TOKEN = "ecr:GetAuthorizationToken"
PUBLIC_GET_TOKEN = "ecr-public:GetAuthorizationToken"
JSON_11 = "application/x-amz-json-1.1"
STS_XMLNS = "https://sts.amazonaws.com/doc/2011-06-15/"
SKEW = 15 * 60  # AWS refuses a signature this far from its clock

Clock = Callable[[], float]


def _token(length: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(length))


@dataclass
class Principal:
    """An identity AWS knows: its key, secret, session token and permissions."""

    arn: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str = field(default="", repr=False)
    permissions: frozenset[str] = frozenset()
    expires_at: float | None = None  # Unix time


class AwsIam:
    """The keys AWS knows, shared by the stand-ins: STS and the Pod Identity agent issue
    them, the ECR stand-ins check them."""

    def __init__(self, clock: Clock = time.time) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, Principal] = {}

    def static_key(self, arn: str, permissions: Iterable[str]) -> Principal:
        """A long-lived access key of an IAM user (``AKIA...``, no session token)."""
        return self._add(
            Principal(
                arn,
                "AKIA" + _token(16, string.ascii_uppercase),
                _token(40),
                permissions=frozenset(permissions),
            )
        )

    def session(self, arn: str, permissions: Iterable[str], lifetime: float = 3600) -> Principal:
        """Temporary credentials (``ASIA...`` with a session token), as STS issues them."""
        principal = Principal(
            arn,
            "ASIA" + _token(16, string.ascii_uppercase),
            _token(40),
            session_token=_token(300),
            permissions=frozenset(permissions),
            expires_at=self.clock() + lifetime,
        )
        return self._add(principal)

    def find(self, access_key_id: str) -> Principal | None:
        with self._lock:
            return self._keys.get(access_key_id)

    def issued(self) -> list[Principal]:
        with self._lock:
            return list(self._keys.values())

    def _add(self, principal: Principal) -> Principal:
        with self._lock:
            self._keys[principal.access_key_id] = principal
        return principal


def iso(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- STS ------------------------------------------------------------------------------------


@dataclass
class Role:
    """An IAM role, the web identity tokens its trust policy takes, and its permissions."""

    arn: str
    permissions: frozenset[str]
    trusted: set[str] = field(default_factory=set, repr=False)  # web identity tokens
    expired: set[str] = field(default_factory=set, repr=False)


class StsStandIn(CloudStandIn):
    """STS's ``AssumeRoleWithWebIdentity`` (see the module docstring)."""

    def __init__(self, iam: AwsIam, ssl_context: SSLContext | None, *roles: Role) -> None:
        super().__init__(ssl_context)
        self.iam = iam
        self.roles = {role.arn: role for role in roles}
        self.lifetime = 3600.0

    def answer(self, request: Received) -> Reply:
        form = request.form
        if request.method != "POST" or request.path != "/":
            return sts_error(404, "Sender", "InvalidAction", "Could not find operation")
        if form.get("Action") != "AssumeRoleWithWebIdentity" or form.get("Version") != "2011-06-15":
            return sts_error(400, "Sender", "InvalidAction", "Could not find operation")
        role = self.roles.get(form.get("RoleArn", ""))
        token = form.get("WebIdentityToken", "")
        if role is not None and token in role.expired:
            return sts_error(
                400,
                "Sender",
                "ExpiredTokenException",
                "Token expired: current date/time must be before the expiration",
            )
        if role is None or token not in role.trusted:
            return sts_error(
                403,
                "Sender",
                "AccessDenied",
                "Not authorized to perform sts:AssumeRoleWithWebIdentity",
            )
        session_name = form.get("RoleSessionName", "")
        arn = role.arn.replace(":iam::", ":sts::").replace(":role/", ":assumed-role/")
        principal = self.iam.session(f"{arn}/{session_name}", role.permissions, self.lifetime)
        return Reply(200, _assumed(principal).encode(), {"Content-Type": "text/xml"})


def _assumed(principal: Principal) -> str:
    expires = iso(principal.expires_at or 0)
    return (
        f'<AssumeRoleWithWebIdentityResponse xmlns="{STS_XMLNS}">'
        "<AssumeRoleWithWebIdentityResult>"
        "<SubjectFromWebIdentityToken>system:serviceaccount:apps:imagecheck"
        "</SubjectFromWebIdentityToken>"
        "<Audience>sts.amazonaws.com</Audience>"
        f"<AssumedRoleUser><Arn>{escape(principal.arn)}</Arn>"
        "<AssumedRoleId>AROAEXAMPLE:imagecheck</AssumedRoleId></AssumedRoleUser>"
        f"<Credentials><SessionToken>{principal.session_token}</SessionToken>"
        f"<SecretAccessKey>{principal.secret_access_key}</SecretAccessKey>"
        f"<Expiration>{expires}</Expiration>"
        f"<AccessKeyId>{principal.access_key_id}</AccessKeyId></Credentials>"
        "<Provider>arn:aws:iam::123456789012:oidc-provider/oidc.eks.example</Provider>"
        "</AssumeRoleWithWebIdentityResult>"
        "<ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>"
        "</ResponseMetadata></AssumeRoleWithWebIdentityResponse>"
    )


def sts_error(status: int, kind: str, code: str, message: str) -> Reply:
    body = (
        f'<ErrorResponse xmlns="{STS_XMLNS}"><Error><Type>{kind}</Type><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message></Error>"
        "<RequestId>4f2b0e3d-9c1c-4b7a-8d1e-EXAMPLE</RequestId></ErrorResponse>"
    )
    return Reply(status, body.encode(), {"Content-Type": "text/xml"})


# --- ECR and ECR Public ---------------------------------------------------------------------


@dataclass(frozen=True)
class Signed:
    """What a request's signature said, once it verified."""

    access_key_id: str
    date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]


class EcrStandIn(CloudStandIn):
    """``GetAuthorizationToken`` of the ECR API in ``region``, or of ECR Public (us-east-1)."""

    def __init__(
        self,
        iam: AwsIam,
        ssl_context: SSLContext | None,
        *,
        region: str = REGION,
        public: bool = False,
        password: str | None = None,
        lifetime: float = 12 * 3600,
    ) -> None:
        super().__init__(ssl_context)
        self.iam = iam
        self.region = "us-east-1" if public else region
        self.public = public
        self.service = "ecr-public" if public else "ecr"
        self.target = ECR_PUBLIC_TARGET if public else ECR_TARGET
        self.permission = PUBLIC_GET_TOKEN if public else GET_TOKEN
        self.password = password or _token(64)
        self.lifetime = lifetime
        self.signed: list[Signed] = []

    def answer(self, request: Received) -> Reply:
        if request.method != "POST" or request.path != "/":
            return ecr_error(404, "UnknownOperationException", "")
        if request.headers.get("x-amz-target") != self.target:
            return ecr_error(400, "UnknownOperationException", "")
        if request.headers.get("content-type") != JSON_11:
            return ecr_error(
                400, "SerializationException", "Start of structure or map found where not expected."
            )
        principal, refusal = self._authenticate(request)
        if refusal is not None:
            return refusal
        assert principal is not None
        if self.permission not in principal.permissions:
            return ecr_error(
                400,
                "AccessDeniedException",
                f"User: {principal.arn} is not authorized to perform: "
                f"{self.permission} on resource: * because no identity-based "
                f"policy allows the {self.permission} action",
            )
        return self._token_reply(request)

    def _authenticate(self, request: Received) -> tuple[Principal | None, Reply | None]:
        parsed = _authorization(request.headers.get("authorization", ""))
        if parsed is None:
            return None, ecr_error(
                400, "MissingAuthenticationTokenException", "Missing Authentication Token"
            )
        key_id, date, region, service, signed_headers, signature = parsed
        principal = self.iam.find(key_id)
        if principal is None:
            return None, _unrecognized()
        if region != self.region:
            return None, ecr_error(
                403, "InvalidSignatureException", "Credential should be scoped to a valid region. "
            )
        if service != self.service:
            return None, ecr_error(
                403,
                "InvalidSignatureException",
                f"Credential should be scoped to correct service: '{self.service}'. ",
            )
        amz_date = request.headers.get("x-amz-date", "")
        if abs(_epoch(amz_date) - self.iam.clock()) > SKEW:
            return None, ecr_error(
                403,
                "InvalidSignatureException",
                f"Signature expired: {amz_date} is now earlier than the time allowed.",
            )
        if principal.session_token != request.headers.get("x-amz-security-token", ""):
            return None, _unrecognized()
        expected = signature_of(
            request, principal.secret_access_key, signed_headers, date, region, service
        )
        if not hmac.compare_digest(expected, signature):
            return None, ecr_error(
                403,
                "InvalidSignatureException",
                "The request signature we calculated does not match the "
                "signature you provided. Check your AWS Secret Access Key "
                "and signing method.",
            )
        if principal.expires_at is not None and principal.expires_at < self.iam.clock():
            return None, ecr_error(
                400,
                "ExpiredTokenException",
                "The security token included in the request is expired",
            )
        self.signed.append(Signed(key_id, date, region, service, signed_headers))
        return principal, None

    def _token_reply(self, request: Received) -> Reply:
        try:
            asked = json.loads(request.body or b"{}")
        except ValueError:
            return ecr_error(400, "SerializationException", "")
        expires = self.iam.clock() + self.lifetime
        token = base64.b64encode(f"AWS:{self.password}".encode()).decode()
        data: dict[str, object] = {"authorizationToken": token, "expiresAt": expires}
        if self.public:
            return _json(200, {"authorizationData": data})
        registry_ids = asked.get("registryIds") or [ACCOUNT]
        if not all(isinstance(r, str) and re.fullmatch("[0-9]{12}", r) for r in registry_ids):
            return ecr_error(
                400,
                "InvalidParameterException",
                "Invalid parameter at 'registryIds' failed to satisfy constraint",
            )
        data["proxyEndpoint"] = f"https://{registry_ids[0]}.dkr.ecr.{self.region}.amazonaws.com"
        return _json(200, {"authorizationData": [data]})


def _unrecognized() -> Reply:
    return ecr_error(
        400, "UnrecognizedClientException", "The security token included in the request is invalid."
    )


def ecr_error(status: int, code: str, message: str) -> Reply:
    """A JSON protocol refusal, as ECR sends it."""
    return _json(status, {"__type": code, "message": message}, {"x-amzn-ErrorType": f"{code}:"})


def throttled() -> Fault:
    return Fault(reply=ecr_error(400, "ThrottlingException", "Rate exceeded"))


def _json(status: int, body: object, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(body).encode(), {"Content-Type": JSON_11, **(headers or {})})


def _epoch(amz_date: str) -> float:
    try:
        return datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return 0.0


_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>[0-9]{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<headers>[a-z0-9;-]+), "
    r"Signature=(?P<signature>[0-9a-f]{64})"
)


def _authorization(header: str) -> tuple[str, str, str, str, tuple[str, ...], str] | None:
    match = _AUTHORIZATION.fullmatch(header)
    if match is None:
        return None
    headers = tuple(match["headers"].split(";"))
    return (
        match["key"],
        match["date"],
        match["region"],
        match["service"],
        headers,
        match["signature"],
    )


def signature_of(
    request: Received,
    secret: str,
    signed_headers: tuple[str, ...],
    date: str,
    region: str,
    service: str,
) -> str:
    """The SigV4 signature of ``request`` as received, step by step as AWS's guide has it."""
    path = "/".join(quote(unquote_to_bytes(s), safe="") for s in request.path.split("/"))
    pairs = sorted(
        (quote(k, safe=""), quote(v, safe="")) for k, vs in request.query.items() for v in vs
    )
    query = "&".join(f"{k}={v}" for k, v in pairs)
    headers = "".join(
        f"{name}:{' '.join(request.headers.get(name, '').split())}\n" for name in signed_headers
    )
    canonical = "\n".join(
        (
            request.method,
            path or "/",
            query,
            headers,
            ";".join(signed_headers),
            hashlib.sha256(request.body).hexdigest(),
        )
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    amz_date = request.headers.get("x-amz-date", "")
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{digest}"
    key = f"AWS4{secret}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


# --- EKS Pod Identity -----------------------------------------------------------------------


class PodIdentityAgent(CloudStandIn):
    """The EKS Pod Identity agent (plain HTTP, as it is on 169.254.170.23)."""

    def __init__(self, iam: AwsIam, role: Role, account: str = ACCOUNT) -> None:
        super().__init__(None)
        self.iam = iam
        self.role = role
        self.account = account
        self.lifetime = 6 * 3600.0

    def answer(self, request: Received) -> Reply:
        if request.method != "GET" or request.path != "/v1/credentials":
            return _json(404, {"code": "NotFound", "message": "no such path"})
        token = request.headers.get("authorization", "")
        if not token:
            return _json(
                400, {"code": "InvalidToken", "message": "Service account token cannot be empty"}
            )
        if token in self.role.expired:
            return _json(401, {"code": "ExpiredToken", "message": "Token is expired"})
        if token not in self.role.trusted:
            return _json(403, {"code": "AccessDenied", "message": "Token is not trusted"})
        name = self.role.arn.rsplit("/", 1)[-1]
        arn = f"arn:aws:sts::{self.account}:assumed-role/{name}/eks-cluster-pod"
        principal = self.iam.session(arn, self.role.permissions, self.lifetime)
        return _json(
            200,
            {
                "AccessKeyId": principal.access_key_id,
                "SecretAccessKey": principal.secret_access_key,
                "Token": principal.session_token,
                "AccountId": self.account,
                "Expiration": iso(principal.expires_at or 0),
            },
        )


# --- all of them, for a test ----------------------------------------------------------------

ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/image-puller"
WEB_IDENTITY_TOKEN = "eyJhbGciOiJSUzI1NiJ9.web-identity-token-one.c2lnbmF0dXJl"
ROLE_PERMISSIONS = frozenset({GET_TOKEN, PUBLIC_GET_TOKEN})


@dataclass
class AwsWorld:
    """The stand-ins, sharing one :class:`AwsIam` and one CA, and a role that trusts
    :data:`WEB_IDENTITY_TOKEN` and may call ``GetAuthorizationToken`` of ECR and ECR Public."""

    tls: TLSMaterial
    iam: AwsIam
    role: Role
    sts: StsStandIn
    ecr: EcrStandIn
    public: EcrStandIn
    agent: PodIdentityAgent

    @property
    def ca_file(self) -> Path:
        return self.tls.ca_file

    def endpoints(self) -> dict[str, str]:
        """The SDKs' endpoint variables, pointing at the stand-ins."""
        return {
            "AWS_ENDPOINT_URL_STS": self.sts.url,
            "AWS_ENDPOINT_URL_ECR": self.ecr.url,
            "AWS_ENDPOINT_URL_ECR_PUBLIC": self.public.url,
        }

    def irsa_env(self, token_file: Path) -> dict[str, str]:
        """What EKS's pod identity webhook sets for IRSA, and the endpoints."""
        return {
            "AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file),
            "AWS_ROLE_ARN": self.role.arn,
            "AWS_STS_REGIONAL_ENDPOINTS": "regional",
            **self.endpoints(),
        }

    def pod_identity_env(self, token_file: Path) -> dict[str, str]:
        """What EKS Pod Identity sets (its agent here on loopback), and the endpoints."""
        return {
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": self.agent.url + "/v1/credentials",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token_file),
            **self.endpoints(),
        }

    def http(self, timeout: float = 10.0) -> CloudHTTP:
        """imagecheck's cloud HTTP, trusting the stand-ins' CA."""
        return CloudHTTP(tls=self.tls.client_context, timeout=timeout)

    def clear(self) -> None:
        """Forget what the stand-ins received and what a test changed of the role."""
        for standin in (self.sts, self.ecr, self.public, self.agent):
            standin.clear()
        self.ecr.signed.clear()
        self.public.signed.clear()
        self.role.trusted = {WEB_IDENTITY_TOKEN}
        self.role.expired.clear()
        self.role.permissions = ROLE_PERMISSIONS


def write_token(path: Path, token: str = WEB_IDENTITY_TOKEN) -> Path:
    """A projected ServiceAccount token file, as the kubelet writes one."""
    path.write_text(token + "\n", encoding="utf-8")
    return path


def registry_of(host: str) -> CloudRegistry:
    found = cloud_registry(host)
    assert found is not None, host
    return found


@contextmanager
def aws_world(
    directory: Path, names: Iterable[str] = (REGISTRY,), *, password: str | None = None
) -> Iterator[AwsWorld]:
    """Every stand-in running, over TLS with a CA under ``directory`` (``ca_file``) whose
    certificate also names ``names`` (for a registry served under them)."""
    tls = make_cloud_tls(directory, names)
    iam = AwsIam()
    role = Role(ROLE_ARN, ROLE_PERMISSIONS, trusted={WEB_IDENTITY_TOKEN})
    with (
        StsStandIn(iam, tls.server_context(), role) as sts,
        EcrStandIn(iam, tls.server_context(), password=password) as ecr,
        EcrStandIn(iam, tls.server_context(), public=True) as public,
        PodIdentityAgent(iam, role) as agent,
    ):
        yield AwsWorld(tls, iam, role, sts, ecr, public, agent)


# Fixtures for the AWS tests, imported by their modules: one set of stand-ins a module, each
# test starting with nothing received and the role as it was.


@pytest.fixture(name="running_aws", scope="module")
def running_aws_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AwsWorld]:
    with aws_world(tmp_path_factory.mktemp("aws")) as running:
        yield running


@pytest.fixture(name="world")
def world_fixture(running_aws: AwsWorld) -> AwsWorld:
    running_aws.clear()
    return running_aws


@pytest.fixture(name="token_file")
def token_file_fixture(tmp_path: Path) -> Path:
    return write_token(tmp_path / "token")
