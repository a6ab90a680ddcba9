"""The pod's AWS credentials, as each link of the AWS SDKs' default chain gets them (the chain,
its order and what is left out: ``_aws.py``), and what those links share.

* **static keys** (:class:`StaticKeys`): ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and
  ``AWS_SESSION_TOKEN``, as they are; AWS proves them when ECR is asked
  (https://docs.aws.amazon.com/sdkref/latest/guide/feature-static-credentials.html);
* **container credentials** (:class:`ContainerCredentials`): EKS Pod Identity's agent
  (``AWS_CONTAINER_CREDENTIALS_FULL_URI`` with ``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE``) or
  ECS's (``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI``, under ``http://169.254.170.2``, which
  wins when both are set): a GET with the token file's content (read at every flow: the
  kubelet rotates it), else ``AWS_CONTAINER_AUTHORIZATION_TOKEN``, as ``Authorization``,
  answered with ``{AccessKeyId, SecretAccessKey, Token, Expiration}`` and, from EKS's agent,
  ``AccountId`` (ECS's: ``RoleArn``)
  (https://docs.aws.amazon.com/sdkref/latest/guide/feature-container-credentials.html,
  https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html). A full URI over
  plain http must name a loopback address, ``localhost`` or an agent's address
  (169.254.170.2, 169.254.170.23, fd00:ec2::23), as botocore's ``ContainerMetadataFetcher``
  requires; the SDKs that resolve a name first (Go, Rust, the CRT) also take another name
  whose every address is one of those, which is not looked up here;
* **IRSA**, the web identity token exchanged at STS: ``_awssts.py``.

A session's credentials serve one flow: a flow runs once per registry and token lifetime, and
reading the token files each time is what follows their rotation.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from imagecheck._capped import parse_json_object
from imagecheck._deadline import Deadline
from imagecheck._files import read_regular_file
from imagecheck._text import printable, redact
from imagecheck.authn._credentials import bearer_problem, header_problem
from imagecheck.authn.cloud._hosts import CloudRegistry
from imagecheck.authn.cloud._http import CloudAnswer, CloudHTTP, answer_reason, temporary_status
from imagecheck.authn.cloud._sigv4 import AwsCredentials
from imagecheck.errors import CloudAuthError, CredentialsError

# A projected ServiceAccount token is 1 to 2 KiB; nothing a hundred times larger is one.
MAX_TOKEN_FILE = 64 * 1024
ECS_AGENT = "http://169.254.170.2"
_TOKEN_FILE = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"  # noqa: S105 (a variable's name)
# Where plain http may reach a credentials agent: ECS's, and EKS Pod Identity's two.
_AGENTS = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.170.2", "169.254.170.23", "fd00:ec2::23")
)
_EKS_AGENTS = frozenset(ipaddress.ip_address(a) for a in ("169.254.170.23", "fd00:ec2::23"))

Now = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class AwsSession:
    """The AWS credentials one flow got, and who they are, for messages."""

    credentials: AwsCredentials
    principal: str  # an ARN when the flow learnt it, else what was asked ("access key ...WXYZ")
    kind: str  # "IRSA", "EKS Pod Identity", ...
    account: str | None = None
    expires_at: float | None = None  # Unix time, when the endpoint said
    secrets: tuple[str, ...] = field(default=(), repr=False)  # to keep out of any message

    @property
    def shown(self) -> str:
        return f"{self.principal} ({self.kind})"


class AwsIdentity(Protocol):
    """One link of the chain, as the environment names it."""

    def describe(self) -> str:
        """Who would ask, for messages ("role arn:... (IRSA)"): no secret."""
        ...

    async def session(
        self, registry: CloudRegistry, http: CloudHTTP, deadline: Deadline
    ) -> AwsSession: ...


def env_value(env: Mapping[str, str], name: str) -> str:
    """A variable as the SDKs read it: surrounding whitespace dropped, empty as unset."""
    return env.get(name, "").strip()


@dataclass(frozen=True)
class StaticKeys:
    """Keys from the environment: no request (AWS proves them when ECR is asked)."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str = field(default="", repr=False)

    def describe(self) -> str:
        # The CLI's `aws configure list` shows the last four characters: enough to tell keys
        # apart, and an access key id is an identifier AWS prints in its own errors anyway.
        return f"access key ...{self.access_key_id[-4:]} from AWS_ACCESS_KEY_ID"

    async def session(
        self, registry: CloudRegistry, http: CloudHTTP, deadline: Deadline
    ) -> AwsSession:
        try:
            credentials = AwsCredentials(
                self.access_key_id,
                self.secret_access_key,
                self.session_token,
                source="AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN",
            )
        except ValueError as exc:
            raise CredentialsError(str(exc)) from None
        return AwsSession(credentials, self.describe(), "static keys")


