"""``examples/webhook/``: ``imagecheck serve`` as a validating admission webhook, checked offline.

* Every Kubernetes object validates against the Kubernetes schemas of ``K8S_VERSION`` (1.30),
  strict (kubernetes-validate). cert-manager's Issuer and Certificate are CRDs, which
  kubernetes-validate has no schemas for: they are validated against the part of
  cert-manager.io/v1's CRD schema that the example uses, strict too (an unknown or misspelt
  field fails), and skipped by the core schema test on purpose.
* The pieces fit together, as the API server, the kubelet and cert-manager will join them: the
  Deployment's args are accepted by the real ``imagecheck serve``; its probes, Service, PDB and
  mounts point at what exists; the ValidatingWebhookConfiguration calls that Service, answers
  within its timeout, exempts the webhook's own namespace, and has its CA injected from the
  Certificate that issues the serving certificate the pods mount.
* Built with ``kubectl kustomize`` (kubectl from the test extra), the kustomization yields
  exactly those objects.

kubernetes-validate (with PyYAML and jsonschema, which it brings) missing: skip locally, fail
under CI=true.
"""

from __future__ import annotations

import subprocess
from types import ModuleType
from typing import Any

import click
import pytest

from imagecheck.cli import cli
from imagecheck.reference import parse_reference

# One place for the Kubernetes version, the container hardening and the skip-or-fail rule.
from tests.examples.checks import HARDENED, by_label, check_schema
from tests.examples.manifests import (
    EXAMPLES,
    Document,
    Json,
    Role,
    collect,
    containers,
    pod_spec,
    yaml,
)
from tests.examples.webhookparts import (
    CERT_MANAGER,
    INJECT_CA_FROM,
    check_cert_manager,
    container_port,
    find,
    go_duration_hours,
    listen_port,
    meta,
    mount_of,
    secret_volume,
    selects,
)
from tests.support.tools import skip_or_fail

WEBHOOK = EXAMPLES / "webhook"
WEBHOOK_FILES = {
    "namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "deployment.yaml",
    "podDisruptionBudget.yaml", "service.yaml", "certificate.yaml",
    "validatingwebhookconfiguration.yaml", "kustomization.yaml",
}  # fmt: skip
OPTIONAL_FILES = {"rbac.yaml"}  # left out of kustomization.yaml: off by default
IMAGE_REPOSITORY = "ghcr.io/imagecheck/imagecheck-webhook"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
MAX_TIMEOUT_SECONDS = 10
# What the webhook must be sent: each workload kind whose pod spec review.py reads, by group.
WORKLOAD_RESOURCES = {
    "": {"pods"},
    "batch": {"jobs", "cronjobs"},
    "apps": {"deployments", "statefulsets", "daemonsets", "replicasets"},
}

_FILES, _DOCUMENTS = collect()
FILES = [f for f in _FILES if WEBHOOK in f.path.parents]
DOCUMENTS = [d for d in _DOCUMENTS if WEBHOOK in d.path.parents]
API_OBJECTS = [d for d in DOCUMENTS if d.role is not Role.KUSTOMIZATION]
CORE_OBJECTS = [d for d in API_OBJECTS if d.body.get("apiVersion") != CERT_MANAGER]
CERT_MANAGER_OBJECTS = [d for d in API_OBJECTS if d.body.get("apiVersion") == CERT_MANAGER]


@pytest.fixture(scope="module")
def applied() -> list[Json]:
    """What ``kubectl apply -k examples/webhook`` applies: the kustomization's resources."""
    if yaml is None:
        skip_or_fail("PyYAML is not installed (it comes with kubernetes-validate)")
    return [d.body for d in DOCUMENTS if d.role is Role.BASE]


@pytest.fixture(scope="module")
def deployment(applied: list[Json]) -> Json:
    return find(applied, "Deployment")


