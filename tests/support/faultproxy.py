"""A fault-injecting HTTP/1.1 reverse proxy to put in front of the real registry: the
:class:`~tests.support.hostile.HostileServer` answering by forwarding.

It forwards every request to an upstream base URL and relays the answer, unless a *rule*
matches (method and path regex, ``times`` or forever; first match wins)::

    with FaultProxy(registry_plain.url) as proxy:
        proxy.on("HEAD", MANIFESTS, Respond(503), times=2)
        run_cli(["check", proxy.ref("sample/app:1.0.0")], home)
        assert proxy.count(path=MANIFESTS) == 3

Actions: :class:`Forward`, :class:`Respond` (any status, headers and body),
:class:`Hang` (read the request, never answer), :class:`Trickle` (send the answer a few bytes
at a time), :class:`Reset` (send part of an answer, then RST or FIN), :class:`StripHeaders`
(forward, minus some upstream headers), :class:`SetHeaders` (forward, with some headers set),
:class:`Rewrite` (forward, with the body rewritten), :class:`Replace` (forward, but answer
otherwise when upstream answers some statuses), :class:`Flood` (a huge or endless body,
made on the fly and never held), :class:`RandomFailures` (seeded; a share of the
requests get one of its failures, the rest are forwarded) and :class:`Handle` (a function of
the whole :class:`Request`, headers and body included, picks one of the above: how a test
plays a registry or token service that checks ``Authorization``, counts, or challenges).

Every request is journalled (:class:`Exchange`: method, path, monotonic time, action, status
sent), so tests assert on what the proxy *saw*; a TLS ClientHello on the plain port is
answered 400 and journalled as method ``"TLS"``. Bounded: at most ``max_connections``
client connections at once; :meth:`FaultProxy.close` wakes every hang and trickle, shuts
every client socket and joins every thread.
"""

from __future__ import annotations

import random
import re
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from tests.support.hostile import (
    HTML_502_PAGE,
    Connection,
    Exchange,
    Flood,
    Forward,
    Hang,
    HostileServer,
    Replace,
    Request,
    Reset,
    Respond,
    Rewrite,
    SetHeaders,
    StripHeaders,
    Trickle,
    Upstream,
    altered,
    http_date,
    oci_errors,
)

__all__ = [
    "HTML_502_PAGE",
    "Action",
    "Concrete",
    "Exchange",
    "FaultProxy",
    "Flood",
    "Forward",
    "Handle",
    "Hang",
    "RandomFailures",
    "Replace",
    "Request",
    "Reset",
    "Respond",
    "Rewrite",
    "Rule",
    "SetHeaders",
    "StripHeaders",
    "Trickle",
    "http_date",
    "oci_errors",
]


class RandomFailures:
    """Answer about ``probability`` of the requests with one of ``failures`` and forward the
    rest.

    Each decision comes from a ``random.Random`` seeded with ``(seed, method, path, n)``,
    ``n`` counting the earlier matching requests for that method and path. So a given
    request's fate does not depend on how concurrent requests for *other* images interleave:
    the same seed fails the same attempts of the same image, run after run.
    """

    def __init__(
        self,
        probability: float,
        seed: int,
        failures: tuple[Respond | Reset, ...] = (Respond(503), Reset()),
    ) -> None:
        if not 0.0 <= probability <= 1.0 or not failures:
            raise ValueError("probability must be in [0, 1] and failures non-empty")
        self.probability = probability
        self.seed = seed
        self.failures = failures
        self._seen: Counter[tuple[str, str]] = Counter()

    def pick(self, method: str, path: str) -> Forward | Respond | Reset:
        """Called by the proxy under its lock."""
        n = self._seen[method, path]
        self._seen[method, path] += 1
        rng = random.Random(f"{self.seed}|{method}|{path}|{n}")
        if rng.random() < self.probability:
            return rng.choice(self.failures)
        return Forward()

    def __repr__(self) -> str:
        return f"RandomFailures(p={self.probability}, seed={self.seed})"


Concrete = (
    Forward
    | Respond
    | Hang
    | Trickle
    | Reset
    | StripHeaders
    | SetHeaders
    | Rewrite
    | Replace
    | Flood
)


@dataclass(frozen=True)
class Handle:
    """Let ``decide(request)`` pick the action for this request, from everything in it.

    Called outside the proxy's lock, once per request, on that connection's thread: state it
    keeps across requests needs a lock of its own. A ``decide`` that raises is a test bug: the
    client gets a 500 and the exception lands in :attr:`FaultProxy.errors`."""

    decide: Callable[[Request], Concrete]


Action = Concrete | RandomFailures | Handle


