"""``imagecheck serve`` as a real subprocess over TLS, answering real ``AdmissionReview``
(``admission.k8s.io/v1``) requests about images in the real Distribution registry.

What a Kubernetes API server would see: the verdict (allowed, ``status.code`` 403 and a
message naming each missing image and its container, ``warnings``), ``response.uid`` echoing
``request.uid``, a 400 with a JSON reason for a body that is not a review, and never a 500.
Around it: ``/healthz``, ``/readyz``, ``/metrics`` (counters that move as they should),
certificate rotation without a restart, the result cache (TTLs and one registry request for
concurrent reviews, counted by a :class:`FaultProxy` in front of the registry), SIGTERM, and
JSON log lines on stderr.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from tests.support.admission import (
    ADMISSION_V1,
    WORKLOADS,
    admission_review,
    pod,
    pod_spec,
    workload,
)
from tests.support.endpoint import RegistryEndpoint
from tests.support.faultproxy import FaultProxy, Hang, Respond, Trickle
from tests.support.net import free_port
from tests.support.pki import TLSMaterial
from tests.support.registry import TLSFiles
from tests.support.webhook import (
    DEADLINE,
    SLACK,
    Webhook,
    metric,
    response_of,
    running,
    start_webhook,
)

FOUND = "sample/app:1.0.0"
FOUND_DOCKER = "sample/app:docker"
FOUND_INDEX = "sample/app:multi"
PRIVATE = "private/secret:1.0"


def names_pair(message: str, container: str, image: str) -> bool:
    """One ``;``-separated clause of ``message`` names both the container and the image."""
    return any(f"'{container}'" in part and image in part for part in message.split("; "))


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def webhook(
    tmp_path_factory: pytest.TempPathFactory, tls_material: TLSMaterial
) -> Iterator[Webhook]:
    """Defaults (``--mode deny --on-error pass``) but a short ``--review-deadline``."""
    workdir = tmp_path_factory.mktemp("webhook")
    with running(workdir, tls_material, "--review-deadline", str(DEADLINE)) as hook:
        yield hook


@pytest.fixture(scope="module")
def webhook_fail(
    tmp_path_factory: pytest.TempPathFactory, tls_material: TLSMaterial
) -> Iterator[Webhook]:
    workdir = tmp_path_factory.mktemp("webhook-fail")
    args = ("--on-error", "fail", "--review-deadline", str(DEADLINE))
    with running(workdir, tls_material, *args) as hook:
        yield hook


@pytest.fixture(scope="module")
def webhook_warn(
    tmp_path_factory: pytest.TempPathFactory, tls_material: TLSMaterial
) -> Iterator[Webhook]:
    workdir = tmp_path_factory.mktemp("webhook-warn")
    with running(workdir, tls_material, "--mode", "warn") as hook:
        yield hook


@pytest.fixture
def proxy(registry_plain: RegistryEndpoint) -> Iterator[FaultProxy]:
    with FaultProxy(registry_plain.url) as proxy:
        yield proxy
    assert proxy.errors == [], "the fault proxy itself failed"


def policy_server(request: pytest.FixtureRequest, on_error: str) -> Webhook:
    hook = request.getfixturevalue("webhook" if on_error == "pass" else "webhook_fail")
    assert isinstance(hook, Webhook)
    return hook


# -- verdicts against the real registry ------------------------------------------------------


@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_every_kind_with_images_found_is_allowed(
    webhook: Webhook, registry_plain: RegistryEndpoint, kind: str
) -> None:
    ref = registry_plain.ref
    spec = pod_spec(
        init=[("init", ref(FOUND))],
        main=[("app", ref(FOUND_DOCKER))],
        ephemeral=[("debug", ref(FOUND_INDEX))],
    )
    answer = webhook.review(workload(kind, spec))
    assert answer["allowed"] is True
    assert "status" not in answer
    assert "warnings" not in answer


@pytest.mark.parametrize("kind", list(WORKLOADS))
def test_every_kind_names_each_missing_image_and_its_container(
    webhook: Webhook, registry_plain: RegistryEndpoint, kind: str
) -> None:
    ref = registry_plain.ref
    gone = {
        "init-gone": ref(f"sample/app:gone-{kind.lower()}-init"),
        "sidecar-gone": ref(f"sample/app:gone-{kind.lower()}-main"),
        "debug-gone": ref(f"sample/nothing-{kind.lower()}:1"),
    }
    spec = pod_spec(
        init=[("init-ok", ref(FOUND)), ("init-gone", gone["init-gone"])],
        main=[("app", ref(FOUND_DOCKER)), ("sidecar-gone", gone["sidecar-gone"])],
        ephemeral=[("debug-gone", gone["debug-gone"])],
    )
    uid = str(uuid.uuid4())
    answer = webhook.review(workload(kind, spec), uid=uid)
    assert answer["uid"] == uid
    assert answer["allowed"] is False
    status = answer["status"]
    assert status["code"] == 403
    message = status["message"]
    for container, image in gone.items():
        assert names_pair(message, container, image), (container, message)
    for fine in ("init-ok", "app"):
        assert f"'{fine}'" not in message
    assert kind in message


def test_a_tekton_task_s_steps_and_sidecars_are_checked(
    webhook: Webhook, registry_plain: RegistryEndpoint
) -> None:
    """Any kind's containers, found by shape as scan finds them (issue #13): a Task whose
    sidecar's image was never pushed is refused, naming the sidecar; its step's
    ``$(params.image)`` is the Tekton controller's to fill in, so it is not checked."""
    ref = registry_plain.ref
    task: dict[str, Any] = {
        "apiVersion": "tekton.dev/v1",
        "kind": "Task",
        "metadata": {"name": "build", "namespace": "team-a"},
        "spec": {
            "stepTemplate": {"image": ref(FOUND), "env": []},
            "steps": [
                {"name": "compile", "image": ref(FOUND_DOCKER), "script": "make"},
                {"name": "push", "image": "$(params.image)"},
            ],
            "sidecars": [{"name": "cache", "image": ref("sample/app:gone-tekton-sidecar")}],
        },
    }
    answer = webhook.review(task)
    assert answer["allowed"] is False
    message = answer["status"]["message"]
    assert names_pair(message, "cache", ref("sample/app:gone-tekton-sidecar")), message
    assert "'compile'" not in message and "'stepTemplate'" not in message
    assert "params.image" not in message
    task["spec"]["sidecars"] = [{"name": "cache", "image": ref(FOUND_INDEX)}]
    answer = webhook.review(task)
    assert answer["allowed"] is True
    assert answer["warnings"] == [
        "container 'push': image '$(params.image)' not checked: "
        "a template placeholder its controller fills in"
    ]


