"""The registries users run, emulated in front of the plain registry, as differential scenarios.

Each emulation is a *front*: a TLS :class:`~tests.support.faultproxy.FaultProxy` before
the plain-HTTP registry whose :class:`~tests.support.faultproxy.Handle` plays that
registry's part of the protocol (its challenge, its token service and the tokens it issues,
its status codes and error wording), and forwards what it lets through to the real
Distribution registry, which serves the manifests and blobs. Where a registry's token service
lives on another host, a second FaultProxy plays it (``localhost`` rather than ``127.0.0.1``:
another name, so clients treat it as the other host it is). Tokens are opaque: the front
checks the ones its token service issued (:class:`TokenBook`).

Every behaviour is cited where it is set, from the registry's own documentation or source,
an issue thread showing a real answer, or containerd's own comments about registries. Where
no source was found, the comment says so and the choice made: those choices never decide a
scenario's verdict on their own.

The kubelet's verdict (containerd's) is measured, as for every scenario of the suite.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace

import httpx

from tests.integration.differential.oracle import Access, Verdict
from tests.integration.differential.scenarios import Case, Prepare, Scenario
from tests.integration.differential.site import Site
from tests.support.faultproxy import (
    Concrete,
    FaultProxy,
    Forward,
    Handle,
    Replace,
    Request,
    Respond,
    SetHeaders,
)

FOUND, MISSING, DENIED, ERROR = Verdict.FOUND, Verdict.MISSING, Verdict.DENIED, Verdict.ERROR

# The repositories anonymous callers may pull where a registry has public ones (the samples
# under sample/ and public/; private/secret:1.0 is the private image).
PUBLIC_PREFIXES = ("sample/", "public/")


# -- the pieces every emulation uses -------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """What a token stands for: who asked (``None``: anonymous) and what they may pull."""

    subject: str | None
    repositories: frozenset[str]


class TokenBook:
    """Opaque bearer tokens a token service issued, looked up by the front that honours them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._grants: dict[str, Grant] = {}

    def issue(self, grant: Grant) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._grants[token] = grant
        return token

    def grant(self, request: Request) -> Grant | None:
        scheme, _, token = (request.header("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        with self._lock:
            return self._grants.get(token.strip())


def basic_credentials(request: Request) -> tuple[str, str] | None:
    scheme, _, encoded = (request.header("Authorization") or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        username, sep, password = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (username, password) if sep else None


def requested_repositories(request: Request) -> list[str]:
    """The repositories a token request asks to pull: ``scope`` query parameters (GET) or
    the space-separated ``scope`` form field (the OAuth2 POST)."""
    if request.method == "POST":
        scopes = [s for value in request.form.get("scope", []) for s in value.split()]
    else:
        scopes = [s for value in request.query.get("scope", []) for s in value.split()]
    wanted = []
    for scope in scopes:
        kind, _, rest = scope.partition(":")
        name, _, actions = rest.rpartition(":")
        if kind == "repository" and name and "pull" in actions.split(","):
            wanted.append(name)
    return wanted


def repository_of(path: str) -> str | None:
    """``sample/app`` for ``/v2/sample/app/manifests/1.0.0`` (and blobs, tags)."""
    if not path.startswith("/v2/"):
        return None
    for marker in ("/manifests/", "/blobs/", "/tags/"):
        name, sep, _ = path[len("/v2/") :].rpartition(marker)
        if sep and name:
            return name
    return None


def reference_of(path: str) -> str:
    """The tag or digest a manifest path names."""
    return path.rpartition("/manifests/")[2]


def answer_json(status: int, payload: object, **headers: str) -> Respond:
    headers.setdefault("Content-Type", "application/json")
    return Respond(status, headers, json.dumps(payload).encode())


def oci_error(status: int, code: str, message: str, detail: object = None, **h: str) -> Respond:
    """A distribution-spec error body (``{"errors": [{"code", "message", "detail"}]}``)."""
    return answer_json(
        status, {"errors": [{"code": code, "message": message, "detail": detail}]}, **h
    )


def bearer_challenge(realm: str, **params: str | None) -> str:
    shown = [f'realm="{realm}"'] + [f'{k}="{v}"' for k, v in params.items() if v is not None]
    return "Bearer " + ",".join(shown)


class Repositories:
    """Which repositories the plain registry holds (the emulations' "does it exist"), asked
    once each: ``GET /v2/<name>/tags/list`` is 404 NAME_UNKNOWN for one it does not."""

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self._lock = threading.Lock()
        self._known: dict[str, bool] = {}

    def __contains__(self, repository: object) -> bool:
        if not isinstance(repository, str):
            return False
        with self._lock:
            known = self._known.get(repository)
        if known is None:
            with httpx.Client(timeout=10.0, trust_env=False) as client:
                answer = client.get(f"{self._base_url}/v2/{repository}/tags/list")
            if answer.status_code not in (200, 404):
                answer.raise_for_status()
            known = answer.status_code == 200
            with self._lock:
                self._known[repository] = known
        return known


# -- an emulated registry --------------------------------------------------------------------


class Emulation:
    """A token-auth registry as Distribution runs one (docs/spec/auth/token.md); each
    registry below changes what it does otherwise.

    The front challenges every request without a token it issued, and requests for a
    repository the token does not cover (``error="insufficient_scope"``); the token service
    (at :attr:`realm_path` on the front's own host, unless a subclass serves it elsewhere)
    answers ``GET`` with optional Basic credentials and the OAuth2 ``POST``
    (docs/spec/auth/oauth.md), and leaves out of a token what the caller may not pull, as
    Distribution's token servers do. Anonymous callers may pull the existing public
    repositories; a known user every existing repository.
    """

    service: str | None = None
    realm_path = "/token"
    # Whether the front's challenge names the scope the request needs.
    challenge_scope = True
    unauthorized_message = "authentication required"
    # What the token service answers the OAuth2 POST (None: it speaks it, as the spec says).
    post_status: int | None = None

    def __init__(self, site: Site, stack: ExitStack) -> None:
        self.site = site
        self.tokens = TokenBook()
        self.catalog = Repositories(site.plain.url)
        self.front = stack.enter_context(site.proxy(site.plain, tls=True))
        self.front.on(None, "", Handle(self.on_front))
        self.realm = f"https://{self.front.host}{self.realm_path}"
        self.token_on_front = True
        self.users: dict[str, str] = {}
        # Credentials the scenarios may use, by name ("right", "wrong", ...).
        self.logins: dict[str, tuple[str, str]] = {}

    def case(self, name: str, login: str | None) -> Case:
        user = None if login is None else self.logins[login]
        access = Access(registry=self.front.host, ca_file=self.site.tls.ca_file, user=user)
        return Case(self.front.ref(name), access)

    def serve_token_elsewhere(self, stack: ExitStack, host: str, *, tls: bool = True) -> str:
        """Put the token service on a proxy of its own; its base URL under ``host``."""
        auth: FaultProxy = stack.enter_context(self.site.proxy(self.site.plain, tls=tls))
        auth.on(None, "", Handle(self.on_token))
        self.token_on_front = False
        return f"{'https' if tls else 'http'}://{host}:{auth.port}"

    # -- policy --

    def login(self, username: str, password: str) -> str | None:
        known = self.users.get(username)
        if known is not None and secrets.compare_digest(known, password):
            return username
        return None

    def may_pull(self, subject: str | None, repository: str) -> bool:
        if repository not in self.catalog:
            return False
        return subject is not None or repository.startswith(PUBLIC_PREFIXES)

    # -- the front --

    def on_front(self, request: Request) -> Concrete:
        if self.token_on_front and request.path == self.realm_path:
            return self.on_token(request)
        repository = repository_of(request.path)
        grant = self.tokens.grant(request)
        if grant is None:
            return self.unauthorized(repository, None)
        if repository is None:
            return Forward()
        if repository not in grant.repositories:
            return self.refused(repository, grant)
        return self.serve(request, repository, grant)

    def unauthorized(self, repository: str | None, error: str | None) -> Respond:
        scope = f"repository:{repository}:pull" if repository and self.challenge_scope else None
        challenge = bearer_challenge(self.realm, service=self.service, scope=scope, error=error)
        return oci_error(
            401, "UNAUTHORIZED", self.unauthorized_message, **{"WWW-Authenticate": challenge}
        )

    def refused(self, repository: str, grant: Grant) -> Respond:
        """A token that does not cover the repository."""
        return self.unauthorized(repository, "insufficient_scope")

    def serve(self, request: Request, repository: str, grant: Grant) -> Concrete:
        return Forward()

    # -- the token service --

    def on_token(self, request: Request) -> Concrete:
        if request.method == "POST":
            return self.on_token_post(request)
        creds = basic_credentials(request)
        subject = None
        if creds is not None:
            subject = self.login(*creds)
            if subject is None:
                return self.login_refused()
        return self.issue(subject, requested_repositories(request))

    def on_token_post(self, request: Request) -> Concrete:
        if self.post_status is not None:
            return Respond(self.post_status)
        form = {k: v[0] for k, v in request.form.items() if v}
        if form.get("grant_type") != "password":
            return answer_json(400, {"error": "unsupported_grant_type"})
        subject = self.login(form.get("username", ""), form.get("password", ""))
        if subject is None:
            return answer_json(401, {"error": "invalid_grant"})
        return self.issue(subject, requested_repositories(request))

    def login_refused(self) -> Respond:
        return oci_error(401, "UNAUTHORIZED", "incorrect username or password")

    def issue(self, subject: str | None, wanted: list[str]) -> Respond:
        granted = frozenset(r for r in wanted if self.may_pull(subject, r))
        token = self.tokens.issue(Grant(subject, granted))
        return answer_json(200, self.token_body(token))

    def token_body(self, token: str) -> dict[str, object]:
        return {"token": token, "access_token": token, "expires_in": 300}


# -- Docker Hub -----------------------------------------------------------------------------------


class DockerHub(Emulation):
    """Docker Hub: ``registry-1.docker.io`` sends clients to ``auth.docker.io/token``, another
    host, with ``service="registry.docker.io"``; anonymous tokens open public repositories
    (docs.docker.com/docker-hub/usage/pulls/ fetches one with
    ``curl "https://auth.docker.io/token?service=registry.docker.io&scope=repository:...:pull"``).
    A repository that does not exist is refused like a private one (the token leaves it
    out, the registry answers 401): the Docker daemon words that 401 "pull access denied for
    X, repository does not exist or may require 'docker login'" (moby), and imagecheck's
    ``--denied-as-missing`` exists for it.

    Pull limits (docs.docker.com/docker-hub/usage/pulls/): manifest answers carry
    ``ratelimit-limit: 100;w=21600`` and ``ratelimit-remaining: N;w=21600`` (and
    ``docker-ratelimit-source``) on GET and HEAD; a GET of a manifest counts as a pull, a
    HEAD ("version check") does not; over the limit the manifest GET answers 429 with "You
    have reached your pull rate limit. You may increase the limit by authenticating and
    upgrading: https://www.docker.com/increase-rate-limits". containerd's pull then fails on
    the GET by digest after a HEAD by tag went through (the kubelet's "429 Too Many Requests
    - Server message: toomanyrequests: ..." in namespacelabs/foundation#846 and
    dell/csi-baremetal#391), the code being TOOMANYREQUESTS (distribution-spec's error codes).
    imagecheck's ``--platform auto`` (the initContainer's mode) GETs the manifest, its
    platforms being in the body: each check of a single-platform image spends a pull, where
    a plain ``check`` HEADs and does not. No Retry-After: Docker Hub uses "a 'quota' system
    and not 'retry-after'" (dependabot/cli#380, with the headers of a real answer).

    No scenario runs at the limit (``pulls_left = 0``), because skopeo makes it a minute
    long: containers/image answers a 429 without Retry-After by backing off 2, 4, 8 and 16 s
    before giving up, and skopeo's ``--retry-times`` starts that over. Measured once by hand:
    containerd fails (its HEAD by tag goes through, each GET by digest is 429; error, three
    times over), imagecheck fails (``--platform auto`` GETs the manifest: 429, retried, error),
    and skopeo fails at its 55 s command timeout: all three say error.
    """

    service = "registry.docker.io"
    pulls_left = 100
    LIMIT = 100
    MESSAGE = (
        "You have reached your pull rate limit. You may increase the limit by authenticating "
        "and upgrading: https://www.docker.com/increase-rate-limits"
    )

    def __init__(self, site: Site, stack: ExitStack) -> None:
        super().__init__(site, stack)
        self.realm = self.serve_token_elsewhere(stack, "localhost") + "/token"
        self._lock = threading.Lock()
        self._left = self.pulls_left

    def serve(self, request: Request, repository: str, grant: Grant) -> Concrete:
        if "/manifests/" not in request.path:
            return Forward()
        with self._lock:
            if request.method == "GET" and self._left == 0:
                return oci_error(429, "TOOMANYREQUESTS", self.MESSAGE, **self._limit_headers())
            if request.method == "GET":
                self._left -= 1
            return SetHeaders(self._limit_headers())

    def _limit_headers(self) -> dict[str, str]:
        return {
            "ratelimit-limit": f"{self.LIMIT};w=21600",
            "ratelimit-remaining": f"{self._left};w=21600",
            "docker-ratelimit-source": "127.0.0.1",
        }


# -- GitLab ------------------------------------------------------------------------------------


class GitLab(Emulation):
    """GitLab's container registry: the registry (``registry.gitlab.com``) sends clients to
    GitLab itself for tokens, ``https://gitlab.com/jwt/auth``, another host (Omnibus writes
    ``realm: <external_url>/jwt/auth``: gitlab-org/gitlab-foss#26265), with
    ``service="container_registry"`` (``ContainerRegistryAuthenticationService::AUDIENCE``).

    gitlab-org/gitlab ``config/routes.rb``: ``get 'jwt/auth' => 'jwt#auth'`` and
    ``post 'jwt/auth', to: proc { [404, {}, ['']] }``: the OAuth2 POST is a bare 404.
    ``JwtController``: an unknown ``service`` is ``head :not_found``; Basic credentials that
    fail are 401 ``{"errors": [{"code": "UNAUTHORIZED", "message": "HTTP Basic: Access
    denied"}]}``; no credentials is an anonymous request, which may pull public projects.
    ``ContainerRegistryAuthenticationService#process_repository_access`` drops a scope whose
    project does not exist (``return unless requested_project``) or that the caller may not
    read, so the registry then refuses the token: a project that does not exist is *denied*,
    credentials or not. The answer is ``{"token": ...}`` only. Users log in with a personal
    access token as the password (docs.gitlab.com, "Authenticate with the container
    registry").
    """

    service = "container_registry"
    realm_path = "/jwt/auth"
    post_status = 404

    def __init__(self, site: Site, stack: ExitStack) -> None:
        super().__init__(site, stack)
        self.realm = self.serve_token_elsewhere(stack, "localhost") + self.realm_path
        token = "glpat-" + secrets.token_urlsafe(15)
        self.users = {"alice": token}
        self.logins = {"right": ("alice", token), "wrong": ("alice", token + "x")}

    def on_token(self, request: Request) -> Concrete:
        if request.path != self.realm_path:
            return Respond(404)
        if request.method == "POST":
            return Respond(404)
        if request.query.get("service", [""])[0] != self.service:
            return Respond(404)
        return super().on_token(request)

    def login_refused(self) -> Respond:
        return oci_error(401, "UNAUTHORIZED", "HTTP Basic: Access denied")

    def token_body(self, token: str) -> dict[str, object]:
        return {"token": token}


# -- Amazon ECR ---------------------------------------------------------------------------------


class ECR(Emulation):
    """Amazon ECR (private): Basic auth, no token service. ``GET /v2/`` answers
    ``Basic realm="https://<account>.dkr.ecr.<region>.amazonaws.com/",service="ecr.amazonaws.com"``
    (mayflower/docker-ls#28). The user is ``AWS`` and the password the token
    ``GetAuthorizationToken`` returns (``aws ecr get-login-password``), valid for 12 hours
    (ECR API reference, GetAuthorizationToken / AuthorizationData.expiresAt). An expired one is
    answered 403 "denied: Your authorization token has expired. Reauthenticate and try again."
    (aws/aws-cli#6580; the status in convox/rack#678 and
    awslabs/amazon-ecr-credential-helper#7). A repository that does not exist: "name unknown:
    The repository with name 'X' does not exist in the registry with id 'Y'"
    (aws-actions/amazon-ecr-login#166), NAME_UNKNOWN, 404. A tag that does not exist: 404
    (containerd's "not found" in ECR pull failures); its body was not found in sources (the
    emulation: MANIFEST_UNKNOWN, "Requested image not found", a guess). The body of ECR's 401
    and its answer to a password it never issued: not found in sources either (the
    emulation challenges again, 401).
    """

    ACCOUNT = "123456789012"

    def __init__(self, site: Site, stack: ExitStack) -> None:
        super().__init__(site, stack)
        self.realm = f"https://{self.front.host}/"
        now = time.time()
        # The password is opaque to clients: base64 of a JSON document, a few hundred bytes
        # and more (the emulation's contents are made up; only its shape matters).
        self.expiry: dict[str, float] = {
            self._password(): now + 12 * 3600,
            self._password(): now - 60,  # issued 12 hours and a minute ago
        }
        valid, expired = self.expiry
        self.logins = {"right": ("AWS", valid), "expired": ("AWS", expired)}

    @staticmethod
    def _password() -> str:
        document = {
            "payload": secrets.token_urlsafe(600),
            "datakey": secrets.token_urlsafe(200),
            "version": "2",
            "type": "DATA_KEY",
            "expiration": int(time.time()) + 43200,
        }
        return base64.b64encode(json.dumps(document).encode()).decode()

    def on_front(self, request: Request) -> Concrete:
        creds = basic_credentials(request)
        expires = self.expiry.get(creds[1]) if creds and creds[0] == "AWS" else None
        if expires is None:
            challenge = f'Basic realm="{self.realm}",service="ecr.amazonaws.com"'
            return oci_error(
                401, "UNAUTHORIZED", "authentication required", **{"WWW-Authenticate": challenge}
            )
        if expires < time.time():
            message = "Your authorization token has expired. Reauthenticate and try again."
            return oci_error(403, "DENIED", message)
        repository = repository_of(request.path)
        if repository is None:
            return Forward()
        if repository not in self.catalog:
            message = (
                f"The repository with name '{repository}' does not exist in the registry "
                f"with id '{self.ACCOUNT}'"
            )
            return oci_error(404, "NAME_UNKNOWN", message)
        missing = oci_error(404, "MANIFEST_UNKNOWN", "Requested image not found")
        return Replace({404: missing}) if "/manifests/" in request.path else Forward()


# -- Azure Container Registry ---------------------------------------------------------------------


class ACR(Emulation):
    """Azure Container Registry (Azure/acr ``docs/AAD-OAuth.md``): the challenge is
    ``Bearer realm="https://<registry>/oauth2/token",service="<registry>"`` on the registry's
    own host. ``az acr login`` POSTs an AAD access token to ``/oauth2/exchange``
    (``grant_type=access_token&service&tenant&access_token``) for an ACR refresh token
    (``{"refresh_token": ...}``), then hands Docker the null GUID
    ``00000000-0000-0000-0000-000000000000`` as the username and the refresh token as the
    password: "The null GUID tells the container registry that this is an ACR refresh token".
    ``POST /oauth2/token`` takes ``grant_type=refresh_token`` and answers
    ``{"access_token": ...}``. The OAuth2 password grant is not supported (Azure/acr#104);
    containerd's ``authorizer.go``: "As of January 2022, ACR is known to return 400", and falls
    back to the GET. The admin user logs in with the registry's name and a password.
    A 401: "authentication required, visit https://aka.ms/acr/authorization for more
    information." (microsoft/azure-pipelines-tasks#13490). A missing tag:
    ``{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest tagged by \\"1.1.2\\" is not
    found","detail":{"Tag":"1.1.2"}}]}`` (MicrosoftDocs/azure-docs#90060).

    Not found in sources: what ``GET /oauth2/token`` answers (the emulation: the same shape as
    the POST) and what an anonymous token request gets when anonymous pull is off (the
    emulation: a token that opens nothing, so the registry says 401).
    """

    realm_path = "/oauth2/token"
    NULL_GUID = "00000000-0000-0000-0000-000000000000"
    unauthorized_message = (
        "authentication required, visit https://aka.ms/acr/authorization for more information."
    )

    def __init__(self, site: Site, stack: ExitStack) -> None:
        super().__init__(site, stack)
        self.service = self.front.host
        self.aad_token = "eyJ0eXAiOiJKV1Qi." + secrets.token_urlsafe(40)
        self.refresh_tokens: set[str] = set()
        admin = secrets.token_urlsafe(24)
        self.users = {"emulatedacr": admin}
        refresh = self._exchange(site.tls.client_context())
        self.logins = {"refresh": (self.NULL_GUID, refresh), "admin": ("emulatedacr", admin)}

    def _exchange(self, context: ssl.SSLContext) -> str:
        """``az acr login``'s step: an AAD access token for an ACR refresh token."""
        form = {
            "grant_type": "access_token",
            "service": self.service or "",
            "tenant": "409520d4-8100-4d1d-ad47-72432ddcc120",
            "access_token": self.aad_token,
        }
        with httpx.Client(verify=context, timeout=10.0, trust_env=False) as client:
            answer = client.post(f"{self.front.url}/oauth2/exchange", data=form)
        answer.raise_for_status()
        token: str = answer.json()["refresh_token"]
        return token

    def on_front(self, request: Request) -> Concrete:
        if request.path == "/oauth2/exchange":
            return self._on_exchange(request)
        return super().on_front(request)

    def _on_exchange(self, request: Request) -> Respond:
        form = {k: v[0] for k, v in request.form.items() if v}
        if request.method != "POST" or form.get("access_token") != self.aad_token:
            return oci_error(401, "UNAUTHORIZED", "invalid AAD access token")
        refresh = "eyJhbGciOiJSUzI1NiJ9." + secrets.token_urlsafe(48)
        self.refresh_tokens.add(refresh)
        return answer_json(200, {"refresh_token": refresh})

    def login(self, username: str, password: str) -> str | None:
        if username == self.NULL_GUID:
            return "aad-user" if password in self.refresh_tokens else None
        return super().login(username, password)

    def may_pull(self, subject: str | None, repository: str) -> bool:
        # A role on the registry (AcrPull) covers every repository, present or not.
        return subject is not None

    def on_token_post(self, request: Request) -> Concrete:
        form = {k: v[0] for k, v in request.form.items() if v}
        if form.get("grant_type") != "refresh_token":
            return answer_json(400, {"error": "unsupported_grant_type"})
        if form.get("refresh_token") not in self.refresh_tokens:
            return answer_json(401, {"error": "invalid_grant"})
        return self.issue("aad-user", requested_repositories(request))

    def token_body(self, token: str) -> dict[str, object]:
        return {"access_token": token}

    def serve(self, request: Request, repository: str, grant: Grant) -> Concrete:
        if "/manifests/" not in request.path:
            return Forward()
        reference = reference_of(request.path)
        message = f'manifest tagged by "{reference}" is not found'
        return Replace({404: oci_error(404, "MANIFEST_UNKNOWN", message, {"Tag": reference})})


# -- Google Artifact Registry -------------------------------------------------------------------


class ArtifactRegistry(Emulation):
    """Google Artifact Registry: the challenge carries a realm and no service,
    ``Bearer realm="https://europe-docker.pkg.dev/v2/token"`` (apple/containerization
    ``Tests/ContainerizationOCITests/ArtifactRegistryLoginTests.swift``, a live check). Users
    log in as ``oauth2accesstoken`` with an OAuth2 access token as the password
    (cloud.google.com/container-registry/docs/advanced-authentication). containerd's
    ``authorizer.go``: "As of September 2017, GCR is known to return 404" for the OAuth2 POST
    (for GAR itself: not found in sources; the emulation answers the same). A caller without
    the permission is refused with 403 "denied: Permission
    \\"artifactregistry.repositories.downloadArtifacts\\" denied on resource
    \\"projects/P/locations/L/repositories/R\\" (or it may not exist)", on the manifest HEAD
    (terraform-google-modules/terraform-google-kubernetes-engine#1779): a repository that does
    not exist is denied too. What the token endpoint answers anonymously (the emulation: a
    token for public repositories) and the fields of its answer (``{"token": ...}``): not
    found in sources.
    """

    realm_path = "/v2/token"
    challenge_scope = False
    post_status = 404

    def __init__(self, site: Site, stack: ExitStack) -> None:
        super().__init__(site, stack)
        token = "ya29." + secrets.token_urlsafe(60)
        self.users = {"oauth2accesstoken": token}
        self.logins = {"right": ("oauth2accesstoken", token)}

    def refused(self, repository: str, grant: Grant) -> Respond:
        first = repository.partition("/")[0]
        resource = f"projects/emulated/locations/europe/repositories/{first}"
        message = (
            'Permission "artifactregistry.repositories.downloadArtifacts" denied on resource '
            f'"{resource}" (or it may not exist)'
        )
        return oci_error(403, "DENIED", message)

    def token_body(self, token: str) -> dict[str, object]:
        return {"token": token}


# -- GitHub Container Registry ------------------------------------------------------------------


class GitHubContainerRegistry(Emulation):
    """ghcr.io: ``GET /token?service=ghcr.io&scope=repository:<name>:pull`` on its own host
    gives anyone a token for a public package (termoshtt/ocipkg#41, Mic92/niks3#229: ``jq -r
    .token``); for a package that is not public it answers 401, "failed to fetch anonymous
    token ... 401 Unauthorized" (openai/tunnel-client#75). A manifest asked without a token is
    401 ``{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}``
    (openappsec/openappsec#306). An OCI index asked without the OCI index type in Accept is
    404 "OCI index found, but Accept header does not support OCI indexes" (Mic92/niks3#229):
    the Distribution registry behind the front answers so itself, so the front forwards.
    The 401 body of the token endpoint: not found in sources (Distribution's wording here).
    The scenarios send no credentials (a PAT's path is the Distribution one, and whether
    ghcr.io takes the OAuth2 POST was not found in sources).
    """

    service = "ghcr.io"

    def on_token(self, request: Request) -> Concrete:
        if request.method == "GET" and basic_credentials(request) is None:
            wanted = requested_repositories(request)
            if not all(self.may_pull(None, r) for r in wanted):
                return oci_error(401, "UNAUTHORIZED", "authentication required")
        return super().on_token(request)

    def token_body(self, token: str) -> dict[str, object]:
        return {"token": token}


# -- Quay -------------------------------------------------------------------------------------


class Quay(Emulation):
    """Quay (quay/quay ``endpoints/v2/v2auth.py``): the token endpoint is
    ``@v2_bp.route("/auth")`` on the registry's host, GET only (a Flask route's default
    methods), so the OAuth2 POST is 405; containerd falls back to the GET on 405 when it has
    a username (``authorizer.go``). Credentials that fail are ``InvalidLogin``, 401
    "Specified credentials are invalid"; a repository the caller may not read gets an access
    entry with no actions, so the registry then refuses the token, 401 "access to the
    requested resource is not authorized" (``endpoints/v2/errors.py``); the answer is
    ``{"token": ...}``. Robot accounts log in as ``<namespace>+<robot>``: a ``+`` in the
    username.
    """

    realm_path = "/v2/auth"
    post_status = 405
    unauthorized_message = "access to the requested resource is not authorized"

    def __init__(self, site: Site, stack: ExitStack) -> None:
        super().__init__(site, stack)
        self.service = self.front.host
        token = secrets.token_hex(32).upper()
        self.users = {"private+puller": token}
        self.logins = {"robot": ("private+puller", token)}

    def login_refused(self) -> Respond:
        return oci_error(401, "UNAUTHORIZED", "Specified credentials are invalid")

    def token_body(self, token: str) -> dict[str, object]:
        return {"token": token}


# -- Harbor (or Nexus) behind a TLS-terminating proxy ---------------------------------------------


class HarborBehindProxy(Emulation):
    """Harbor served over plain HTTP behind a proxy that terminates TLS: Harbor builds its
    realm from its own view of the URL, so it advertises
    ``Bearer realm="http://<host>/service/token",service="harbor-registry"``
    (goharbor/harbor#3114 shows the header, #20530 the cause): an https registry with a
    plain-http token realm. Its token answer: ``{"token", "expires_in": 1800, "issued_at"}``
    (#3114). A missing artifact is 404 with the code NOT_FOUND rather than MANIFEST_UNKNOWN
    (goharbor/harbor#16515, containers/image#2413). Anonymous callers may pull public
    projects. Whether Harbor's token service takes the OAuth2 POST: Harbor 1.9.2 answered it
    403 (containerd/containerd#3912, not merged); no scenario here sends credentials.
    """

    service = "harbor-registry"
    realm_path = "/service/token"

    def __init__(self, site: Site, stack: ExitStack) -> None:
        super().__init__(site, stack)
        self.realm = self.serve_token_elsewhere(stack, "127.0.0.1", tls=False) + self.realm_path

    def token_body(self, token: str) -> dict[str, object]:
        issued = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return {"token": token, "expires_in": 1800, "issued_at": issued}

    def serve(self, request: Request, repository: str, grant: Grant) -> Concrete:
        if "/manifests/" not in request.path:
            return Forward()
        message = f"artifact {repository}:{reference_of(request.path)} not found"
        return Replace({404: oci_error(404, "NOT_FOUND", message)})


class HarborRobot(HarborBehindProxy):
    """:class:`HarborBehindProxy` with a robot account (``robot$puller``, Harbor's robot
    naming, goharbor/harbor docs "Create Robot Accounts") that may pull the private project.
    containerd sends its password to the plain-http realm; imagecheck sends it only to the
    realm's https twin, or over http when the realm host is named with --insecure-registry.

    The OAuth2 POST that containerd sends with credentials: Harbor 1.9.2 answered it 403
    (containerd/containerd#3912), which containerd does not fall back from; this front
    answers 405, as a token handler serving GET only does, and containerd then asks with GET
    (remotes/docker/authorizer.go). Which answer a given Harbor version gives is not
    established here: these scenarios are about the realm's scheme, not the POST."""

    post_status = 405

    def __init__(self, site: Site, stack: ExitStack, *, realm_named_insecure: bool = False) -> None:
        super().__init__(site, stack)
        token = secrets.token_urlsafe(24)
        self.users = {"robot$puller": token}
        self.logins = {"robot": ("robot$puller", token)}
        self.realm_named_insecure = realm_named_insecure

    def case(self, name: str, login: str | None) -> Case:
        case = super().case(name, login)
        if not self.realm_named_insecure:
            return case
        realm_host = self.realm.split("://", 1)[1].split("/", 1)[0]
        return Case(case.reference, replace(case.access, insecure_hosts=(realm_host,)))


class HarborRobotRealmAllowed(HarborRobot):
    def __init__(self, site: Site, stack: ExitStack) -> None:
        super().__init__(site, stack, realm_named_insecure=True)


# -- JFrog Artifactory ----------------------------------------------------------------------------


class Artifactory(Emulation):
    """JFrog Artifactory (subdomain method): the challenge names a realm under the repository,
    ``Bearer realm="https://<host>/artifactory/api/docker/<repo>/v2/token",
    service="<host>",scope="repository:<name>:pull"``, with ``Content-Type:
    application/json;charset=ISO-8859-1`` (containerd/containerd#6339). containerd's
    ``authorizer.go``: "As of February 2018, JFrog Artifactory is known to return 401" for the
    OAuth2 POST. Through a virtual repository, a tag that does not exist is 403, not 404
    (google/go-containerregistry#1691: "Artifactory will return a 403 for non-existent tags
    if you are using virtual repositories"), with ``{"errors":[{"code":"UNAUTHORIZED",
    "message":"The client does not have permission for manifest: Download request for repo:path
    '<repo>:<name>/<tag>/list.manifest.json' is forbidden for user: '<user>'."}]}``
    (sigstore/cosign#2973). The fields of the token answer (a ``token`` is read by
    ``curl ... | jq .token`` in consumers): ``{"token": ...}``.
    """

    REPO = "docker-virtual"
    realm_path = f"/artifactory/api/docker/{REPO}/v2/token"
    post_status = 401

    def __init__(self, site: Site, stack: ExitStack) -> None:
        super().__init__(site, stack)
        self.service = self.front.host
        key = "AKCp8" + secrets.token_urlsafe(50)
        self.users = {"deployer": key}
        self.logins = {"right": ("deployer", key), "wrong": ("deployer", key[:-1])}

    def may_pull(self, subject: str | None, repository: str) -> bool:
        return subject is not None  # the virtual repository answers for any name

    def unauthorized(self, repository: str | None, error: str | None) -> Respond:
        answer = super().unauthorized(repository, error)
        headers = {**answer.headers, "Content-Type": "application/json;charset=ISO-8859-1"}
        return Respond(answer.status, headers, answer.body)

    def serve(self, request: Request, repository: str, grant: Grant) -> Concrete:
        if "/manifests/" not in request.path:
            return Forward()
        path = f"{self.REPO}:{repository}/{reference_of(request.path)}/list.manifest.json"
        message = (
            "The client does not have permission for manifest: Download request for repo:path "
            f"'{path}' is forbidden for user: '{grant.subject}'."
        )
        forbidden = oci_error(
            403,
            "UNAUTHORIZED",
            message,
            {"manifest": repository},
            **{"Content-Type": "application/json;charset=ISO-8859-1"},
        )
        return Replace({404: forbidden})

    def token_body(self, token: str) -> dict[str, object]:
        return {"token": token}


# -- scenarios ------------------------------------------------------------------------------------

Factory = Callable[[Site, ExitStack], Emulation]


def emulated(factory: Factory, name: str, *, login: str | None = None) -> Prepare:
    """``name`` on the emulated registry, anonymously or with one of its ``logins``."""

    @contextmanager
    def prepare(site: Site) -> Iterator[Case]:
        with ExitStack() as stack:
            yield factory(site, stack).case(name, login)

    return prepare


PRIVATE = "private/secret:1.0"

EMULATED: tuple[Scenario, ...] = (
    # -- Docker Hub --
    Scenario(
        "hub-anon-public",
        "Docker Hub",
        "anonymous, public index; realm on another host; pull limits counted",
        FOUND,
        emulated(DockerHub, "sample/app:multi"),
    ),
    Scenario(
        "hub-anon-missing-tag",
        "Docker Hub",
        "anonymous, public repository, tag never pushed",
        MISSING,
        emulated(DockerHub, "sample/app:nope"),
    ),
    Scenario(
        "hub-anon-no-repo",
        "Docker Hub",
        "anonymous, repository that does not exist",
        DENIED,
        emulated(DockerHub, "nobody/nothing:1"),
    ),
    # -- GitLab --
    Scenario(
        "gitlab-anon-public",
        "GitLab",
        "anonymous, public project; /jwt/auth on another host",
        FOUND,
        emulated(GitLab, "sample/app:1.0.0"),
    ),
    Scenario(
        "gitlab-pat-private",
        "GitLab",
        "personal access token, private project (OAuth2 POST is 404: GET)",
        FOUND,
        emulated(GitLab, PRIVATE, login="right"),
    ),
    Scenario(
        "gitlab-pat-missing-tag",
        "GitLab",
        "personal access token, tag never pushed",
        MISSING,
        emulated(GitLab, "private/secret:2.0", login="right"),
    ),
    Scenario(
        "gitlab-pat-no-project",
        "GitLab",
        "personal access token, project that does not exist: scope dropped",
        DENIED,
        emulated(GitLab, "nobody/nothing:1", login="right"),
    ),
    Scenario(
        "gitlab-wrong-token",
        "GitLab",
        "wrong token: /jwt/auth answers 401",
        DENIED,
        emulated(GitLab, PRIVATE, login="wrong"),
    ),
    # -- Amazon ECR --
    Scenario(
        "ecr-found",
        "Amazon ECR",
        "Basic auth, user AWS and a GetAuthorizationToken password",
        FOUND,
        emulated(ECR, PRIVATE, login="right"),
    ),
    Scenario(
        "ecr-missing-tag",
        "Amazon ECR",
        "tag never pushed: 404 MANIFEST_UNKNOWN",
        MISSING,
        emulated(ECR, "private/secret:2.0", login="right"),
    ),
    Scenario(
        "ecr-missing-repo",
        "Amazon ECR",
        "repository that does not exist: 404 NAME_UNKNOWN",
        MISSING,
        emulated(ECR, "nobody/nothing:1", login="right"),
    ),
    Scenario(
        "ecr-expired",
        "Amazon ECR",
        "password older than 12 hours: 403 DENIED",
        DENIED,
        emulated(ECR, PRIVATE, login="expired"),
    ),
    # -- Azure Container Registry --
    Scenario(
        "acr-refresh-token",
        "Azure ACR",
        "null-GUID user, refresh token from /oauth2/exchange (password grant is 400)",
        FOUND,
        emulated(ACR, PRIVATE, login="refresh"),
    ),
    Scenario(
        "acr-admin-missing-tag",
        "Azure ACR",
        "admin user, tag never pushed",
        MISSING,
        emulated(ACR, "private/secret:2.0", login="admin"),
    ),
    Scenario(
        "acr-anonymous",
        "Azure ACR",
        "anonymous, anonymous pull off",
        DENIED,
        emulated(ACR, PRIVATE),
    ),
    # -- Google Artifact Registry --
    Scenario(
        "gar-found",
        "Google GAR",
        "oauth2accesstoken; challenge without service",
        FOUND,
        emulated(ArtifactRegistry, PRIVATE, login="right"),
    ),
    Scenario(
        "gar-missing-tag",
        "Google GAR",
        "oauth2accesstoken, tag never pushed",
        MISSING,
        emulated(ArtifactRegistry, "private/secret:2.0", login="right"),
    ),
    Scenario(
        "gar-no-repo",
        "Google GAR",
        "oauth2accesstoken, repository that does not exist: 403",
        DENIED,
        emulated(ArtifactRegistry, "nobody/nothing:1", login="right"),
    ),
    # -- GitHub Container Registry --
    Scenario(
        "ghcr-anon-index",
        "GitHub GHCR",
        "anonymous token, public OCI index",
        FOUND,
        emulated(GitHubContainerRegistry, "sample/app:multi"),
    ),
    Scenario(
        "ghcr-anon-missing-tag",
        "GitHub GHCR",
        "anonymous token, public package, tag never pushed",
        MISSING,
        emulated(GitHubContainerRegistry, "sample/app:nope"),
    ),
    Scenario(
        "ghcr-anon-private",
        "GitHub GHCR",
        "anonymous, private package: the token endpoint answers 401",
        DENIED,
        emulated(GitHubContainerRegistry, PRIVATE),
    ),
    # -- Quay --
    Scenario(
        "quay-robot-private",
        "Quay",
        "robot account (a + in the user), private repository; POST /v2/auth is 405",
        FOUND,
        emulated(Quay, PRIVATE, login="robot"),
    ),
    Scenario(
        "quay-robot-missing-tag",
        "Quay",
        "robot account, tag never pushed",
        MISSING,
        emulated(Quay, "private/secret:2.0", login="robot"),
    ),
    Scenario(
        "quay-anon-private",
        "Quay",
        "anonymous, private repository",
        DENIED,
        emulated(Quay, PRIVATE),
    ),
    # -- Harbor behind a TLS-terminating proxy --
    Scenario(
        "harbor-http-realm",
        "Harbor",
        "https registry, realm http:// (TLS ended at a proxy), public project",
        FOUND,
        emulated(HarborBehindProxy, "sample/app:list"),
    ),
    Scenario(
        "harbor-http-realm-missing",
        "Harbor",
        "realm http://, tag never pushed: 404 NOT_FOUND",
        MISSING,
        emulated(HarborBehindProxy, "sample/app:nope"),
        # skopeo 1.9's containers/image reads Harbor's NOT_FOUND as an unknown error: it
        # learnt to read it as "manifest unknown" later (containers/image#2413, 2024).
        skopeo=ERROR,
    ),
    Scenario(
        "harbor-http-realm-private",
        "Harbor",
        "realm http://, anonymous, private project",
        DENIED,
        emulated(HarborBehindProxy, PRIVATE),
    ),
    Scenario(
        "harbor-http-realm-robot",
        "Harbor",
        "realm http://, robot account: its https twin does not answer",
        FOUND,
        emulated(HarborRobot, PRIVATE, login="robot"),
        imagecheck=ERROR,
        difference="http-realm-credentials",
    ),
    Scenario(
        "harbor-http-realm-robot-allowed",
        "Harbor",
        "realm http://, robot account, realm host named with --insecure-registry",
        FOUND,
        emulated(HarborRobotRealmAllowed, PRIVATE, login="robot"),
    ),
    # -- JFrog Artifactory --
    Scenario(
        "artifactory-found",
        "Artifactory",
        "API key; OAuth2 POST answers 401: GET",
        FOUND,
        emulated(Artifactory, PRIVATE, login="right"),
    ),
    Scenario(
        "artifactory-missing-tag",
        "Artifactory",
        "tag never pushed, virtual repository: 403, not 404",
        DENIED,
        emulated(Artifactory, "private/secret:2.0", login="right"),
    ),
    Scenario(
        "artifactory-wrong-key",
        "Artifactory",
        "wrong API key: the token endpoint answers 401",
        DENIED,
        emulated(Artifactory, PRIVATE, login="wrong"),
    ),
)
