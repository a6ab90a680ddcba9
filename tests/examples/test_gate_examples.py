"""``examples/gate/``: the MutatingWebhookConfiguration that sends pod creations to
``imagecheck gate``'s ``POST /mutate`` and its Service (``mutatingwebhook.yaml``), and the gate
controller that serves it (``controller.yaml``: Deployment, RBAC, cert-manager objects),
checked offline.

* Both objects validate against the Kubernetes schemas of ``K8S_VERSION``, strict.
* They fit together and with the server: the webhook calls this Service on the path the
  endpoint serves; only pod CREATE is sent (the gate can be added at creation only); it never
  blocks the cluster (``failurePolicy: Ignore``, a short timeout, no side effects); the gate
  controller's namespace and kube-system are never sent, whatever their labels; reinvocation
  is asked for, since adding the gate is idempotent.
* The controller serves what the configuration calls: its pods carry the labels the Service
  selects and the port it targets; its args, accepted by the real ``imagecheck gate``, serve
  TLS from the secret of the Certificate whose CA the configuration injects, issued for the
  Service's DNS name by the cert-manager bootstrap (a self-signed Issuer, a CA Certificate, a
  CA Issuer). cert-manager's kinds are CRDs kubernetes-validate has no schemas for: they are
  validated against the part of cert-manager.io/v1's schema the webhook's tests hold
  (``check_cert_manager``), the core objects against the Kubernetes schemas, strict.
* Its RBAC is what the gate calls and no more (:data:`RULES`, each from a call in
  ``cluster/``); ``tests/integration/test_gate_leader.py`` runs the real controllers under
  exactly these rules.

kubernetes-validate missing: skip locally, fail under CI=true.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from imagecheck.cli._gate import gate
from imagecheck.webhook import MUTATE_PATHS
from tests.examples.checks import HARDENED, by_label, check_schema, cli_params, granted
from tests.examples.manifests import EXAMPLES, Json, collect, containers, pod_spec
from tests.examples.webhookparts import (
    CERT_MANAGER,
    INJECT_CA_FROM,
    check_cert_manager,
    container_port,
    find,
    go_duration_hours,
    listen_port,
    mount_of,
    secret_volume,
    selects,
)

FILE = EXAMPLES / "gate" / "mutatingwebhook.yaml"
CONTROLLER = EXAMPLES / "gate" / "controller.yaml"
# What the gate calls, by (API group, resource): cluster/_gate_loop.py lists and watches pods;
# _gate_pass.py reads a pod again and JSON-patches its gate away, reads its Job and fails it
# with reap_pass.fail_job (a merge patch of the Job, not of jobs/status); reap_events.Recorder
# creates Events; _secrets.PodKeychains gets the pod's ServiceAccount and pull secrets.
RULES = {
    ("", "pods"): {"get", "list", "watch", "patch"},
    ("batch", "jobs"): {"get", "patch"},
    ("", "events"): {"create"},
    ("", "serviceaccounts"): {"get"},
    ("", "secrets"): {"get"},
}
# _lease.Elector: get, create when there is none, update (a PUT with the version read).
LEASE_RULES = {("coordination.k8s.io", "leases"): {"get", "create", "update"}}
NEVER_GATED = {"kube-system", "imagecheck-system"}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
MAX_TIMEOUT_SECONDS = 10
_, _DOCUMENTS = collect()
DOCUMENTS = [d for d in _DOCUMENTS if d.path == FILE]
CONTROLLER_DOCUMENTS = [d for d in _DOCUMENTS if d.path == CONTROLLER]
CORE = [d for d in CONTROLLER_DOCUMENTS if d.body.get("apiVersion") != CERT_MANAGER]
CERT_MANAGER_OBJECTS = [d for d in CONTROLLER_DOCUMENTS if d.body.get("apiVersion") == CERT_MANAGER]
ALL = [d.body for d in DOCUMENTS + CONTROLLER_DOCUMENTS]


def _one(kind: str) -> Json:
    (body,) = [d.body for d in DOCUMENTS if d.body.get("kind") == kind]
    return body


def _webhook() -> Json:
    (hook,) = _one("MutatingWebhookConfiguration")["webhooks"]
    result: Json = hook
    return result


def test_the_file_holds_the_configuration_and_its_service() -> None:
    kinds = sorted(str(d.body.get("kind")) for d in DOCUMENTS)
    assert kinds == ["MutatingWebhookConfiguration", "Service"]


@pytest.mark.parametrize("doc", by_label(DOCUMENTS))
def test_schema_is_valid(doc: Any, validator: ModuleType) -> None:
    check_schema(validator, doc.body)


def test_the_webhook_calls_the_service_on_the_mutate_path() -> None:
    service = _one("Service")
    target = _webhook()["clientConfig"]["service"]
    assert (target["name"], target["namespace"]) == (
        service["metadata"]["name"],
        service["metadata"]["namespace"],
    )
    assert target["path"] in MUTATE_PATHS
    assert target["port"] in {port["port"] for port in service["spec"]["ports"]}


def test_only_pod_creation_is_sent() -> None:
    rules = _webhook()["rules"]
    assert rules == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]


def test_it_never_blocks_the_cluster() -> None:
    hook = _webhook()
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["timeoutSeconds"] <= MAX_TIMEOUT_SECONDS
    assert hook["reinvocationPolicy"] == "IfNeeded"


def test_the_controllers_namespace_and_kube_system_are_never_sent() -> None:
    expressions = _webhook()["namespaceSelector"]["matchExpressions"]
    excluded = [
        set(e["values"])
        for e in expressions
        if e["key"] == NAMESPACE_NAME_LABEL and e["operator"] == "NotIn"
    ]
    assert excluded
    assert excluded[0] >= NEVER_GATED
    assert _one("Service")["metadata"]["namespace"] in excluded[0]
    # Opt-in: a namespace without the label is not sent at all.
    assert any(e["operator"] == "In" for e in expressions)


# --- controller.yaml ---------------------------------------------------------------------------


def test_the_directory_holds_the_two_files() -> None:
    assert {d.path.name for d in _DOCUMENTS if d.path.parent == FILE.parent} == {
        FILE.name,
        CONTROLLER.name,
    }


@pytest.mark.parametrize("doc", by_label(CORE))
def test_controller_schema_is_valid(doc: Any, validator: ModuleType) -> None:
    check_schema(validator, doc.body)


@pytest.mark.parametrize("doc", by_label(CERT_MANAGER_OBJECTS))
def test_cert_manager_object(doc: Any) -> None:
    check_cert_manager(doc.body)


def _controller() -> tuple[Json, Json, Json, dict[str, Any]]:
    """The Deployment, its pod spec, its one container and what ``imagecheck gate`` makes of
    the container's args."""
    deployment = find(ALL, "Deployment")
    pod = pod_spec(deployment)
    assert pod is not None
    [(_, container)] = list(containers(pod))
    return deployment, pod, container, cli_params(container["args"], gate)