def test_an_argo_workflow_s_templates_are_checked(
    webhook: Webhook, registry_plain: RegistryEndpoint
) -> None:
    ref = registry_plain.ref
    workflow = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "hello-", "namespace": "team-a"},
        "spec": {
            "templates": [
                {"name": "main", "steps": [[{"name": "a", "template": "say"}]]},
                {"name": "say", "container": {"image": ref(FOUND), "command": ["true"]}},
                {"name": "gen", "script": {"image": ref("sample/gone-argo:1"), "source": "1"}},
            ]
        },
    }
    answer = webhook.review(workflow)
    assert answer["allowed"] is False
    assert names_pair(answer["status"]["message"], "gen", ref("sample/gone-argo:1"))


@pytest.mark.parametrize("on_error", ["pass", "fail"])
def test_found_over_token_auth_and_tls(
    request: pytest.FixtureRequest, registry_token: RegistryEndpoint, on_error: str
) -> None:
    hook = policy_server(request, on_error)
    answer = hook.review(pod(registry_token.ref(FOUND)))
    assert answer["allowed"] is True
    assert "warnings" not in answer


def test_denied_passes_with_a_warning_by_default(
    webhook: Webhook, registry_token: RegistryEndpoint
) -> None:
    image = registry_token.ref(PRIVATE)
    answer = webhook.review(pod(image))
    assert answer["allowed"] is True
    assert "status" not in answer
    [warning] = answer["warnings"]
    assert "denied" in warning
    assert names_pair(warning, "c0", image)


