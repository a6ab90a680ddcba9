"""One bounded request to a cloud endpoint, against a real server: no redirect followed, a
capped answer, inside the deadline, TLS with the trust it is given."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterator

import httpx
import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn.cloud._http import CloudAnswer, CloudHTTP, answer_reason, temporary_status
from imagecheck.errors import CloudAuthError, DeadlineExceeded
from tests.support.cloudnet import make_cloud_tls
from tests.support.cloudstandin import CloudStandIn, Fault, Received, Reply
from tests.support.pki import TLSMaterial

BODY = b'{"token": "t"}'


class Echo(CloudStandIn):
    """Answers a small JSON document; ``/moved`` answers a redirect to a metadata address."""

    def answer(self, request: Received) -> Reply:
        if request.path == "/moved":
            return Reply(302, b"", {"Location": "http://169.254.169.254/latest/meta-data/"})
        return Reply(200, BODY, {"Content-Type": "application/json"})


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSMaterial:
    return make_cloud_tls(tmp_path_factory.mktemp("tls"), ["sts.amazonaws.com"])


@pytest.fixture
def plain() -> Iterator[Echo]:
    with Echo() as server:
        yield server


def send(http: CloudHTTP, url: str, seconds: float = 10) -> CloudAnswer:
    return asyncio.run(
        http.send("GET", url, what="the test endpoint", deadline=Deadline.after(seconds))
    )


def test_an_answer_is_read_whole(plain: Echo) -> None:
    answer = send(CloudHTTP(), plain.url + "/token")
    assert (answer.status, answer.body) == (200, BODY)
    assert answer.headers["content-type"] == "application/json"


def test_a_redirect_is_refused_not_followed(plain: Echo) -> None:
    with pytest.raises(CloudAuthError, match=r"answered a redirect \(HTTP 302\), not followed"):
        send(CloudHTTP(), plain.url + "/moved")
    assert [r.path for r in plain.requests] == ["/moved"]


def test_an_oversized_answer_is_refused(plain: Echo) -> None:
    plain.fail_next(Fault(size=100_000))
    with pytest.raises(CloudAuthError, match="the answer of the test endpoint"):
        send(CloudHTTP(max_answer=64 * 1024), plain.url + "/token")


def test_a_slow_answer_is_a_temporary_error(plain: Echo) -> None:
    plain.fail_next(Fault(delay=2))
    with pytest.raises(CloudAuthError, match=r"did not answer within 0\.3s") as caught:
        send(CloudHTTP(timeout=0.3), plain.url + "/token")
    assert caught.value.temporary


def test_the_deadline_bounds_the_call(plain: Echo) -> None:
    plain.fail_next(Fault(delay=2))
    with pytest.raises(DeadlineExceeded, match="before the deadline"):
        send(CloudHTTP(timeout=10), plain.url + "/token", seconds=0.3)


def test_a_passed_deadline_sends_nothing(plain: Echo) -> None:
    with pytest.raises(DeadlineExceeded):
        send(CloudHTTP(), plain.url + "/token", seconds=0)
    assert plain.requests == []


def test_no_connection_is_a_temporary_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(CloudAuthError, match="cannot reach the test endpoint") as caught:
            send(CloudHTTP(), f"http://127.0.0.1:{port}/")
    assert caught.value.temporary


def test_tls_trusts_what_the_factory_gives(tls: TLSMaterial) -> None:
    with Echo(tls.server_context()) as server:
        trusted = CloudHTTP(tls=lambda: ssl.create_default_context(cafile=str(tls.ca_file)))
        assert send(trusted, server.url + "/token").body == BODY
        with pytest.raises(CloudAuthError, match="CERTIFICATE_VERIFY_FAILED") as caught:
            send(CloudHTTP(), server.url + "/token")
    assert not caught.value.temporary  # a certificate will not verify on a retry either


def test_a_bad_url_is_one_line() -> None:
    with pytest.raises(CloudAuthError, match="the test endpoint"):
        send(CloudHTTP(), "http://[::1/")


@pytest.mark.parametrize(
    ("status", "temporary"),
    [(400, False), (403, False), (404, False), (408, True), (429, True), (500, True), (503, True)],
)
def test_which_statuses_may_pass(status: int, temporary: bool) -> None:
    assert temporary_status(status) is temporary


def test_a_reason_is_short_and_printable() -> None:
    answer = CloudAnswer(400, httpx.Headers(), b"")
    assert answer_reason(answer) == "HTTP 400"
    reason = answer_reason(answer, "Throttling\x1b[31m: " + "x" * 500)
    assert "\x1b" not in reason
    assert len(reason) < 260


@pytest.mark.parametrize("value", ["caf\u00e9", "a\nb", "x\x00"])
def test_a_header_http_cannot_carry_is_refused_before_sending(plain: Echo, value: str) -> None:
    deadline = Deadline.after(10)
    call = CloudHTTP().send(
        "GET", plain.url, what="the agent", deadline=deadline, headers={"Authorization": value}
    )
    with pytest.raises(CloudAuthError, match="the Authorization header contains a character") as e:
        asyncio.run(call)
    assert value not in str(e.value)
    assert plain.requests == []
