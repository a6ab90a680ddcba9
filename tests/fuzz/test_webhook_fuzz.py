"""``imagecheck serve`` (a real process, over TLS) with hostile AdmissionReviews in front and
the hostile registry stand-in behind: every request gets a 200 with a well-formed
``AdmissionReview`` response whose ``uid`` echoes the request's (or a 400 with a JSON reason
for a body that is not a review), never a 500, within ``--review-deadline`` + 1 s; the server
stays alive and under the memory bound, logs JSON lines without a traceback or a secret, and
never reaches off the machine.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.fuzz import judge
from tests.fuzz.proc import IMAGECHECK, RSS_LIMIT_MIB, child_env, under_limit
from tests.fuzz.profiles import examples
from tests.fuzz.recipes import Content, Repeat, render
from tests.fuzz.strategies import (
    BEARER_PING,
    CANARY,
    b64,
    identifiers,
    json_values,
    repositories,
    scripts,
)
from tests.support.admission import WORKLOADS, admission_review, pod_spec, workload
from tests.support.net import free_port
from tests.support.pki import TLSMaterial, make_tls_material
from tests.support.standin import SELF, Script, StandIn

REVIEW_DEADLINE = 1.5
START_TIMEOUT = 20.0
SECRET = f"{CANARY}-webhook"
SECRETS = [CANARY, b64(f"fuzz:{SECRET}")]
API_VERSION = "admission.k8s.io/v1"


@dataclass
class Server:
    """A running ``imagecheck serve``."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path
    trust: Path

    def client(self, timeout: float = REVIEW_DEADLINE + 10) -> httpx.Client:
        return httpx.Client(
            base_url=f"https://127.0.0.1:{self.port}",
            verify=ssl.create_default_context(cafile=str(self.trust)),
            timeout=timeout,
            trust_env=False,
        )

    def healthy(self, timeout: float = 1.0) -> bool:
        """Alive, and answering ``/healthz`` within ``timeout``: its event loop is free."""
        if self.process.poll() is not None:
            return False
        try:
            with self.client(timeout) as client:
                return client.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def peak_rss_mib(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text(encoding="ascii")
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmHWM")

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


class Servers:
    """Starts ``imagecheck serve`` under the address-space limit, with the canary in its
    config.json offered to the stand-in (``--insecure-registry``: over plain HTTP), and
    starts a fresh one when an example left the last one busy, dead or dirty: each example
    must be judged on its own, or hypothesis cannot shrink it."""

    def __init__(self, standin: StandIn, workdir: Path, netlog: Path) -> None:
        self.standin, self.workdir, self.netlog = standin, workdir, netlog
        self.tls: TLSMaterial = make_tls_material(workdir / "pki")
        self.config = workdir / "config.json"
        entry = {"auth": b64(f"fuzz:{SECRET}")}
        self.config.write_text(json.dumps({"auths": {standin.host: entry}}), encoding="utf-8")
        self.current: Server | None = None
        self.dirty = False

    def fresh(self) -> Server:
        """The running server, or a new one when the last example may have left it unfit."""
        if self.current is not None and (self.dirty or not self.current.healthy()):
            self.current.stop()
            self.current = None
        if self.current is None:
            self.current = self._start()
        self.dirty = True  # until the example says otherwise
        return self.current

    def _start(self) -> Server:
        port = free_port()
        log = self.workdir / f"serve-{port}.log"
        argv = under_limit([
            IMAGECHECK, "serve", "--listen", f"127.0.0.1:{port}",
            "--tls-cert", str(self.tls.server.cert), "--tls-key", str(self.tls.server.key),
            "--review-deadline", str(REVIEW_DEADLINE), "--timeout", "1",
            "--cache-ttl", "0s", "--missing-ttl", "0s",
            "--insecure-registry", self.standin.host, "--docker-config", str(self.config),
        ])  # fmt: skip
        env = child_env(self.workdir, self.netlog)
        with log.open("wb") as out:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env
            )
        server = Server(process, port, log, self.tls.ca_file)
        end = time.monotonic() + START_TIMEOUT
        while time.monotonic() < end and process.poll() is None:
            if server.healthy():
                return server
            time.sleep(0.05)
        server.stop()
        pytest.fail(f"imagecheck serve did not start:\n{server.log_text()}")

    def close(self) -> None:
        if self.current is not None:
            self.current.stop()