def test_denied_is_refused_with_on_error_fail(
    webhook_fail: Webhook, registry_token: RegistryEndpoint
) -> None:
    image = registry_token.ref(PRIVATE)
    answer = webhook_fail.review(pod(image))
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 403
    assert "denied" in answer["status"]["message"]
    assert names_pair(answer["status"]["message"], "c0", image)


def test_missing_is_refused_even_with_on_error_pass(
    webhook: Webhook, registry_plain: RegistryEndpoint
) -> None:
    answer = webhook.review(pod(registry_plain.ref("sample/app:never-pushed")))
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 403


def test_warn_mode_allows_missing_with_warnings(
    webhook_warn: Webhook, registry_plain: RegistryEndpoint
) -> None:
    found, gone = registry_plain.ref(FOUND), registry_plain.ref("sample/app:warn-only")
    answer = webhook_warn.review(pod(found, gone))
    assert answer["allowed"] is True
    assert "status" not in answer
    [warning] = answer["warnings"]
    assert names_pair(warning, "c1", gone)
    assert "missing" in warning


def install_fault(fault: str, proxy: FaultProxy) -> str:
    """Make the registry unreachable one way; return its host for image references."""
    if fault == "refused":
        return f"127.0.0.1:{free_port()}"  # nothing listens there
    if fault == "always-503":
        proxy.on(None, r".*", Respond.oci(503, "UNAVAILABLE", "registry is down for maintenance"))
    else:
        proxy.on(None, r".*", Hang())
    return proxy.host


@pytest.mark.parametrize("fault", ["refused", "always-503", "hang"])
def test_registry_down_answers_within_the_deadline(
    webhook: Webhook, webhook_fail: Webhook, proxy: FaultProxy, fault: str
) -> None:
    image = f"{install_fault(fault, proxy)}/sample/app:1.0.0"

    def timed(hook: Webhook) -> tuple[dict[str, Any], float]:
        started = time.monotonic()
        answer = hook.review(pod(image))
        return answer, time.monotonic() - started

    with ThreadPoolExecutor(2) as pool:  # both policies at once: one deadline's wait, not two
        passing, failing = pool.map(timed, [webhook, webhook_fail])

    (allowed, allowed_in), (refused, refused_in) = passing, failing
    assert allowed_in < DEADLINE + SLACK, f"--on-error pass answered in {allowed_in:.2f}s"
    assert refused_in < DEADLINE + SLACK, f"--on-error fail answered in {refused_in:.2f}s"
    assert allowed["allowed"] is True
    [warning] = allowed["warnings"]
    assert names_pair(warning, "c0", image)
    assert refused["allowed"] is False
    assert refused["status"]["code"] == 403
    assert names_pair(refused["status"]["message"], "c0", image)


# -- bodies that are not reviews -------------------------------------------------------------


def raw(value: Any) -> bytes:
    return json.dumps(value).encode()


def review_with(obj: Any, **request: Any) -> bytes:
    body = admission_review(None)
    body["request"]["object"] = obj
    body["request"].update(request)
    return raw(body)


def without_uid() -> bytes:
    body = admission_review(pod("nginx"))
    del body["request"]["uid"]
    return raw(body)


def thing(pod_spec: dict[str, Any]) -> bytes:
    """A custom resource: with ``x-kubernetes-preserve-unknown-fields`` in its CRD, the API
    server lets any shape through to the webhook."""
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "spec": {"template": {"spec": pod_spec}},
    }
    return review_with(obj)


DEEP_JSON = b"[" * 100_000 + b"]" * 100_000
CONTAINERS_A_NUMBER = thing({"containers": 5})
PULL_SECRETS_A_NUMBER = thing({"containers": [], "imagePullSecrets": 5})
METADATA_A_STRING = review_with({"apiVersion": "v1", "kind": "Pod", "metadata": "x", "spec": {}})

BAD_REQUEST = [
    pytest.param(b"{not json", id="not-json"),
    pytest.param(b"", id="empty"),
    pytest.param(b'{"request": "\xff"}', id="not-utf8"),
    pytest.param(raw([1, 2]), id="json-array"),
    pytest.param(raw(None), id="json-null"),
    pytest.param(raw(pod("nginx")), id="a-pod-not-a-review"),
    pytest.param(
        raw(admission_review(pod("nginx"), api_version="admission.k8s.io/v1beta1")), id="v1beta1"
    ),
    pytest.param(raw({"apiVersion": ADMISSION_V1, "kind": "AdmissionReview"}), id="no-request"),
    pytest.param(without_uid(), id="no-uid"),
    pytest.param(review_with(pod("nginx"), uid=42), id="uid-not-a-string"),
    pytest.param(
        DEEP_JSON,
        id="deeply-nested-json",
    ),
]

