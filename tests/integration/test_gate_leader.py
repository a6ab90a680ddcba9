"""``imagecheck gate`` replicas with leader election: real subprocesses against the Kubernetes
API stand-in and the real registry, allowed exactly the RBAC of ``examples/gate/controller.yaml``.

* Of two replicas one holds the Lease and lifts gates; the other acts on nothing, yet answers
  ``/mutate`` with the gate, since the Lease it reads is renewed (a controller is acting).
* The leader killed (no clean stop, the Lease not released): the other takes the Lease once it
  has gone unrenewed for the Lease's duration, and finishes the work.
* No replica can hold the Lease and its holder has stopped renewing it: ``/mutate`` answers
  without the gate once the Lease's duration is up (fail open), and no gate is lifted.
"""

from __future__ import annotations

import json
import secrets
import select
import signal
import time
from typing import Any

import httpx

from imagecheck.cluster._model import GATE
from tests.examples.checks import granted
from tests.examples.manifests import EXAMPLES, collect
from tests.support.endpoint import RegistryEndpoint
from tests.support.gatecase import (
    Start,
    eventually,
    gated_job,
    gates,
    gates_new_pods,
    mutate,
    start_fixture,  # noqa: F401 (a fixture)
)
from tests.support.images import push_image
from tests.support.kubeapi import KubeAPI
from tests.support.kubeapi import objects as k8s
from tests.support.net import free_port
from tests.support.tools import skip_or_fail

CONTROLLER = EXAMPLES / "gate" / "controller.yaml"
LEASE_NS = "imagecheck-system"
LEASE = "imagecheck-gate"
DURATION = 15.0  # the Lease's duration, as the gate writes it (LeaseConfig's default)
RETRY = 5.0  # between a candidate's rounds


def example_rbac() -> set[tuple[str, str]]:
    """(verb, resource) pairs the example's ClusterRole and Role grant: the stand-in's table."""
    roles = [
        d.body
        for d in collect()[1]
        if d.path == EXAMPLES / "gate" / "controller.yaml"
        and d.body["kind"] in ("ClusterRole", "Role")
    ]
    if len(roles) != 2:
        skip_or_fail("examples/gate/controller.yaml not read (PyYAML missing?)")
    return {(verb, resource) for role in roles
            for (_, resource), verbs in granted(role).items() for verb in verbs}  # fmt: skip


def lease(kube_api: KubeAPI) -> dict[str, Any]:
    """The Lease's spec as stored (empty: no Lease)."""
    with kube_api.store.lock:
        stored = kube_api.store.objects.get(("leases", LEASE_NS, LEASE)) or {}
    return dict(stored.get("spec") or {})


def holder(kube_api: KubeAPI) -> str:
    return str(lease(kube_api).get("holderIdentity") or "")


def replica(start: Start, name: str, port: int, *args: str) -> Any:
    return start("--leader-elect", "--lease-namespace", LEASE_NS, "--listen",
                 f"127.0.0.1:{port}", "--wait", "5m", *args, pod=name)  # fmt: skip


def said(process: Any) -> list[dict[str, Any]]:
    """The outcome lines a stopped replica printed."""
    assert process.stdout is not None
    return [json.loads(line) for line in process.stdout.read().splitlines()]


def silent(process: Any) -> bool:
    """The running replica has printed nothing (no outcome: it acted on no pod)."""
    readable, _, _ = select.select([process.stdout], [], [], 0)
    return not readable


def test_one_replica_leads_the_other_takes_over_when_it_dies(
    kube_api: KubeAPI, registry_plain: RegistryEndpoint, start: Start
) -> None:
    kube_api.allow(*example_rbac())
    repo = f"pushed/{secrets.token_hex(4)}"
    gated_job(kube_api, "found", registry_plain.ref("sample/app:1.0.0"))
    gated_job(kube_api, "train", f"{registry_plain.host}/{repo}:1.0")
    port_a, port_b = free_port(), free_port()
    a = replica(start, "gate-a", port_a)
    eventually(lambda: holder(kube_api).startswith("gate-a_"))
    b = replica(start, "gate-b", port_b)

    # A lifts the gate of the pod whose image exists and keeps the other's; B, not leading,
    # still gates new pods: the Lease it reads is renewed, so a controller is acting.
    eventually(lambda: gates(kube_api, "found-abcde") == [])
    eventually(lambda: gates_new_pods(port_b) and gates_new_pods(port_a))
    time.sleep(RETRY + 1)  # a round of B's, and re-checks of A's, past
    assert holder(kube_api).startswith("gate-a_")
    assert gates_new_pods(port_b)
    assert silent(b), "the replica that does not lead acted"
    assert gates(kube_api, "train-abcde") == [{"name": GATE}]

    a.send_signal(signal.SIGKILL)  # no clean stop: the Lease stays A's, unrenewed
    killed = time.monotonic()
    a.wait(timeout=10)
    assert {(o["pod"], o["action"]) for o in said(a)} >= {
        ("found-abcde", "released"),
        ("train-abcde", "kept"),
    }
    with httpx.Client(trust_env=False) as client:
        push_image(client, registry_plain.url, repo, "1.0")

    # B waits out the Lease's duration from the last renewal it saw (a round's delay to see
    # it, a round's to act), takes it, lists and releases the pod whose image now exists.
    eventually(lambda: holder(kube_api).startswith("gate-b_"), timeout=DURATION + 2 * RETRY + 5)
    assert time.monotonic() - killed >= DURATION - RETRY - 1  # not before the Lease expired
    assert lease(kube_api)["leaseTransitions"] == 1
    eventually(lambda: gates(kube_api, "train-abcde") == [])
    # The line comes after the patch (and its Event): a SIGTERM between the two would end the
    # pass before it says what it did, so wait for the line first.
    eventually(lambda: not silent(b))
    b.send_signal(signal.SIGTERM)
    b.wait(timeout=10)
    assert [(o["pod"], o["action"]) for o in said(b)] == [("train-abcde", "released")]


def test_without_a_fresh_lease_mutate_admits_pods_ungated(
    kube_api: KubeAPI, registry_plain: RegistryEndpoint, start: Start
) -> None:
    # A holder that stopped renewing, and a replica that may read the Lease but not take it:
    # no controller acts. A short duration keeps the test short; the replica reads it from
    # the Lease, as client-go does.
    kube_api.allow(*(example_rbac() - {("update", "leases"), ("create", "leases")}))
    gone = k8s.lease(LEASE, LEASE_NS, "gate-gone_1")
    gone["spec"]["leaseDurationSeconds"] = 3
    kube_api.add(gone)
    gated_job(kube_api, "found", registry_plain.ref("sample/app:1.0.0"))
    port = free_port()
    process = replica(start, "gate-c", port)

    # Fresh when first seen (this replica's clock, never the holder's renewTime), then stale.
    eventually(lambda: gates_new_pods(port))
    eventually(lambda: not gates_new_pods(port), timeout=3 + RETRY)
    end = time.monotonic() + RETRY + 1  # rounds that try, and fail, to take the Lease
    while time.monotonic() < end:
        answer = mutate(port)
        assert answer is not None and answer["allowed"] is True and "patch" not in answer
        time.sleep(0.5)
    assert holder(kube_api) == "gate-gone_1"
    assert gates(kube_api, "found-abcde") == [{"name": GATE}]
    assert silent(process)