def test_the_controller_runs_the_gate_with_leader_election() -> None:
    deployment, _, container, params = _controller()
    for key, value in HARDENED.items():
        assert (container.get("securityContext") or {}).get(key) == value, key
    assert not params["once"] and not params["dry_run"] and not params["insecure_http"]
    # None is the default, which is on: only --no-leader-elect turns it off
    assert deployment["spec"]["replicas"] == 2 and params["leader_elect"] is not False
    # The Lease's namespace is the pod's own (POD_NAMESPACE), where the lease Role grants.
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}) for e in container["env"]}
    assert env["POD_NAMESPACE"] == {"fieldPath": "metadata.namespace"}
    assert env["POD_NAME"] == {"fieldPath": "metadata.name"}
    assert params["lease_namespace"] is None
    assert find(ALL, "Role")["metadata"]["namespace"] == deployment["metadata"]["namespace"]


def test_the_controller_is_never_gated_by_its_own_webhook() -> None:
    deployment, *_ = _controller()
    assert deployment["metadata"]["namespace"] in NEVER_GATED


def test_probes_and_ports() -> None:
    _, _, container, params = _controller()
    assert listen_port(params) == container_port(container, "https")
    metrics = int(str(params["metrics_listen"]).rpartition(":")[2])
    assert metrics == container_port(container, "metrics")
    ready, live = container["readinessProbe"]["httpGet"], container["livenessProbe"]["httpGet"]
    assert ready == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert live == {"path": "/healthz", "port": "metrics"}


def test_the_service_reaches_the_controller_pods() -> None:
    deployment, pod, container, _ = _controller()
    service = find(ALL, "Service", "imagecheck-gate")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert selects({"matchLabels": service["spec"]["selector"]}, labels)
    assert selects(deployment["spec"]["selector"], labels)
    for port in service["spec"]["ports"]:
        container_port(container, port["targetPort"])
    assert pod["serviceAccountName"] == find(ALL, "ServiceAccount")["metadata"]["name"]


def test_tls_is_the_secret_of_the_injected_certificate() -> None:
    """--tls-cert/--tls-key come, mounted whole, from the secret of the Certificate that the
    webhook configuration's CA is injected from, issued for the Service's name by a CA Issuer
    whose CA is an isCA Certificate from a self-signed Issuer."""
    _, pod, container, params = _controller()
    configuration = find(ALL, "MutatingWebhookConfiguration")
    namespace, _, name = configuration["metadata"]["annotations"][INJECT_CA_FROM].partition("/")
    certificate = find(ALL, "Certificate", name)
    assert certificate["metadata"]["namespace"] == namespace
    for option in ("tls_cert", "tls_key"):
        mount = mount_of(container, str(params[option]))
        assert "subPath" not in mount and mount.get("readOnly") is True
        assert secret_volume(pod, mount) == certificate["spec"]["secretName"]
    service = _webhook()["clientConfig"]["service"]
    assert f"{service['name']}.{service['namespace']}.svc" in certificate["spec"]["dnsNames"]
    assert "server auth" in certificate["spec"]["usages"]
    spec = certificate["spec"]
    assert go_duration_hours(spec["renewBefore"]) < go_duration_hours(spec["duration"])
    ca_issuer = _issuer_of(certificate)
    ca_secret = ca_issuer["spec"]["ca"]["secretName"]
    [ca_certificate] = [
        c for c in ALL if c["kind"] == "Certificate" and c["spec"]["secretName"] == ca_secret
    ]
    assert ca_certificate["spec"]["isCA"] is True
    assert _issuer_of(ca_certificate)["spec"] == {"selfSigned": {}}


def test_rbac_is_what_the_gate_calls() -> None:
    role, lease_role = find(ALL, "ClusterRole"), find(ALL, "Role")
    assert granted(role) == RULES
    assert granted(lease_role) == LEASE_RULES
    account = find(ALL, "ServiceAccount")["metadata"]
    subject = {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    for kind, bound in (("ClusterRoleBinding", role), ("RoleBinding", lease_role)):
        binding = find(ALL, kind)
        assert binding["subjects"] == [subject]
        ref = {"kind": bound["kind"], "name": bound["metadata"]["name"]}
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", **ref}


def _issuer_of(certificate: Json) -> Json:
    ref = certificate["spec"]["issuerRef"]
    assert (ref.get("group"), ref.get("kind")) == ("cert-manager.io", "Issuer")
    issuer = find(ALL, "Issuer", ref["name"])
    assert issuer["metadata"]["namespace"] == certificate["metadata"]["namespace"]
    return issuer