NO_IMAGES = [
    pytest.param(
        review_with({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        id="no-pod-template",
    ),
    pytest.param(review_with(None, operation="DELETE", oldObject=pod("nginx")), id="delete"),
    pytest.param(
        review_with({"apiVersion": "v1", "kind": "Pod", "metadata": {}}), id="pod-no-spec"
    ),
    pytest.param(
        review_with({"apiVersion": "example.com/v1", "kind": "Thing", "spec": {"template": 1}}),
        id="template-not-an-object",
    ),
]


MALFORMED = [
    pytest.param(thing({"containers": {"a": {"image": "x"}}}), id="containers-a-map"),
    pytest.param(
        CONTAINERS_A_NUMBER,
        id="containers-a-number",
    ),
    pytest.param(
        PULL_SECRETS_A_NUMBER,
        id="pull-secrets-a-number",
    ),
    pytest.param(
        METADATA_A_STRING,
        id="metadata-a-string",
    ),
]


def assert_still_serving(hook: Webhook, registry: RegistryEndpoint) -> None:
    assert hook.process.poll() is None
    assert hook.review(pod(registry.ref(FOUND)))["allowed"] is True


@pytest.mark.parametrize("body", BAD_REQUEST)
def test_not_a_review_is_a_400_with_a_json_reason(
    webhook: Webhook, registry_plain: RegistryEndpoint, body: bytes
) -> None:
    answer = webhook.post(body)
    assert answer.status_code == 400, answer.text
    assert answer.headers["Content-Type"].startswith("application/json")
    reason = answer.json()["error"]
    assert isinstance(reason, str)
    assert reason
    assert_still_serving(webhook, registry_plain)


@pytest.mark.parametrize("body", NO_IMAGES)
def test_review_without_images_is_allowed(
    webhook: Webhook, registry_plain: RegistryEndpoint, body: bytes
) -> None:
    answer = webhook.post(body)
    assert answer.status_code == 200, answer.text
    uid = json.loads(body)["request"]["uid"]
    assert response_of(answer, uid)["allowed"] is True
    assert_still_serving(webhook, registry_plain)


@pytest.mark.parametrize("body", MALFORMED)
def test_malformed_object_gets_a_400_or_a_verdict(webhook: Webhook, body: bytes) -> None:
    answer = webhook.post(body)
    assert answer.status_code in (200, 400), answer.text
    if answer.status_code == 400:
        assert answer.json()["error"]
    else:
        response_of(answer, json.loads(body)["request"]["uid"])


def test_bodies_that_used_to_crash_the_handler_get_an_answer_not_a_500(
    webhook: Webhook, registry_plain: RegistryEndpoint
) -> None:
    for body in [DEEP_JSON, CONTAINERS_A_NUMBER, PULL_SECRETS_A_NUMBER, METADATA_A_STRING]:
        assert webhook.post(body).status_code in (200, 400)
    assert_still_serving(webhook, registry_plain)
    assert webhook.logs()  # every line JSON


def test_oversized_body_is_refused_not_a_500(
    webhook: Webhook, registry_plain: RegistryEndpoint
) -> None:
    body = admission_review(pod("nginx"))
    body["request"]["object"]["metadata"]["annotations"] = {"big": "x" * (4 * 1024 * 1024)}
    answer = webhook.post(raw(body))
    assert answer.status_code == 413
    assert_still_serving(webhook, registry_plain)


# -- health, readiness, metrics --------------------------------------------------------------


def test_health_and_readiness(webhook: Webhook) -> None:
    assert webhook.client.get("/healthz").status_code == 200
    assert webhook.client.get("/readyz").status_code == 200


def test_metrics_count_reviews_registry_requests_and_cache_lookups(
    tmp_path: Path, tls_material: TLSMaterial, registry_plain: RegistryEndpoint
) -> None:
    found, gone = registry_plain.ref(FOUND), registry_plain.ref("sample/app:metrics-missing")
    with running(tmp_path, tls_material) as hook:
        before = hook.metrics()
        assert hook.review(pod(found))["allowed"] is True  # miss: asks the registry
        assert hook.review(pod(found))["allowed"] is True  # hit
        assert hook.review(pod(gone))["allowed"] is False  # miss
        assert hook.post(b"nope").status_code == 400
        after = hook.metrics()

    def delta(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert delta("imagecheck_reviews_total", result="allowed") == 2
    assert delta("imagecheck_reviews_total", result="denied") == 1
    assert delta("imagecheck_reviews_total", result="bad_request") == 1
    assert delta("imagecheck_registry_requests_total", kind="ping", status="200") == 1
    assert delta("imagecheck_registry_requests_total", kind="manifest", status="200") == 1
    assert delta("imagecheck_registry_requests_total", kind="manifest", status="404") == 1
    assert delta("imagecheck_cache_lookups_total", hit="true") == 1
    assert delta("imagecheck_cache_lookups_total", hit="false") == 2
    # Answered reviews are timed; a body that is not a review is not.
    assert delta("imagecheck_review_duration_seconds_count") == 3
    assert delta("imagecheck_review_duration_seconds_bucket", le="+Inf") == 3
    assert delta("imagecheck_review_duration_seconds_sum") > 0


# -- the result cache ------------------------------------------------------------------------


def manifest_path(name: str) -> str:
    repository, _, tag = name.rpartition(":")
    return rf"^/v2/{repository}/manifests/{tag}$"


@pytest.fixture
def cached(
    tmp_path: Path, tls_material: TLSMaterial, proxy: FaultProxy
) -> Iterator[tuple[Webhook, FaultProxy]]:
    """A fresh server (empty cache) behind which the proxy counts each manifest request."""
    args = ("--cache-ttl", "3s", "--missing-ttl", "1s", "--retries", "0")
    with running(tmp_path, tls_material, *args) as hook:
        yield hook, proxy


def test_found_and_missing_are_cached_for_their_ttls(
    cached: tuple[Webhook, FaultProxy], registry_plain: RegistryEndpoint
) -> None:
    hook, proxy = cached
    digest = registry_plain.images[FOUND_DOCKER].digest
    tag, gone, pinned = FOUND, "sample/app:cache-missing", f"sample/app@{digest}"
    images = [proxy.ref(tag), proxy.ref(gone), proxy.ref(pinned)]

    def review_and_count() -> tuple[int, int, int]:
        hook.review(pod(*images))
        return (
            proxy.count(path=manifest_path(tag)),
            proxy.count(path=manifest_path(gone)),
            proxy.count(path=rf"^/v2/sample/app/manifests/{digest}$"),
        )

    assert review_and_count() == (1, 1, 1)
    cached_at = time.monotonic()
    assert review_and_count() == (1, 1, 1), "a second review within the TTLs asked again"
    time.sleep(max(0.0, cached_at + 1.4 - time.monotonic()))
    assert review_and_count() == (1, 2, 1), "after --missing-ttl 1s only the missing tag is asked"
    time.sleep(max(0.0, cached_at + 3.4 - time.monotonic()))
    assert review_and_count() == (2, 3, 1), "after --cache-ttl 3s the tag is asked again"


def test_denials_and_errors_are_not_cached(cached: tuple[Webhook, FaultProxy]) -> None:
    hook, proxy = cached
    denied, failing = "public/tool:2.1", "sample/app:docker"
    proxy.on(None, manifest_path(denied), Respond.oci(403, "DENIED", "access to it is denied"))
    proxy.on(None, manifest_path(failing), Respond.oci(500, "UNKNOWN", "storage backend failed"))
    for _ in range(2):
        answer = hook.review(pod(proxy.ref(denied), proxy.ref(failing)))
        assert answer["allowed"] is True  # --on-error pass
        assert len(answer["warnings"]) == 2
    assert proxy.count(path=manifest_path(denied)) == 2
    assert proxy.count(path=manifest_path(failing)) == 2  # --retries 0: one request a review


def test_concurrent_reviews_of_a_new_image_share_one_registry_request(
    cached: tuple[Webhook, FaultProxy], tls_material: TLSMaterial
) -> None:
    hook, proxy = cached
    name = FOUND_DOCKER
    # A slow answer (about half a second), so that all the reviews arrive while it is on its way.
    proxy.on("HEAD", manifest_path(name), Trickle(interval=0.05, chunk=32))
    bodies = [json.dumps(admission_review(pod(proxy.ref(name)))).encode() for _ in range(20)]
    before = hook.metrics()

    async def fire() -> list[httpx.Response]:
        verify = ssl.create_default_context(cafile=str(tls_material.ca_file))
        limits = httpx.Limits(max_connections=20)
        async with httpx.AsyncClient(
            base_url=f"https://127.0.0.1:{hook.port}", verify=verify, limits=limits, timeout=20
        ) as client:
            return await asyncio.gather(*(client.post("/validate", content=b) for b in bodies))

    answers = asyncio.run(fire())
    assert all(a.status_code == 200 and a.json()["response"]["allowed"] for a in answers)
    assert proxy.count(path=manifest_path(name)) == 1
    after = hook.metrics()
    misses = metric(after, "imagecheck_cache_lookups_total", hit="false") - metric(
        before, "imagecheck_cache_lookups_total", hit="false"
    )
    hits = metric(after, "imagecheck_cache_lookups_total", hit="true") - metric(
        before, "imagecheck_cache_lookups_total", hit="true"
    )
    assert misses + hits == 20
    # More than one review missed the cache: they waited on one request, not on a cached result.
    assert misses >= 2, f"only {misses:g} review(s) overlapped the registry request"


# -- certificate rotation --------------------------------------------------------------------


def served_certificate(port: int) -> bytes:
    """The DER certificate a new TLS connection is offered (verification is not the point)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as sock,
        context.wrap_socket(sock, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def leaf_der(chain_pem: Path) -> bytes:
    first = chain_pem.read_text(encoding="ascii").split("-----END CERTIFICATE-----")[0]
    return ssl.PEM_cert_to_DER_cert(first + "-----END CERTIFICATE-----\n")


RELOAD_INTERVAL = 1.0


@dataclass(frozen=True)
class Rotation:
    """A server started with certificate A (the session's) from files it may replace, and a
    certificate B from a second CA, as after a cert-manager issuer change."""

    hook: Webhook
    live: TLSFiles
    cert_b: bytes  # the PEM chain
    key_b: bytes
    ca_b: Path


@pytest.fixture
def rotation(tmp_path: Path, tls_material: TLSMaterial) -> Iterator[Rotation]:
    live = TLSFiles(cert=tmp_path / "tls.crt", key=tmp_path / "tls.key")
    shutil.copyfile(tls_material.server.cert, live.cert)
    shutil.copyfile(tls_material.server.key, live.key)
    ca_b = trustme.CA(organization_name="imagecheck rotated CA")
    leaf_b = ca_b.issue_cert("127.0.0.1", "localhost", common_name="127.0.0.1")
    ca_b.cert_pem.write_to_path(str(tmp_path / "ca-b.pem"))
    interval = ("--cert-reload-interval", f"{RELOAD_INTERVAL:g}s")
    hook = start_webhook(tmp_path / "serve", tls_material, *interval, cert=live)
    try:
        yield Rotation(
            hook,
            live,
            b"".join(p.bytes() for p in leaf_b.cert_chain_pems),
            leaf_b.private_key_pem.bytes(),
            tmp_path / "ca-b.pem",
        )
    finally:
        hook.close()


def swap(target: Path, blob: bytes) -> None:
    """Replace a file atomically (write beside it, rename), as kubelet updates a secret."""
    staged = target.with_suffix(".new")
    staged.write_bytes(blob)
    staged.replace(target)


def wait_for_log(hook: Webhook, message: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not any(entry["msg"] == message for entry in hook.logs()):
        assert time.monotonic() < deadline, f"no {message!r} log line within {timeout}s"
        time.sleep(0.1)


def test_rotated_certificate_is_served_without_a_restart(
    rotation: Rotation, registry_plain: RegistryEndpoint
) -> None:
    hook, live = rotation.hook, rotation.live
    pid = hook.process.pid
    assert served_certificate(hook.port) == leaf_der(live.cert)
    assert hook.review(pod(registry_plain.ref(FOUND)))["allowed"] is True

    swap(live.key, rotation.key_b)
    swap(live.cert, rotation.cert_b)
    cert_b = leaf_der(live.cert)
    deadline = time.monotonic() + RELOAD_INTERVAL + 5
    while served_certificate(hook.port) != cert_b:
        assert time.monotonic() < deadline, "certificate B not served after the interval"
        time.sleep(0.2)

    assert hook.process.poll() is None
    assert hook.process.pid == pid
    with hook.new_client(rotation.ca_b) as trusting_b:
        body = raw(admission_review(pod(registry_plain.ref(FOUND))))
        assert trusting_b.post("/validate", content=body).status_code == 200
    messages = [entry["msg"] for entry in hook.logs()]
    assert messages.count("serving") == 1, "the server restarted"
    assert "certificate reloaded" in messages


def test_a_mismatched_pair_keeps_the_old_certificate(rotation: Rotation) -> None:
    hook, live = rotation.hook, rotation.live
    cert_a = served_certificate(hook.port)
    swap(live.cert, rotation.cert_b)  # the key is still A's: a writer caught half-way
    wait_for_log(hook, "certificate reload failed; keeping the old one", RELOAD_INTERVAL + 5)
    assert served_certificate(hook.port) == cert_a
    assert hook.client.get("/healthz").status_code == 200
    swap(live.key, rotation.key_b)  # the pair is whole again: B from the next look
    deadline = time.monotonic() + RELOAD_INTERVAL + 5
    while served_certificate(hook.port) == cert_a:
        assert time.monotonic() < deadline, "certificate B not served after the interval"
        time.sleep(0.2)


# -- SIGTERM ---------------------------------------------------------------------------------


def test_sigterm_exits_zero_promptly(
    tmp_path: Path, tls_material: TLSMaterial, registry_plain: RegistryEndpoint
) -> None:
    hook = start_webhook(tmp_path, tls_material)
    try:
        # Leaves an idle keep-alive connection open, as the API server does.
        assert hook.review(pod(registry_plain.ref(FOUND)))["allowed"] is True
        code, seconds = hook.terminate()
    finally:
        hook.close()
    assert code == 0
    assert seconds < 3.0, f"exited {seconds:.2f}s after SIGTERM"
    assert hook.logs()[-1]["msg"] == "shutting down"


def test_sigterm_lets_a_review_in_flight_finish(
    tmp_path: Path, tls_material: TLSMaterial, proxy: FaultProxy
) -> None:
    proxy.on(None, r".*", Hang())
    hook = start_webhook(tmp_path, tls_material, "--review-deadline", str(DEADLINE))
    try:
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(hook.review, pod(proxy.ref(FOUND)))
            time.sleep(0.5)  # the review is waiting on the hung registry
            code, seconds = hook.terminate()
            answer = pending.result()
    finally:
        hook.close()
    assert answer["allowed"] is True  # answered (--on-error pass), not dropped
    assert code == 0
    assert seconds < DEADLINE + SLACK, f"exited {seconds:.2f}s after SIGTERM"


# -- logs ------------------------------------------------------------------------------------


def test_logs_are_json_lines_with_review_fields(
    webhook: Webhook, registry_plain: RegistryEndpoint
) -> None:
    uid = str(uuid.uuid4())
    spec = pod_spec([], [("app", registry_plain.ref("sample/app:logged-missing"))], [])
    webhook.review(workload("Deployment", spec, name="logged"), uid=uid)
    assert webhook.post(b"nope").status_code == 400
    entries = webhook.logs()  # fails on any line that is not JSON
    assert all({"time", "level", "msg"} <= entry.keys() for entry in entries)
    [line] = [e for e in entries if e.get("uid") == uid]
    assert line["msg"] == "review"
    assert line["kind"] == "Deployment"
    assert line["namespace"] == "team-a"
    assert line["object"] == "logged"
    assert line["outcome"] == "denied"
    assert line["allowed"] is False
    assert "logged-missing" in line["reason"]
    assert any(e["msg"] == "bad review" and e.get("reason") for e in entries)
