"""Issue #10, section 2 (and 7.4): nothing a registry, token service or credential helper
sends is read without a bound, and hostile JSON never raises past the parser.

``python -m imagecheck check`` runs as a subprocess against the real registry
(``registry_plain``) behind a :class:`FaultProxy` that makes one part of a real answer
hostile: a ping with an endless body, a token answer nested 16,384 deep, an index whose
``manifests`` is ``5``, a ``Docker-Content-Digest`` in ``md5``. Each must end as a typed
error: exit 4 (registry) or 2 (local file), one line, no traceback, and ``--on-error pass``
honoured; bodies must not reach memory (peak RSS is measured with ``wait4``).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.admission import pod
from tests.support.clirun import Run, run_cli, run_cli_measured
from tests.support.endpoint import RegistryEndpoint
from tests.support.faultproxy import FaultProxy, Flood, Respond, Rewrite, SetHeaders
from tests.support.pki import TLSMaterial
from tests.support.webhook import Webhook, running

MANIFESTS = r"^/v2/.+/manifests/"
BLOBS = r"^/v2/.+/blobs/"
PING = r"^/v2/$"
TOKEN_PATH = r"^/token"
APP = "sample/app:1.0.0"
INDEX = "sample/app:multi"
# A check holds a few tens of MiB (the interpreter, httpx); a body read whole is hundreds.
MAX_RSS_MIB = 120
DEEP = b"[" * 60_000 + b"]" * 60_000
OPEN_BRACKETS = b"[" * 16_384
HUGE_NUMBER = b"1" * 5000
MD5 = "md5:" + "0" * 32
# Sets up the proxy's rules for one fault.
Fault = Callable[[FaultProxy], object]


@pytest.fixture
def proxy(registry_plain: RegistryEndpoint) -> Iterator[FaultProxy]:
    with FaultProxy(registry_plain.url) as proxy:
        yield proxy
    assert proxy.errors == [], "the fault proxy itself failed"


def check(proxy: FaultProxy, home: Path, name: str, *args: str) -> Run:
    return run_cli(["check", "--retries", "0", *args, proxy.ref(name)], home)


def assert_one_line(run: Run, code: int, *, stream: str = "stdout") -> str:
    """Exit ``code`` with exactly one line of output (on ``stream``), and no traceback."""
    assert "Traceback" not in run.stdout + run.stderr, run.stderr
    assert run.code == code, run.stdout + run.stderr
    quiet = run.stderr if stream == "stdout" else run.stdout
    assert quiet == "", quiet
    [line] = (run.stdout if stream == "stdout" else run.stderr).splitlines()
    assert len(line) < 400, line
    return line


def bearer_via_proxy(proxy: FaultProxy, token_answer: Respond | Flood) -> None:
    """The ping challenges for a token from the proxy's own ``/token``, which answers
    ``token_answer``; the registry behind ignores the token."""
    challenge = f'Bearer realm="{proxy.url}/token",service="registry"'
    proxy.on("GET", PING, Respond(401, {"WWW-Authenticate": challenge}))
    proxy.on("GET", TOKEN_PATH, token_answer)


def token(body: bytes) -> Respond:
    return Respond(200, {"Content-Type": "application/json"}, body)


def edited(change: Callable[[dict[str, Any]], None]) -> Rewrite:
    """Rewrite a real JSON document (manifest, index) with ``change`` applied."""

    def rewrite(body: bytes) -> bytes:
        document = json.loads(body)
        change(document)
        return json.dumps(document).encode()

    return Rewrite(rewrite)


# -- bodies are never read whole ------------------------------------------------------------


def ping_endless(proxy: FaultProxy) -> None:
    proxy.on("GET", PING, Flood(200))


def ping_2_gib(proxy: FaultProxy) -> None:
    proxy.on("GET", PING, Flood(200, size=2 << 30))


def ping_redirect_endless(proxy: FaultProxy) -> None:
    # httpx reads a redirect's body whole before it follows the redirect.
    proxy.on("GET", PING, Flood(307, {"Location": "/v2/"}), times=1)


def manifest_401_endless(proxy: FaultProxy) -> None:
    # /v2/ open, the repository challenges: httpx reads the 401's body whole before the auth
    # flow sends the request again with a token.
    challenge = f'Bearer realm="{proxy.url}/token",service="registry"'
    proxy.on("HEAD", MANIFESTS, Respond(405))
    proxy.on("GET", MANIFESTS, Flood(401, {"WWW-Authenticate": challenge}), times=1)
    proxy.on("GET", TOKEN_PATH, token(b'{"token": "t"}'))


def error_body_endless(proxy: FaultProxy) -> None:
    proxy.on("HEAD", MANIFESTS, Respond(405))
    proxy.on("GET", MANIFESTS, Flood(503, {"Content-Type": "text/html"}), times=1)


ENDLESS: dict[str, Fault] = {
    "ping-endless": ping_endless,
    "ping-2-GiB": ping_2_gib,
    "ping-redirect-endless": ping_redirect_endless,
    "manifest-401-endless": manifest_401_endless,
    "error-body-endless": error_body_endless,
}


@pytest.mark.parametrize("fault", ENDLESS.values(), ids=ENDLESS.keys())
def test_huge_bodies_are_not_read(
    proxy: FaultProxy,
    registry_plain: RegistryEndpoint,
    tmp_path: Path,
    fault: Fault,
) -> None:
    """The issue measured 1.4 GB RSS for a 2 GiB ping answer (skopeo: 19 MB). Each of these
    answers is endless or 2 GiB; the check still finds the image, in bounded memory."""
    fault(proxy)

    run = run_cli_measured(["check", "--timeout", "5", proxy.ref(APP)], tmp_path)

    line = assert_one_line(run, 0)
    assert registry_plain.images[APP].digest in line
    assert run.peak_rss_mib < MAX_RSS_MIB, f"peak RSS {run.peak_rss_mib:.0f} MiB"


def test_endless_token_answer_is_refused_in_bounded_memory(
    proxy: FaultProxy, tmp_path: Path
) -> None:
    bearer_via_proxy(proxy, Flood(200, {"Content-Type": "application/json"}))

    run = run_cli_measured(["check", "--retries", "0", proxy.ref(APP)], tmp_path)

    line = assert_one_line(run, 4)
    assert "token response is larger than 65536 bytes" in line
    assert run.peak_rss_mib < MAX_RSS_MIB, f"peak RSS {run.peak_rss_mib:.0f} MiB"


# -- hostile JSON is a registry error: exit 4, or a pass with --on-error pass ------------------


def index_manifests(value: object) -> Fault:
    def install(proxy: FaultProxy) -> None:
        proxy.on("GET", MANIFESTS, edited(lambda index: index.__setitem__("manifests", value)))

    return install


def index_platform(value: object) -> Fault:
    def change(index: dict[str, Any]) -> None:
        index["manifests"][0]["platform"] = value

    return lambda proxy: proxy.on("GET", MANIFESTS, edited(change))


def config_blob(body: bytes) -> Fault:
    return lambda proxy: proxy.on("GET", BLOBS, Respond(200, {}, body))


def config_digest(value: str) -> Fault:
    def change(manifest: dict[str, Any]) -> None:
        manifest["config"]["digest"] = value

    return lambda proxy: proxy.on("GET", MANIFESTS, edited(change))


def token_body(body: bytes) -> Fault:
    return lambda proxy: bearer_via_proxy(proxy, token(body))


def error_body(body: bytes) -> Fault:
    def install(proxy: FaultProxy) -> None:
        proxy.on("HEAD", MANIFESTS, Respond(405))
        proxy.on("GET", MANIFESTS, Respond(500, {"Content-Type": "application/json"}, body))

    return install


PLATFORM = ("--platform", "linux/amd64")
# (id, what the proxy does, image, extra arguments, words in the error)
HOSTILE: list[tuple[str, Fault, str, tuple[str, ...], str]] = [
    ("token-16-KiB-of-[", token_body(OPEN_BRACKETS), APP, (), "nested too deeply"),
    ("token-5000-digit-number", token_body(b'{"token": "t", "expires_in": ' + HUGE_NUMBER + b"}"),
     APP, (), "token response is not valid JSON"),
    ("token-NaN-expiry", token_body(b'{"token": "t", "expires_in": NaN}'),
     APP, (), "token response is not valid JSON"),
    ("token-with-a-newline", token_body(b'{"token": "t\\nX-Evil: 1"}'),
     APP, (), "token that contains whitespace or a control character"),
    ("error-body-60000-deep", error_body(DEEP), APP, (), "answered HTTP 500"),
    ("error-body-16-KiB-of-[", error_body(OPEN_BRACKETS), APP, (), "answered HTTP 500"),
    ("index-manifests-is-5", index_manifests(5), INDEX, PLATFORM, "'manifests' is not a list"),
    ("index-entry-not-an-object", index_manifests([5]), INDEX, PLATFORM, "is not an object"),
    ("index-platform-a-string", index_platform("linux/amd64"), INDEX, PLATFORM,
     "'platform' is not an object"),
    ("index-os-a-list", index_platform({"os": ["linux"], "architecture": "amd64"}), INDEX,
     PLATFORM, "'os' is not a string"),
    ("config-60000-deep", config_blob(b'{"os":' * 60_000), APP, PLATFORM, "nested too deeply"),
    ("config-os-a-number", config_blob(b'{"os": 5, "architecture": "amd64"}'), APP, PLATFORM,
     "'os' is not a string"),
    ("config-digest-a-path", config_digest("../../../v2/"), APP, PLATFORM,
     "config digest is not a sha256 or sha512 digest"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("fault", "name", "args", "words"),
    [c[1:] for c in HOSTILE],
    ids=[c[0] for c in HOSTILE],
)
def test_hostile_json_is_a_one_line_registry_error(
    proxy: FaultProxy,
    tmp_path: Path,
    fault: Fault,
    name: str,
    args: tuple[str, ...],
    words: str,
) -> None:
    """Before: a traceback and exit 1 ("missing"), whatever --on-error said, or a platform
    such as ``['linux']/amd64`` that matched nothing (missing, wrongly)."""
    fault(proxy)

    failed = check(proxy, tmp_path, name, *args)
    passed = check(proxy, tmp_path, name, *args, "--on-error", "pass")

    line = assert_one_line(failed, 4)
    assert line.startswith("error "), line
    assert words in line, line
    assert "Traceback" not in passed.stderr
    assert passed.code == 0, passed.stdout + passed.stderr
    [warning] = passed.stderr.splitlines()
    assert "--on-error pass" in warning, warning
    assert words in warning, warning


def test_a_400_digit_token_lifetime_is_a_day_not_a_crash(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    # Valid JSON (under Python's 4,300-digit limit), but float() of it overflows.
    bearer_via_proxy(proxy, token(b'{"token": "t", "expires_in": ' + b"9" * 400 + b"}"))

    line = assert_one_line(check(proxy, tmp_path, APP), 0)

    assert registry_plain.images[APP].digest in line
    assert proxy.count("GET", TOKEN_PATH) == 1


# -- 7.4: a digest header counts only in a registered algorithm ------------------------------

BAD_DIGESTS = {
    "md5": MD5,
    "sha256-uppercase": "sha256:" + "AB" * 32,
    "sha256-too-short": "sha256:" + "ab" * 16,
    "unknown-algorithm": "sha3+b64:" + "A" * 43,
}


@pytest.mark.parametrize("header", BAD_DIGESTS.values(), ids=BAD_DIGESTS.keys())
def test_tag_answered_with_an_unregistered_digest_is_an_error(
    proxy: FaultProxy, tmp_path: Path, header: str
) -> None:
    """containerd refuses such a header ("not a valid digest"), so the kubelet cannot pull:
    never *found* with ``md5:...`` as the digest to pin."""
    proxy.on("HEAD", MANIFESTS, SetHeaders({"Docker-Content-Digest": header}))

    run = run_cli(["check", "-o", "json", "--retries", "0", proxy.ref(APP)], tmp_path)

    assert run.code == 4, run.stdout + run.stderr
    [result] = run.json()
    assert result["status"] == "error"
    assert result["digest"] is None
    assert "invalid Docker-Content-Digest" in result["message"]
    assert "sha256 or sha512" in result["message"]


def test_pin_answered_with_an_unregistered_digest_is_verified_by_the_body(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    """containerd never reads the header for a pin: the content's own hash decides."""
    pushed = registry_plain.images[APP]
    proxy.on(None, MANIFESTS, SetHeaders({"Docker-Content-Digest": MD5}))

    run = run_cli(["check", "-o", "json", proxy.ref(f"sample/app@{pushed.digest}")], tmp_path)

    assert run.code == 0, run.stdout + run.stderr
    [result] = run.json()
    assert (result["status"], result["digest"]) == ("found", pushed.digest)
    assert [e.method for e in proxy.exchanges(path=MANIFESTS)] == ["HEAD", "GET"]