@pytest.fixture(scope="module")
def servers(standin: StandIn, workdir: Path, netlog: Path) -> Iterator[Servers]:
    pool = Servers(standin, workdir, netlog)
    try:
        yield pool
    finally:
        pool.close()


# -- what is sent ------------------------------------------------------------------------------

_images = st.one_of(
    st.builds(lambda repo, ident: f"{SELF}/{repo}{ident}", repositories, identifiers),
    # Invalid references: never a name that would need DNS.
    st.sampled_from(["", " ", "UPPER/Case:1", "a@@b", f"{SELF}/x:" + "t" * 200, "\x1b[31m"]),
)
_odd_images = st.one_of(st.none(), st.integers(), st.lists(st.just("x")), st.just({"a": 1}))


@st.composite
def reviews(draw: st.DrawFn) -> dict[str, Any]:
    """A v1 AdmissionReview of a workload with some containers (up to thousands of images)."""
    kind = draw(st.sampled_from(sorted(WORKLOADS)))
    containers = draw(st.lists(_images, max_size=4))
    many = draw(st.sampled_from([0, 0, 0, 300, 3000]))
    main = [(f"c{i}", image) for i, image in enumerate(containers)]
    if many:
        main.append(("many", f"@@MANY{many}@@"))
    init = [("init", image) for image in draw(st.lists(_images, max_size=1))]
    obj = workload(kind, pod_spec(init, main, []), name=draw(st.text(max_size=20)))
    if draw(st.booleans()):
        spec = obj["spec"] if kind == "Pod" else None
        if spec is not None:
            spec["containers"].append({"name": "odd", "image": draw(_odd_images)})
    uid = draw(st.one_of(st.uuids().map(str), st.text(max_size=60)))
    return admission_review(obj, uid=uid)


# Where a review's fields may be replaced by something of another type.
_PATHS = (
    ("request",),
    ("request", "uid"),
    ("request", "object"),
    ("request", "object", "spec"),
    ("request", "object", "kind"),
    ("request", "object", "metadata"),
    ("request", "kind"),
    ("request", "namespace"),
    ("apiVersion",),
    ("kind",),
)


@st.composite
def mutated_reviews(draw: st.DrawFn) -> dict[str, Any]:
    review = draw(reviews())
    path = draw(st.sampled_from(_PATHS))
    target: Any = review
    for key in path[:-1]:
        target = target.get(key) if isinstance(target, dict) else None
    if isinstance(target, dict):
        target[path[-1]] = draw(json_values)
    return review


_MANY = re.compile(rb'\{"name": "many", "image": "@@MANY(\d+)@@", "resources": \{\}\}')


def _expand_many(match: re.Match[bytes]) -> bytes:
    return b", ".join(
        b'{"name": "m%d", "image": "%s/many:t%d"}' % (i, SELF.encode(), i)
        for i in range(int(match.group(1)))
    )


@dataclass(frozen=True)
class Sent:
    """A request body as drawn: small (a recipe, or a container standing for ``n``)."""

    content: Content

    @property
    def data(self) -> bytes:
        return _MANY.sub(_expand_many, render(self.content))


def _sent(value: Any) -> Sent:
    return Sent(json.dumps(value).encode())


def _many_images(n: int) -> Sent:
    spec = pod_spec([], [("many", f"@@MANY{n}@@")], [])
    return _sent(admission_review(workload("Pod", spec), uid="many"))


CRAFTED_BODIES: list[Content] = [
    Repeat(b"[", 100000),
    Repeat(
        b"[",
        100000,
        prefix=b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":',
    ),
    Repeat(b"9", 5000, prefix=b'{"kind":"AdmissionReview","request":{"uid":', suffix=b"}}"),
    Repeat(
        b'{"image": "%s/x:1"}, ' % SELF.encode(),
        5000,
        prefix=b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": '
        b'{"uid": "u", "object": {"kind": "Pod", "spec": {"containers": [',
        suffix=b"{}]}}}}",
    ),
    b"\xff\xfe{}",
    b"",
    b"null",
]