@pytest.fixture(scope="module")
def pod(deployment: Json) -> Json:
    spec = pod_spec(deployment)
    assert spec is not None
    return spec


@pytest.fixture(scope="module")
def container(pod: Json) -> Json:
    found = [c for _, c in containers(pod)]
    assert len(found) == 1, "one container: the webhook"
    return found[0]


@pytest.fixture(scope="module")
def params(container: Json) -> dict[str, Any]:
    return serve_params(container.get("args") or [])


@pytest.fixture(scope="module")
def webhook(applied: list[Json]) -> Json:
    hooks = find(applied, "ValidatingWebhookConfiguration").get("webhooks") or []
    assert len(hooks) == 1
    hook: Json = hooks[0]
    return hook


# --- Helpers ---------------------------------------------------------------------------------


def serve_params(args: list[str]) -> dict[str, Any]:
    """What the real ``imagecheck serve`` makes of the args (the ENTRYPOINT is ``imagecheck``)."""
    assert args[:1] == ["serve"], "args start with the subcommand"
    command = cli.commands["serve"]
    try:
        with command.make_context("serve", list(args[1:])) as ctx:
            return dict(ctx.params)
    except click.ClickException as exc:
        pytest.fail(f"imagecheck rejects {args}: {exc.format_message()}", pytrace=False)


# --- Tests: files and schemas -----------------------------------------------------------------


def test_files_are_found() -> None:
    if yaml is None:
        skip_or_fail("PyYAML is not installed (it comes with kubernetes-validate)")
    assert {f.path.name for f in FILES} == WEBHOOK_FILES
    kustomization = next(d.body for d in DOCUMENTS if d.role is Role.KUSTOMIZATION)
    listed = set(kustomization.get("resources") or [])
    # Everything is applied by `kubectl apply -k`, except the optional RBAC.
    assert listed == WEBHOOK_FILES - OPTIONAL_FILES - {"kustomization.yaml"}
    assert {d.path.name for d in DOCUMENTS if d.role is Role.STANDALONE} == OPTIONAL_FILES


@pytest.mark.parametrize("loaded", [pytest.param(f, id=f.file) for f in FILES])
def test_yaml_is_well_formed(loaded: Any) -> None:
    assert loaded.documents, "no YAML document"
    assert not loaded.problems


@pytest.mark.parametrize("doc", by_label(CORE_OBJECTS))
def test_schema_is_valid(doc: Document, validator: ModuleType) -> None:
    check_schema(validator, doc.body)


# Not in test_schema_is_valid: kubernetes-validate has only the core schemas, and would answer
# "schema not found" for cert-manager's CRDs. check_cert_manager is their schema check.
@pytest.mark.parametrize("doc", by_label(CERT_MANAGER_OBJECTS))
def test_cert_manager_object(doc: Document) -> None:
    check_cert_manager(doc.body)