def test_pin_with_an_unregistered_header_and_another_body_is_an_error(
    proxy: FaultProxy, registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    pushed = registry_plain.images[APP]
    other = b'{"schemaVersion": 2}'
    headers = {"Content-Type": pushed.media_type, "Docker-Content-Digest": MD5}
    proxy.on(None, MANIFESTS, Respond(200, headers, other))

    run = check(proxy, tmp_path, f"sample/app@{pushed.digest}")

    line = assert_one_line(run, 4)
    assert "sha256:" + hashlib.sha256(other).hexdigest() in line


# -- credential helpers and local files: exit 2 ------------------------------------------------


def install_helper(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / f"docker-credential-{name}"
    script.write_text(f'#!/bin/sh\n[ "$1" = get ] || exit 9\nread -r server\n{body}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def python_prints(expression: str) -> str:
    return f"{sys.executable} -c 'import sys; sys.stdout.write({expression})'"


HELPERS = {
    # 60,000 bytes: under the 64 KiB cap, so it is the parser that must hold.
    "30000-deep": (
        python_prints('"[" * 30000 + "]" * 30000'),
        "printed something that is not JSON",
    ),
    "open-brackets": (python_prints('"[" * 16384'), "printed something that is not JSON"),
    "huge-number": (python_prints('"{\\"Secret\\": " + "1" * 5000 + "}"'), "not JSON"),
    "100-MB": ("head -c 100000000 /dev/zero", "printed more than 64 KiB"),
    "endless": ("yes", "printed more than 64 KiB"),
}


@pytest.mark.parametrize(("body", "words"), HELPERS.values(), ids=HELPERS.keys())
def test_hostile_credential_helper_is_a_one_line_usage_error(
    proxy: FaultProxy, tmp_path: Path, body: str, words: str
) -> None:
    bin_dir = tmp_path / "bin"
    install_helper(bin_dir, "hostile", body)
    config = tmp_path / "docker"
    config.mkdir()
    (config / "config.json").write_text(json.dumps({"credHelpers": {proxy.host: "hostile"}}))
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "DOCKER_CONFIG": str(config)}

    run = run_cli_measured(["check", proxy.ref(APP)], tmp_path, env=env)

    line = assert_one_line(run, 2, stream="stderr")
    assert line.startswith("imagecheck: error: credential helper docker-credential-hostile ")
    assert words in line, line
    assert run.peak_rss_mib < MAX_RSS_MIB, f"peak RSS {run.peak_rss_mib:.0f} MiB"
    assert proxy.count() == 0  # nothing was sent


LOCAL_JSON = {"60000-deep": DEEP, "16-KiB-of-[": OPEN_BRACKETS, "5000-digit": HUGE_NUMBER}


@pytest.mark.parametrize("where", ["config.json", "pull-secret", "DOCKER_AUTH_CONFIG"])
@pytest.mark.parametrize("content", LOCAL_JSON.values(), ids=LOCAL_JSON.keys())
def test_hostile_local_json_is_a_one_line_usage_error(
    proxy: FaultProxy, tmp_path: Path, where: str, content: bytes
) -> None:
    args, env = ["check"], {}
    if where == "config.json":
        (tmp_path / "config.json").write_bytes(content)
        env["DOCKER_CONFIG"] = str(tmp_path)
    elif where == "pull-secret":
        (tmp_path / ".dockerconfigjson").write_bytes(content)
        args += ["--pull-secret", str(tmp_path / ".dockerconfigjson")]
    else:
        env["DOCKER_AUTH_CONFIG"] = content.decode()

    run = run_cli([*args, proxy.ref(APP)], tmp_path, env=env)

    line = assert_one_line(run, 2, stream="stderr")
    assert line.startswith("imagecheck: error: ")
    assert "nested too deeply" in line or "not valid JSON" in line, line
    assert proxy.count() == 0


# -- the webhook answers the review ------------------------------------------------------------

WEBHOOK_FAULTS: dict[str, Fault] = {
    "token-16-KiB-of-[": token_body(OPEN_BRACKETS),
    "error-body-60000-deep": error_body(DEEP),
    "ping-endless": ping_endless,
}


@pytest.fixture(scope="module")
def webhook_process(
    tmp_path_factory: pytest.TempPathFactory, tls_material: TLSMaterial
) -> Iterator[Webhook]:
    workdir = tmp_path_factory.mktemp("webhook-bounds")
    with running(workdir, tls_material, "--review-deadline", "5") as hook:
        yield hook


@pytest.mark.parametrize("fault", WEBHOOK_FAULTS.values(), ids=WEBHOOK_FAULTS.keys())
def test_webhook_answers_the_review(
    webhook_process: Webhook, proxy: FaultProxy, fault: Fault
) -> None:
    """Before: HTTP 500 (a traceback in the handler), or 2.3 GB RSS for the endless ping, past
    the example Deployment's memory limit."""
    fault(proxy)
    image = proxy.ref(APP)

    answer = webhook_process.review(pod(image))  # asserts HTTP 200 and the envelope

    if answer.get("warnings"):  # a registry error passes with a warning (--on-error pass)
        assert answer["allowed"] is True
        [warning] = answer["warnings"]
        assert image in warning
    else:
        assert answer["allowed"] is True  # the endless ping is not even an error
    assert peak_rss_mib(webhook_process.process.pid) < 2 * MAX_RSS_MIB


def peak_rss_mib(pid: int) -> float:
    """``VmHWM``: the process's peak resident set so far, in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    [line] = [line for line in status.splitlines() if line.startswith("VmHWM:")]
    return int(line.split()[1]) / 1024


# -- the proxy's new actions themselves ----------------------------------------------------------

NOWHERE = "http://127.0.0.1:9"  # upstream for proxy tests that never forward


def test_proxy_flood_of_a_size_sends_exactly_it() -> None:
    with FaultProxy(NOWHERE) as proxy:
        proxy.on("GET", "", Flood(200, {"X-Test": "1"}, size=300_000, fill=b"ab"))
        with httpx.Client(trust_env=False) as client:
            answer = client.get(f"{proxy.url}/v2/")
    assert answer.status_code == 200
    assert answer.headers["Content-Length"] == "300000"
    assert answer.headers["X-Test"] == "1"
    assert answer.content == b"ab" * 150_000
    assert [(e.action, e.status) for e in proxy.exchanges()] == [("flood 200 300000", 200)]


def test_proxy_endless_flood_is_chunked_and_stops_with_the_client() -> None:
    proxy = FaultProxy(NOWHERE).start()
    try:
        proxy.on("GET", "", Flood(200))
        with httpx.Client(trust_env=False) as client, client.stream("GET", proxy.url) as answer:
            assert answer.headers["Transfer-Encoding"] == "chunked"
            received = 0
            for chunk in answer.iter_raw():
                received += len(chunk)
                if received > 1_000_000:
                    break
        started = time.monotonic()
        proxy.close()  # raises if the flooding thread does not stop
        assert time.monotonic() - started < 1.0
    finally:
        proxy.close()
    assert [(e.action, e.status) for e in proxy.exchanges()] == [("flood 200 endless", None)]
    assert proxy.errors == []
