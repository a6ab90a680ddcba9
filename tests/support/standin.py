"""A hostile registry stand-in: the :class:`~tests.support.hostile.HostileServer` answering
from a script, whatever the current hypothesis example says.

Each request is given a *role* from its path: ``ping`` (``/v2/``), ``token`` (``/token``),
``manifest`` (``/v2/<name>/manifests/...``), ``blob`` (``/v2/<name>/blobs/...``) or ``other``
(anything else, e.g. where a redirect pointed). A :class:`Script` maps each role to a list
of actions; the n-th request of a role gets the n-th action (the last one repeats), so a
retry can be answered differently from the first try. A role the script leaves out gets a
plain, well-behaved answer (:data:`DEFAULTS`).

Actions: :class:`Reply` (any status, headers and body, framed honestly or not),
:class:`Hang`, :class:`Trickle`, :class:`Drop` (part of an answer, then RST or FIN) and
:class:`Raw` (bytes that are not HTTP at all). Bodies may be bytes or generated lazily:
:class:`Endless` (tens of MiB), :class:`GzipBomb` (a small gzip stream that inflates to
256 MiB) and :class:`DeepJson` (hundreds of thousands of ``[``).

Markers in header values and bodies are filled in when a request is answered:
``@@SELF@@`` (this server, ``127.0.0.1:PORT``), ``@@ELSEWHERE@@`` (a second listener: another
origin, where credentials must never arrive), ``@@AUTH@@`` (the ``Authorization`` header this
request carried) and ``@@AUTHDECODED@@`` (a Basic header decoded: ``user:password``), so a
registry can echo back what it was sent.

The server core refuses TLS ClientHellos as Go does, journals every request
(:class:`Exchange`), serves at most ``max_connections`` connections at once, and bounds every
answer by :data:`MAX_ANSWER_SECONDS`; :meth:`StandIn.close` ends every hang, trickle and
stream and joins every thread.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tests.support.hostile import (
    Connection,
    DeepJson,
    Endless,
    Exchange,
    GzipBomb,
    Hang,
    HostileServer,
    Reply,
    Request,
    Reset,
    Trickle,
)

__all__ = [
    "AUTH",
    "AUTH_DECODED",
    "DEFAULTS",
    "ELSEWHERE",
    "MANIFEST_BODY",
    "MAX_ANSWER_SECONDS",
    "ROLES",
    "SELF",
    "Action",
    "DeepJson",
    "Drop",
    "Endless",
    "Exchange",
    "GzipBomb",
    "Hang",
    "Raw",
    "Reply",
    "Role",
    "Script",
    "StandIn",
    "Trickle",
    "big",
    "role_of",
    "statuses_sent",
]

Role = Literal["ping", "token", "manifest", "blob", "other", "elsewhere"]
ROLES: tuple[Role, ...] = ("ping", "token", "manifest", "blob", "other")

SELF = "@@SELF@@"
ELSEWHERE = "@@ELSEWHERE@@"
AUTH = "@@AUTH@@"
AUTH_DECODED = "@@AUTHDECODED@@"

# How long any one answer may take, whatever the script says: the properties' bounds are a
# few seconds, and a stand-in thread must never outlive its example by much.
MAX_ANSWER_SECONDS = 6.0


@dataclass(frozen=True)
class Drop(Reset):
    """Send ``partial``, then close: with RST when ``rst``, else FIN."""

    partial: bytes = b""


@dataclass(frozen=True)
class Raw:
    """Send ``data`` (not HTTP) and close."""

    data: bytes


Action = Reply | Hang | Trickle | Drop | Raw

MANIFEST_BODY = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": "sha256:" + "a" * 64,
            "size": 2,
        },
        "layers": [],
    }
).encode()

DEFAULTS: Mapping[Role, Action] = {
    "ping": Reply(200, (("Content-Type", "application/json"),), b"{}"),
    "token": Reply(200, (("Content-Type", "application/json"),), b'{"token": "fuzz-token"}'),
    "manifest": Reply(
        200,
        (
            ("Content-Type", "application/vnd.oci.image.manifest.v1+json"),
            ("Docker-Content-Digest", "sha256:" + "0" * 64),
        ),
        MANIFEST_BODY,
    ),
    "blob": Reply(200, (("Content-Type", "application/octet-stream"),), b"{}"),
    "other": Reply(404, (("Content-Type", "text/plain"),), b"not here\n"),
    "elsewhere": Reply(404, (("Content-Type", "text/plain"),), b"elsewhere\n"),
}


@dataclass(frozen=True)
class Script:
    """What each role answers, in order; the last action of a role repeats."""

    actions: Mapping[Role, tuple[Action, ...]] = field(default_factory=dict)

    def pick(self, role: Role, n: int) -> Action:
        listed = self.actions.get(role, ())
        if not listed:
            return DEFAULTS[role]
        return listed[min(n, len(listed) - 1)]

    def __repr__(self) -> str:
        shown = ", ".join(f"{role}={list(acts)!r}" for role, acts in self.actions.items())
        return f"Script({shown})"


def role_of(path: str) -> Role:
    if path == "/v2/" or path == "/v2":
        return "ping"
    if path.startswith("/token"):
        return "token"
    if path.startswith("/v2/") and "/manifests/" in path:
        return "manifest"
    if path.startswith("/v2/") and "/blobs/" in path:
        return "blob"
    return "other"


_BIG = re.compile(rb"@@BIG(\d+)\*(.)@@")


def big(n: int, char: str = "x") -> str:
    """A marker the stand-in expands to ``char`` repeated ``n`` times (keeps the reprs of
    examples short)."""
    return f"@@BIG{n}*{char}@@"


def _decoded_basic(authorization: str) -> str:
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        return base64.b64decode(value.strip(), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


class StandIn(HostileServer):
    """The hostile registry on ``127.0.0.1:<port>`` (and a second listener, ``elsewhere``).

    ``configure(script)`` before each example; ``exchanges()`` after it.
    """

    def __init__(self, *, max_connections: int = 128) -> None:
        super().__init__(
            listeners=("self", "elsewhere"),
            max_connections=max_connections,
            idle_timeout=MAX_ANSWER_SECONDS,
            answer_bound=MAX_ANSWER_SECONDS,
        )
        self._script_lock = threading.Lock()
        self._script = Script()
        self._counts: Counter[Role] = Counter()

    @property
    def elsewhere_host(self) -> str:
        return self.address("elsewhere")

    def configure(self, script: Script) -> None:
        """A new example: drop connections the last one left, then the new script."""
        self.drop_connections()
        with self._script_lock:
            self._script = script
            self._counts.clear()
            self.clear_journal()

    def exchanges(self) -> list[Exchange]:
        """This example's requests (TLS ClientHellos, refused by the core, left out)."""
        return [e for e in self.journal.copy() if e.action != "reject-tls"]

    def decide(self, conn: Connection, request: Request) -> tuple[Action, int]:
        role: Role = "elsewhere" if conn.listener == "elsewhere" else role_of(request.path)
        with self._script_lock:  # the n-th of a role and its place in the journal agree
            n = self._counts[role]
            self._counts[role] += 1
            action = self._script.pick(role, n)
            exchange = Exchange(
                request.method,
                request.target,
                time.monotonic(),
                listener=conn.listener,
                role=role,
                headers=tuple(request.headers.items()),
            )
            return action, self.journal.add(exchange)

    def perform(
        self, conn: Connection, action: object, request: Request
    ) -> tuple[int | None, bool]:
        head_only = request.method == "HEAD"

        def fill(data: bytes) -> bytes:
            return self._fill(data, request)

        match action:
            case Reply():
                return action.status, conn.reply(action, head_only=head_only, fill=fill)
            case Trickle(reply=Reply() as reply):
                conn.reply(reply, head_only=head_only, trickle=action, fill=fill)
                return reply.status, False
            case Hang(seconds=seconds):
                conn.hang(seconds)
            case Reset(partial=partial, rst=rst):
                conn.reset(partial, rst=rst)
            case Raw(data=data):
                conn.sock.sendall(fill(data))
            case _:
                raise TypeError(f"not a stand-in action: {action!r}")
        return None, False

    def _fill(self, data: bytes, request: Request) -> bytes:
        if b"@@" not in data:
            return data
        authorization = request.header("authorization") or ""
        data = _BIG.sub(lambda m: m.group(2) * int(m.group(1)), data)
        return (
            data.replace(SELF.encode(), self.host.encode())
            .replace(ELSEWHERE.encode(), self.elsewhere_host.encode())
            .replace(AUTH_DECODED.encode(), _decoded_basic(authorization).encode())
            .replace(AUTH.encode(), authorization.encode("utf-8", "replace"))
        )


def statuses_sent(exchanges: Sequence[Exchange]) -> set[int]:
    return {e.status for e in exchanges if e.status is not None}