@dataclass
class Rule:
    """``action`` for requests whose method is ``method`` (any when ``None``) and whose path
    (query excluded) matches the regex ``path`` (``re.search``), ``times`` times or forever."""

    action: Action
    method: str | None = None
    path: str = ""
    times: int | None = None
    hits: int = 0

    def applies(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.method is not None and self.method.upper() != method:
            return False
        return re.search(self.path, path) is not None


def describe(action: Concrete) -> str:
    """The action as the journal words it."""
    match action:
        case Forward():
            return "forward"
        case Respond(status=status):
            return f"respond {status}"
        case Hang():
            return "hang"
        case Trickle():
            return "trickle"
        case Reset(rst=rst):
            return "reset" if rst else "close"
        case StripHeaders(names=names):
            return "strip " + ",".join(names)
        case SetHeaders(headers=headers):
            return "set " + ",".join(headers)
        case Rewrite():
            return "rewrite"
        case Replace(statuses=statuses):
            return "replace " + ",".join(str(s) for s in statuses)
        case Flood(status=status, size=size):
            return f"flood {status} {'endless' if size is None else size}"


class FaultProxy(HostileServer):
    """A reverse proxy on ``127.0.0.1:<random port>`` in front of ``upstream`` (a plain-HTTP
    base URL such as ``http://127.0.0.1:5000``). A context manager; see the module doc.
    With ``ssl_context`` it serves HTTPS (a registry behind a TLS-terminating proxy); the
    upstream is still asked over plain HTTP. With ``rewrite=(prefix, replacement)`` a forwarded
    request whose path starts with ``prefix`` is asked upstream with ``replacement`` instead (a
    registry served under a path prefix); rules still see the path as the client sent it."""

    def __init__(
        self,
        upstream: str,
        *,
        max_connections: int = 64,
        upstream_timeout: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        rewrite: tuple[str, str] | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream must be http://HOST:PORT, not {upstream!r}")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port
        self.upstream_timeout = upstream_timeout
        self.rewrite = rewrite
        self._rules_lock = threading.Lock()
        self._rules: list[Rule] = []
        # Relayed headers were read as latin-1: sent back the same, byte for byte.
        super().__init__(
            max_connections=max_connections, ssl_context=ssl_context, encoding="latin-1"
        )

    def close(self, timeout: float = 5.0) -> None:
        super().close(timeout)

    # -- rules -----------------------------------------------------------------------------

    def on(
        self, method: str | None, path: str, action: Action, *, times: int | None = None
    ) -> Rule:
        """Add a rule (after the existing ones: the first that applies wins)."""
        re.compile(path)  # fail here, in the test, on a bad pattern
        rule = Rule(action, method, path, times)
        with self._rules_lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        """Drop every rule and the journal."""
        with self._rules_lock:
            self._rules.clear()
        self.clear_journal()

    def decide(self, conn: Connection, request: Request) -> tuple[Concrete, int]:
        action = self._pick(request)
        exchange = Exchange(request.method, request.path, time.monotonic(), describe(action))
        return action, self.journal.add(exchange)

    def _pick(self, request: Request) -> Concrete:
        method, path = request.method, request.path
        with self._rules_lock:
            for rule in self._rules:
                if rule.applies(method, path):
                    rule.hits += 1
                    action = rule.action
                    if isinstance(action, RandomFailures):
                        return action.pick(method, path)
                    break
            else:
                return Forward()
        if not isinstance(action, Handle):
            return action
        try:
            return action.decide(request)  # outside the lock: it may take its time
        except Exception as exc:  # a test's handler failed: say so, answer 500
            with self._rules_lock:
                self.errors.append(exc)
            return Respond(500, {"Content-Type": "text/plain"}, b"faultproxy: handler failed\n")

    def perform(
        self, conn: Connection, action: object, request: Request
    ) -> tuple[int | None, bool]:
        head_only = request.method == "HEAD"
        match action:
            case Forward() | StripHeaders() | SetHeaders() | Rewrite() | Replace():
                answer = altered(action, self._upstream(conn).relay(self._rewritten(request)))
            case Respond() | Flood():
                answer = action.reply()
            case Hang(seconds=seconds):
                conn.hang(seconds)
                return None, False
            case Trickle(reply=reply):
                answer = (
                    self._upstream(conn).relay(self._rewritten(request)) if reply is None else reply
                )
                conn.reply(answer, head_only=head_only, trickle=action)
                return answer.status, True
            case Reset(partial=partial, rst=rst):
                conn.reset(partial, rst=rst)
                return None, False
            case _:
                raise TypeError(f"not a fault proxy action: {action!r}")
        return answer.status, conn.reply(answer, head_only=head_only)

    def _rewritten(self, request: Request) -> Request:
        if self.rewrite is None or not request.target.startswith(self.rewrite[0]):
            return request
        prefix, replacement = self.rewrite
        return replace(request, target=replacement + request.target[len(prefix) :])

    def _upstream(self, conn: Connection) -> Upstream:
        """This connection's upstream connection, opened on first use."""
        if conn.upstream is None:
            conn.upstream = Upstream(self.upstream_host, self.upstream_port, self.upstream_timeout)
        return conn.upstream

    # -- the journal -----------------------------------------------------------------------

    def exchanges(self, method: str | None = None, path: str | None = None) -> list[Exchange]:
        """The journal (a copy), in arrival order, filtered by exact method and path regex."""
        return [
            e
            for e in self.journal.copy()
            if (method is None or e.method == method.upper())
            and (path is None or re.search(path, e.path))
        ]

    def count(self, method: str | None = None, path: str | None = None) -> int:
        return len(self.exchanges(method, path))

    def __iter__(self) -> Iterator[Exchange]:
        return iter(self.exchanges())
