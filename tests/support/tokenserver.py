"""A small Docker-style token server (``/token``) for the token-auth integration registry.

It speaks both halves of the Distribution token spec:

* ``GET /token?service=...&scope=...&account=...`` with optional Basic auth
  (https://distribution.github.io/distribution/spec/auth/token/);
* ``POST /token`` form-encoded OAuth2, ``grant_type=password`` or ``refresh_token``
  (https://distribution.github.io/distribution/spec/auth/oauth/).

Tokens are RS256 JWTs with the signing certificate in ``x5c``. Policy: anonymous callers get
``pull`` on ``sample/*`` and ``public/*``; a known user gets every action asked for, on every
repository. Like real token servers, a scope the caller may not have is *left out* of the
token rather than refused, so the registry, not the token server, says no.

Every request is recorded (:attr:`TokenServer.requests`) so tests assert on what the server
received. :meth:`TokenServer.fail_next` and :meth:`TokenServer.configure` change behaviour;
:meth:`TokenServer.reset` restores the defaults.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socket import socket
from types import TracebackType
from typing import Any, Self

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.pki import TokenSigner

DEFAULT_FIELDS = frozenset({"token", "access_token", "expires_in", "issued_at"})
ANONYMOUS_PULL_PREFIXES = ("sample/", "public/")


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the token server saw it. Header names are lower-case."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    form: dict[str, list[str]]

    @property
    def scopes(self) -> list[str]:
        """Scopes asked for: repeated ``scope`` params (GET) or space-separated (POST form)."""
        if self.method == "POST":
            return [s for value in self.form.get("scope", []) for s in value.split()]
        return self.query.get("scope", [])

    @property
    def service(self) -> str | None:
        values = self.form.get("service") if self.method == "POST" else self.query.get("service")
        return values[0] if values else None

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")


@dataclass
class _Behaviour:
    fields: frozenset[str] = DEFAULT_FIELDS
    expires_in: int = 300
    fail_count: int = 0
    fail_status: int = 503
    fail_headers: dict[str, str] = field(default_factory=dict)
    token_suffix: str = ""


class TokenServer:
    """HTTPS token server on 127.0.0.1; start with ``with`` or :meth:`start`.

    ``ssl_context=None`` serves plain HTTP: a token service as a registry behind a
    TLS-terminating proxy (Harbor, Nexus) advertises it, ``realm="http://..."``.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None,
        signer: TokenSigner,
        service: str,
        issuer: str = "imagecheck-test-issuer",
        users: dict[str, str] | None = None,
        refresh_tokens: dict[str, str] | None = None,
    ) -> None:
        self.service = service
        self.issuer = issuer
        self.users = dict(users or {})
        # refresh (identity) token -> user it stands for
        self.refresh_tokens = dict(refresh_tokens or {})
        self._signer = signer
        # Loaded once: PyJWT given PEM bytes loads (and checks) the RSA key at every token,
        # about 40 ms, which made this server the bottleneck of any run with many tokens.
        key = serialization.load_pem_private_key(signer.private_key_pem, password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise TypeError("the token signer's key must be RSA (RS256)")
        self._key = key
        self._ssl_context = ssl_context
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._behaviour = _Behaviour()
        self._server: _HTTPSServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("token server not started")
        return int(self._server.server_address[1])

    @property
    def realm(self) -> str:
        scheme = "https" if self._ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}/token"

    def start(self) -> None:
        server = _HTTPSServer(("127.0.0.1", 0), _Handler, self._ssl_context, self)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- what tests read and change -------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def fail_next(
        self, count: int, status: int = 503, headers: dict[str, str] | None = None
    ) -> None:
        """Answer the next ``count`` requests with ``status`` and a JSON error body."""
        with self._lock:
            self._behaviour.fail_count = count
            self._behaviour.fail_status = status
            self._behaviour.fail_headers = dict(headers or {})

    def configure(
        self,
        *,
        fields: Iterable[str] | None = None,
        expires_in: int | None = None,
        token_suffix: str | None = None,
    ) -> None:
        """Choose which of token/access_token/expires_in/issued_at a response carries, and
        the lifetime (seconds) both advertised in ``expires_in`` and put in the JWT's ``exp``;
        ``token_suffix`` is appended to every token issued (``"\\n"``: a broken server).
        """
        with self._lock:
            if fields is not None:
                unknown = set(fields) - DEFAULT_FIELDS
                if unknown:
                    raise ValueError(f"unknown response fields: {sorted(unknown)}")
                self._behaviour.fields = frozenset(fields)
            if expires_in is not None:
                self._behaviour.expires_in = expires_in
            if token_suffix is not None:
                self._behaviour.token_suffix = token_suffix

    def reset(self) -> None:
        """Forget recorded requests and restore the default behaviour."""
        with self._lock:
            self._requests.clear()
            self._behaviour = _Behaviour()

    def issue(self, subject: str, access: list[dict[str, Any]], expires_in: int = 300) -> str:
        """Sign a token directly, e.g. an expired one (negative ``expires_in``)."""
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "aud": self.service,
            "exp": now + expires_in,
            "nbf": now - 5,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        headers = {"x5c": [base64.b64encode(self._signer.cert_der).decode()]}
        return jwt.encode(claims, self._key, algorithm="RS256", headers=headers)

    def grant(self, subject: str | None, scope: str) -> dict[str, Any] | None:
        """The access entry ``subject`` (None: anonymous) gets for ``scope``, if any."""
        parsed = _parse_scope(scope)
        if parsed is None:
            return None
        kind, name, wanted = parsed
        if subject is not None and subject in self.users:
            allowed = wanted
        elif kind == "repository" and name.startswith(ANONYMOUS_PULL_PREFIXES):
            allowed = [a for a in wanted if a == "pull"]
        else:
            allowed = []
        return {"type": kind, "name": name, "actions": allowed} if allowed else None

    # --- request handling (called from the server's threads) -----------------------------

    def _record(self, request: RecordedRequest) -> tuple[_Behaviour, bool]:
        """Record ``request``; return the behaviour to apply and whether to fail it."""
        with self._lock:
            self._requests.append(request)
            behaviour = _Behaviour(**vars(self._behaviour))
            failing = self._behaviour.fail_count > 0
            if failing:
                self._behaviour.fail_count -= 1
        return behaviour, failing

    def _answer(self, request: RecordedRequest) -> tuple[int, dict[str, str], dict[str, Any]]:
        behaviour, failing = self._record(request)
        if failing:
            body = {"errors": [{"code": "UNAVAILABLE", "message": "injected failure"}]}
            return behaviour.fail_status, behaviour.fail_headers, body
        if request.path != "/token":
            return 404, {}, {"errors": [{"code": "NOT_FOUND", "message": request.path}]}
        if request.method == "GET":
            return self._answer_get(request, behaviour)
        return self._answer_post(request, behaviour)

    def _answer_get(
        self, request: RecordedRequest, behaviour: _Behaviour
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        subject: str | None = None
        if request.authorization is not None:
            subject = self._check_basic(request.authorization)
            if subject is None:
                return 401, {}, _unauthorized("incorrect username or password")
        offline = request.query.get("offline_token", [""])[0] == "true"
        refresh = self._refresh_token_for(subject) if offline and subject else None
        return 200, {}, self._token_response(subject, request.scopes, behaviour, refresh)

    def _answer_post(
        self, request: RecordedRequest, behaviour: _Behaviour
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        form = {k: v[0] for k, v in request.form.items() if v}
        grant_type = form.get("grant_type")
        subject: str | None = None
        refresh: str | None = None
        if grant_type == "password":
            subject = self._check_password(form.get("username", ""), form.get("password", ""))
            if subject is not None and form.get("access_type") == "offline":
                refresh = self._refresh_token_for(subject)
        elif grant_type == "refresh_token":
            refresh = form.get("refresh_token", "")
            with self._lock:
                subject = self.refresh_tokens.get(refresh)
        else:
            return 400, {}, _oauth_error("unsupported_grant_type", str(grant_type))
        if subject is None:
            return 401, {}, _oauth_error("invalid_grant", f"bad {grant_type}")
        return 200, {}, self._token_response(subject, request.scopes, behaviour, refresh)

    def _check_basic(self, authorization: str) -> str | None:
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            username, _, password = base64.b64decode(encoded).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return self._check_password(username, password)

    def _check_password(self, username: str, password: str) -> str | None:
        known = self.users.get(username)
        if known is not None and secrets.compare_digest(known.encode(), password.encode()):
            return username
        return None

    def _refresh_token_for(self, subject: str) -> str:
        with self._lock:
            for token, user in self.refresh_tokens.items():
                if user == subject:
                    return token
            token = secrets.token_urlsafe(24)
            self.refresh_tokens[token] = subject
            return token

    def _token_response(
        self,
        subject: str | None,
        scopes: list[str],
        behaviour: _Behaviour,
        refresh: str | None,
    ) -> dict[str, Any]:
        access = [entry for scope in scopes if (entry := self.grant(subject, scope)) is not None]
        token = self.issue(subject or "", access, behaviour.expires_in) + behaviour.token_suffix
        full: dict[str, Any] = {
            "token": token,
            "access_token": token,
            "expires_in": behaviour.expires_in,
            "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        body = {k: v for k, v in full.items() if k in behaviour.fields}
        if refresh is not None:
            body["refresh_token"] = refresh
        return body


def _parse_scope(scope: str) -> tuple[str, str, list[str]] | None:
    """``repository:name:pull,push`` -> (type, name, actions); the name may hold ``:``."""
    kind, _, rest = scope.partition(":")
    name, _, actions = rest.rpartition(":")
    if not kind or not name:
        return None
    kind = kind.split("(", 1)[0]  # "repository(plugin)" is still a repository
    return kind, name, [a for a in actions.split(",") if a]


def _unauthorized(message: str) -> dict[str, Any]:
    return {"errors": [{"code": "UNAUTHORIZED", "message": message}]}


def _oauth_error(error: str, description: str) -> dict[str, Any]:
    return {"error": error, "error_description": description}


class _HTTPSServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        ssl_context: ssl.SSLContext | None,
        owner: TokenServer,
    ) -> None:
        self.ssl_context = ssl_context
        self.owner = owner
        super().__init__(address, handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # Wrap here, in the connection's own thread, so that a client that never finishes
        # its TLS handshake holds up only itself, not the accept loop.
        assert isinstance(request, socket)
        request.settimeout(10)
        if self.ssl_context is None:  # plain HTTP
            super().finish_request(request, client_address)
            return
        try:
            tls = self.ssl_context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            tls.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-request is normal in tests; keep stderr quiet.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPSServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm, the body of every answer
    # after the first on a kept-alive connection waits for the client's delayed ACK (40 ms).
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        form: dict[str, list[str]] = {}
        if self.headers.get_content_type() == "application/x-www-form-urlencoded":
            form = urllib.parse.parse_qs(body.decode(), keep_blank_values=True)
        request = RecordedRequest(
            method=self.command,
            path=url.path,
            query=urllib.parse.parse_qs(url.query, keep_blank_values=True),
            headers={k.lower(): v for k, v in self.headers.items()},
            form=form,
        )
        status, headers, payload = self.server.owner._answer(request)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