bodies = st.one_of(
    reviews().map(_sent),
    mutated_reviews().map(_sent),
    json_values.map(_sent),
    st.sampled_from(CRAFTED_BODIES).map(Sent),
    st.binary(max_size=200).map(Sent),
)


def is_review(body: bytes) -> str | None:
    """The uid when ``body`` is a v1 AdmissionReview the webhook must answer (200)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("kind") != "AdmissionReview":
        return None
    if data.get("apiVersion") != API_VERSION or not isinstance(data.get("request"), dict):
        return None
    uid = data["request"].get("uid")
    return uid if isinstance(uid, str) else None


@dataclass(frozen=True)
class Answer:
    status: int | None
    body: bytes
    elapsed: float
    error: str = ""


def post(server: Server, body: bytes) -> Answer:
    started = time.monotonic()
    try:
        with server.client() as client:
            response = client.post(
                "/validate", content=body, headers={"Content-Type": "application/json"}
            )
    except httpx.HTTPError as exc:
        return Answer(None, b"", time.monotonic() - started, f"{type(exc).__name__}: {exc}")
    return Answer(response.status_code, response.content, time.monotonic() - started)


def assert_answer(body: bytes, answer: Answer) -> None:
    shown = f"for {body[:300]!r}: {answer.status} {answer.body[:2000]!r} {answer.error}"
    assert answer.status is not None, f"no answer {shown}"
    assert answer.status != 500, f"500 {shown}"
    assert answer.elapsed <= REVIEW_DEADLINE + 1, f"took {answer.elapsed:.2f}s {shown}"
    uid = is_review(body)
    assert answer.status == (200 if uid is not None else 400), f"status {shown}"
    data = json.loads(answer.body)
    if uid is None:
        assert isinstance(data, dict) and isinstance(data.get("error"), str), f"reason {shown}"
        return
    assert data.get("apiVersion") == API_VERSION and data.get("kind") == "AdmissionReview", shown
    response = data.get("response")
    assert isinstance(response, dict) and response.get("uid") == uid, f"uid {shown}"
    assert isinstance(response.get("allowed"), bool), f"allowed {shown}"
    judge.assert_no_secret(SECRETS, answer.body.decode("utf-8", "replace"))


@settings(max_examples=examples(25))
@example(script=Script({"ping": (BEARER_PING,)}), sent=[_many_images(10000)], idle=0).via(
    "a review of 10,000 images"
)
@given(
    script=scripts(),
    sent=st.lists(bodies, min_size=1, max_size=3),
    idle=st.sampled_from([0, 0, 0, 40]),
)
def test_webhook_answers_every_review(
    servers: Servers,
    standin: StandIn,
    netlog: Path,
    script: Script,
    sent: list[Sent],
    idle: int,
) -> None:
    server = servers.fresh()
    netlog.write_text("")
    standin.configure(script)
    log_start = len(server.log_text())
    concrete = [body.data.replace(SELF.encode(), standin.host.encode()) for body in sent]
    with contextlib.ExitStack() as stack:
        for _ in range(idle):  # connections that never say anything
            stack.enter_context(socket.create_connection(("127.0.0.1", server.port)))
        with ThreadPoolExecutor(len(concrete)) as pool:
            answers = list(pool.map(lambda body: post(server, body), concrete))

    for body, answer in zip(concrete, answers, strict=True):
        assert_answer(body, answer)
    assert server.process.poll() is None, f"serve exited:\n{server.log_text()[-3000:]}"
    assert server.healthy(), "serve does not answer /healthz within 1 s after the reviews"
    rss = server.peak_rss_mib()
    assert rss <= RSS_LIMIT_MIB, f"serve peak RSS {rss:.0f} MiB > {RSS_LIMIT_MIB} MiB"
    logged = server.log_text()[log_start:]
    assert "Traceback" not in logged, f"traceback in the log:\n{logged[-5000:]}"
    for line in logged.splitlines():
        assert isinstance(json.loads(line), dict), f"log line is not JSON: {line!r}"
    judge.assert_no_secret(SECRETS, logged)
    assert netlog.read_text() == "", f"tried to leave the machine: {netlog.read_text()}"
    # Reviews of hundreds of images leave checks running: the next example gets a new server.
    servers.dirty = any(b"/many:" in body.data for body in sent)