@dataclass(frozen=True)
class ContainerCredentials:
    """An ECS or EKS Pod Identity credentials agent (see the module docstring)."""

    url: str
    variable: str  # the variable that named the agent
    token_file: Path | None = None
    token: str = field(default="", repr=False)

    @property
    def kind(self) -> str:
        if self.variable.endswith("RELATIVE_URI"):
            return "ECS task role"
        host = urlsplit(self.url).hostname or ""
        return "EKS Pod Identity" if _address(host) in _EKS_AGENTS else "container credentials"

    def describe(self) -> str:
        return f"the {self.kind} agent at {printable(self.url, 120)} ({self.variable})"

    async def session(
        self, registry: CloudRegistry, http: CloudHTTP, deadline: Deadline
    ) -> AwsSession:
        url = self._checked_url()
        token = self._token()
        what = f"the credentials agent at {printable(url, 120)}"
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = token
        answer = await http.send("GET", url, what=what, deadline=deadline, headers=headers)
        if answer.status != 200:
            raise self._refusal(answer, what, token)
        return self._answered(answer, what, token)

    def _checked_url(self) -> str:
        shown = printable(self.url, 120)
        if self.variable.endswith("RELATIVE_URI") and not self.url.startswith(ECS_AGENT + "/"):
            raise CredentialsError(f"{self.variable} {shown!r} must start with '/'")
        try:
            parts = urlsplit(self.url)
            host = parts.hostname or ""
        except ValueError:
            raise CredentialsError(f"{self.variable} {shown!r} is not a URL") from None
        if parts.scheme == "https" and host:
            return self.url
        if parts.scheme == "http" and (host == "localhost" or _allowed_address(host)):
            return self.url
        raise CredentialsError(
            f"{self.variable} {shown!r}: a credentials agent is reached over https, or over "
            "http on a loopback address or the ECS or EKS agent's address "
            "(169.254.170.2, 169.254.170.23, fd00:ec2::23)"
        )

    def _token(self) -> str:
        if self.token_file is not None:
            return read_token_file(self.token_file, _TOKEN_FILE, check=header_problem)
        problem = header_problem(self.token)
        if problem:
            raise CredentialsError(f"AWS_CONTAINER_AUTHORIZATION_TOKEN {problem}")
        return self.token

    def _refusal(self, answer: CloudAnswer, what: str, token: str) -> CloudAuthError:
        found = error_object(answer)
        code = text_field(found, "code", "Code")
        message = text_field(found, "message", "Message")
        detail = redact(": ".join(p for p in (code, message) if p), [token])
        text = f"{what} refused {self.describe()}: {answer_reason(answer, detail)}"
        if answer.status in (400, 401, 403) and self.token_file is not None:
            text += f"; it did not take the token in {self.token_file} ({_TOKEN_FILE})"
        return CloudAuthError(text, temporary=temporary_status(answer.status))

    def _answered(self, answer: CloudAnswer, what: str, token: str) -> AwsSession:
        found = parse_json_object(answer.body, f"the answer of {what}", error=CloudAuthError)
        account = text_field(found, "AccountId")
        return answered_session(
            what,
            (text_field(found, n) for n in ("AccessKeyId", "SecretAccessKey", "Token")),
            principal=text_field(found, "RoleArn") or (f"account {account}" if account else ""),
            kind=self.kind,
            account=account,
            expiration=text_field(found, "Expiration"),
            asked_with=token,
        )


def answered_session(
    what: str,
    keys: Iterable[str],
    *,
    principal: str,
    kind: str,
    account: str,
    expiration: str,
    asked_with: str,
) -> AwsSession:
    """The session ``what`` answered: ``keys`` (access key id, secret, session token), who
    it is (an ARN, else what was asked), when it expires (ISO 8601); a ``CloudAuthError``
    naming ``what`` for keys that cannot be sent. ``asked_with`` is the token that got them,
    kept out of messages with them."""
    key_id, secret, token = keys
    try:
        credentials = AwsCredentials(key_id, secret, token, source=f"the answer of {what}")
    except ValueError as exc:
        raise CloudAuthError(str(exc)) from None
    return AwsSession(
        credentials,
        printable(principal, 200) or f"an identity {what} gave",
        kind,
        account=account or arn_account(principal),
        expires_at=parse_time(expiration),
        secrets=(secret, token, asked_with),
    )


def read_token_file(
    path: Path, variable: str, *, check: Callable[[str], str | None] = bearer_problem
) -> str:
    """The token in the file ``variable`` names, without surrounding whitespace; a one-line
    ``CredentialsError`` naming the variable and the file, never the content, otherwise."""
    data = read_regular_file(path, limit=MAX_TOKEN_FILE, what=variable, error=CredentialsError)
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CredentialsError(f"{variable} {path} is not UTF-8 text") from None
    if not token:
        raise CredentialsError(f"{variable} {path} is empty")
    problem = check(token)
    if problem:
        raise CredentialsError(f"{variable} {path}: the token {problem}")
    return token


def error_object(answer: CloudAnswer) -> Mapping[str, object]:
    """A refusal's JSON object, or an empty one for any other body (a proxy's error page):
    a refusal is reported by its status then, and keeps its temporary flag."""
    if answer.body.lstrip()[:1] != b"{":
        return {}
    try:
        return parse_json_object(answer.body, "the refusal", error=CloudAuthError)
    except CloudAuthError:
        return {}


def text_field(found: Mapping[str, object], *names: str) -> str:
    """The first of ``names`` that ``found`` holds as a string, else ``""``."""
    for name in names:
        value = found.get(name)
        if isinstance(value, str):
            return value.strip()
    return ""


def parse_time(text: str) -> float | None:
    """An ISO 8601 time (``2024-01-02T03:04:05Z``) as Unix time, or None."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def arn_account(arn: str) -> str | None:
    """The account of ``arn:partition:service:region:account:resource``, or None."""
    parts = arn.split(":")
    account = parts[4] if len(parts) > 5 and parts[0] == "arn" else ""
    return account if len(account) == 12 and account.isdigit() else None


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _allowed_address(host: str) -> bool:
    address = _address(host)
    return address is not None and (address.is_loopback or address in _AGENTS)