def test_kustomize_build(applied: list[Json], validator: ModuleType, kubectl: str) -> None:
    """What `kubectl apply -k` sends: the same objects, each valid."""
    built = subprocess.run(
        [kubectl, "kustomize", str(WEBHOOK)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    assert yaml is not None
    objects = [o for o in yaml.safe_load_all(built.stdout) if o]
    # Last, as the comment in validatingwebhookconfiguration.yaml says: never pointing at a
    # Service that does not exist yet.
    assert objects[-1]["kind"] == "ValidatingWebhookConfiguration"

    def names(found: list[Json]) -> list[tuple[str, str]]:
        return sorted((str(o["kind"]), str(meta(o)["name"])) for o in found)

    assert names(objects) == names(applied)
    for body in objects:
        if body["apiVersion"] == CERT_MANAGER:
            check_cert_manager(body)
        else:
            check_schema(validator, body)


def test_one_namespace(applied: list[Json]) -> None:
    """Every namespaced object is in the webhook's namespace; kustomize sets none of them."""
    namespace = meta(find(applied, "Namespace"))["name"]
    cluster_scoped = {"Namespace", "ValidatingWebhookConfiguration"}
    for body in applied:
        expected = None if body["kind"] in cluster_scoped else namespace
        assert meta(body).get("namespace") == expected, f"{body['kind']}/{meta(body)['name']}"


# --- Tests: the Deployment --------------------------------------------------------------------


def test_image(container: Json) -> None:
    ref = parse_reference(container["image"])
    assert f"{ref.registry}/{ref.repository}" == IMAGE_REPOSITORY
    assert ref.tag not in (None, "latest") or ref.digest, "pin the webhook's image"


def test_two_replicas_on_two_nodes(deployment: Json, pod: Json) -> None:
    assert deployment["spec"]["replicas"] == 2
    rollout = deployment["spec"].get("strategy", {}).get("rollingUpdate") or {}
    assert rollout.get("maxUnavailable") == 0, "never fewer than two serving during a rollout"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    spread = [
        c
        for c in pod.get("topologySpreadConstraints") or []
        if c["topologyKey"] == "kubernetes.io/hostname"
        and c["whenUnsatisfiable"] == "DoNotSchedule"
        and c["maxSkew"] == 1
        and selects(c["labelSelector"], labels)
    ]
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    anti_affinity = [
        term
        for term in _dig(pod, "affinity", "podAntiAffinity", required) or []
        if term["topologyKey"] == "kubernetes.io/hostname"
        and selects(term["labelSelector"], labels)
    ]
    assert spread or anti_affinity, "the replicas must be kept on different nodes"


def test_probes(container: Json, params: dict[str, Any]) -> None:
    """Readiness on /readyz and liveness on /healthz, over HTTPS on the port serve listens on."""
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = (container.get(probe) or {}).get("httpGet") or {}
        assert get.get("path") == path, probe
        assert get.get("scheme") == "HTTPS", f"{probe}: serve only speaks TLS"
        assert container_port(container, get["port"]) == listen_port(params), probe


def test_hardened(container: Json, pod: Json) -> None:
    security = container.get("securityContext") or {}
    for key, value in HARDENED.items():
        assert security.get(key) == value, f"securityContext.{key}"
    assert not security.get("privileged")
    assert not pod.get("hostNetwork")
    resources = container.get("resources") or {}
    assert {"cpu", "memory"} <= set(resources.get("requests") or {})
    assert "memory" in (resources.get("limits") or {})


def test_args_are_accepted_by_the_cli(container: Json) -> None:
    serve_params(container.get("args") or [])


def test_serve_args(container: Json, params: dict[str, Any]) -> None:
    """What the real CLI makes of the args is what the comments say."""
    assert params["mode"] == "deny"
    assert params["on_error"] == "pass"
    assert params["tls_cert"] is not None
    assert params["tls_key"] is not None
    assert not params["insecure_http"], "the API server only calls webhooks over HTTPS"
    assert listen_port(params) == container_port(container, "https")


def test_graceful_stop(pod: Json, container: Json, params: dict[str, Any]) -> None:
    """preStop keeps serving while the endpoint goes away; then the reviews in flight finish."""
    sleep = _dig(container, "lifecycle", "preStop", "sleep", "seconds") or 0
    grace = pod.get("terminationGracePeriodSeconds", 30)
    assert sleep + params["review_deadline"] < grace


def test_tls_is_the_certificate_secret(
    applied: list[Json], pod: Json, container: Json, params: dict[str, Any]
) -> None:
    """--tls-cert and --tls-key come from the secret of the Certificate whose CA is injected,
    mounted whole: the kubelet never updates a subPath mount, and serve reloads only files that
    change."""
    certificate = _injected_certificate(applied, find(applied, "ValidatingWebhookConfiguration"))
    for option in ("tls_cert", "tls_key"):
        mount = mount_of(container, str(params[option]))
        assert "subPath" not in mount, f"--{option.replace('_', '-')}: no subPath"
        assert mount.get("readOnly") is True
        assert secret_volume(pod, mount) == certificate["spec"]["secretName"]


def test_pull_secret_is_mounted(pod: Json, container: Json, params: dict[str, Any]) -> None:
    assert params["pull_secrets"], "the Deployment's comments promise a pull secret"
    for path in params["pull_secrets"]:
        mount = mount_of(container, path)
        assert mount.get("readOnly") is True
        assert secret_volume(pod, mount)


def test_no_api_access_by_default(applied: list[Json], pod: Json) -> None:
    """serve never calls the Kubernetes API: no token in the pod, no RBAC applied."""
    account = find(applied, "ServiceAccount", pod["serviceAccountName"])
    assert account.get("automountServiceAccountToken") is False
    assert pod.get("automountServiceAccountToken") is False
    rbac = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
    assert not [o for o in applied if o["kind"] in rbac]


def test_optional_rbac_is_minimal(applied: list[Json], pod: Json) -> None:
    """rbac.yaml: get on named secrets only (and on serviceaccounts, whose imagePullSecrets
    name the secrets a template's pods get), bound per namespace to the webhook's account."""
    optional = [d.body for d in DOCUMENTS if d.role is Role.STANDALONE]
    role = find(optional, "ClusterRole")
    accounts = {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get"]}
    assert accounts in role["rules"]
    for rule in role["rules"]:
        if rule == accounts:
            continue
        assert rule == {
            "apiGroups": [""],
            "resources": ["secrets"],
            "verbs": ["get"],
            "resourceNames": rule.get("resourceNames"),
        }
        assert rule["resourceNames"], "without resourceNames: every secret of the namespace"
    binding = find(optional, "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": meta(role)["name"],
    }
    account = find(applied, "ServiceAccount", pod["serviceAccountName"])
    subject = {"kind": "ServiceAccount", **{k: meta(account)[k] for k in ("name", "namespace")}}
    assert binding["subjects"] == [subject]
    assert not [o for o in optional if o["kind"] == "ClusterRoleBinding"], "per namespace"


# --- Tests: Service, PDB ------------------------------------------------------------------------


def test_service_targets_the_container_port(
    applied: list[Json], deployment: Json, container: Json, params: dict[str, Any]
) -> None:
    service = find(applied, "Service")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selects({"matchLabels": service["spec"]["selector"]}, labels)
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443
    assert container_port(container, port["targetPort"]) == listen_port(params)


def test_pdb_selects_the_pods(applied: list[Json], deployment: Json) -> None:
    pdb = find(applied, "PodDisruptionBudget")
    selector = pdb["spec"]["selector"]
    assert selector, "an empty selector would cover every pod in the namespace"
    assert selects(selector, deployment["spec"]["template"]["metadata"]["labels"])
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"], "drains must progress"


# --- Tests: the ValidatingWebhookConfiguration --------------------------------------------------


def test_webhook_answers_within_its_timeout(webhook: Json, params: dict[str, Any]) -> None:
    """serve's --review-deadline ends each review before the API server gives up on it."""
    timeout = webhook["timeoutSeconds"]
    assert params["review_deadline"] < timeout <= MAX_TIMEOUT_SECONDS


def test_webhook_settings(webhook: Json) -> None:
    assert webhook["sideEffects"] == "None"
    assert webhook["admissionReviewVersions"] == ["v1"]  # the only version serve answers
    assert webhook["matchPolicy"] == "Equivalent"
    assert webhook["failurePolicy"] == "Ignore"


def test_webhook_rules(webhook: Json) -> None:
    """CREATE and UPDATE of every workload kind, and nothing the webhook cannot read."""
    matched: dict[str, set[str]] = {}
    for rule in webhook["rules"]:
        assert sorted(rule["operations"]) == ["CREATE", "UPDATE"]
        assert rule["apiVersions"] == ["v1"]
        for group in rule["apiGroups"]:
            matched.setdefault(group, set()).update(rule["resources"])
    assert matched == WORKLOAD_RESOURCES


def test_webhook_calls_the_service(applied: list[Json], webhook: Json) -> None:
    service = find(applied, "Service")
    target = webhook["clientConfig"]["service"]
    assert "url" not in webhook["clientConfig"]
    assert (target["name"], target["namespace"]) == (
        meta(service)["name"],
        meta(service)["namespace"],
    )
    assert target.get("port", 443) in [p["port"] for p in service["spec"]["ports"]]
    assert target["path"] == "/validate"  # the route in imagecheck/webhook/_server.py
    assert "caBundle" not in webhook["clientConfig"], "cainjector owns it"


@pytest.mark.parametrize("which", ["kube-system", "own"])
def test_namespace_is_exempt(applied: list[Json], webhook: Json, which: str) -> None:
    """kube-system, and the webhook's own namespace: its rollouts never wait on itself."""
    namespace = which if which != "own" else meta(find(applied, "Namespace"))["name"]
    assert not selects(webhook["namespaceSelector"], {NAMESPACE_NAME_LABEL: namespace})


def test_other_namespaces_are_reviewed(webhook: Json) -> None:
    assert selects(webhook["namespaceSelector"], {NAMESPACE_NAME_LABEL: "default"})
    assert selects(webhook["namespaceSelector"], {NAMESPACE_NAME_LABEL: "team-a"})


def test_object_selector_opts_out(webhook: Json) -> None:
    """Unlabelled objects are reviewed; the opt-out label (as the comment names it) skips one."""
    selector = webhook["objectSelector"]
    assert selects(selector, {})
    (expression,) = selector["matchExpressions"]
    assert expression["operator"] == "NotIn"
    assert not selects(selector, {expression["key"]: "true"})


def test_ca_is_injected_from_the_serving_certificate(applied: list[Json], webhook: Json) -> None:
    """The annotation names the Certificate for the Service's DNS name, issued by a CA Issuer
    whose CA is an isCA Certificate from a self-signed Issuer: the cert-manager bootstrap."""
    configuration = find(applied, "ValidatingWebhookConfiguration")
    certificate = _injected_certificate(applied, configuration)
    service = webhook["clientConfig"]["service"]
    assert f"{service['name']}.{service['namespace']}.svc" in certificate["spec"]["dnsNames"]
    assert "server auth" in certificate["spec"].get("usages", ["server auth"])
    assert go_duration_hours(certificate["spec"]["renewBefore"]) < go_duration_hours(
        certificate["spec"]["duration"]
    )
    ca_issuer = _issuer_of(applied, certificate)
    ca_certificate = next(
        c
        for c in applied
        if c["kind"] == "Certificate"
        and c["spec"]["secretName"] == ca_issuer["spec"]["ca"]["secretName"]
    )
    assert ca_certificate["spec"]["isCA"] is True
    assert _issuer_of(applied, ca_certificate)["spec"] == {"selfSigned": {}}


def _injected_certificate(applied: list[Json], configuration: Json) -> Json:
    namespace, _, name = meta(configuration)["annotations"][INJECT_CA_FROM].partition("/")
    certificate = find(applied, "Certificate", name)
    assert meta(certificate)["namespace"] == namespace
    return certificate


def _issuer_of(applied: list[Json], certificate: Json) -> Json:
    ref = certificate["spec"]["issuerRef"]
    assert ref.get("kind", "Issuer") == "Issuer"
    assert ref.get("group", "cert-manager.io") == "cert-manager.io"
    issuer = find(applied, "Issuer", ref["name"])
    assert meta(issuer)["namespace"] == meta(certificate)["namespace"], "an Issuer is namespaced"
    return issuer


def _dig(node: Any, *keys: str) -> Any:
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node
