"""``examples/kueue/``: the AdmissionCheck and ClusterQueue for ``imagecheck kueue-check``, and
its Deployment, checked offline.

* The Kueue objects validate against the ``v1beta1`` schema of Kueue's own CRDs (stored in
  ``tests/data/kueue``, with their source and license): kubernetes-validate has no schemas
  for custom resources. The core objects validate against the Kubernetes schemas, strict.
* The AdmissionCheck names kueue-check's default controller, and the ClusterQueue uses it.
* The container is hardened and its args are accepted by the real command.
* The RBAC is what kueue-check uses and no more.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

# Installed with check-jsonschema and kubernetes-validate (the dev extra); no stubs.
import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from imagecheck.cli._kueue import kueue_check
from imagecheck.cluster._kueue import CONTROLLER_NAME
from tests.examples.checks import HARDENED, by_label, check_schema, cli_params, granted
from tests.examples.manifests import EXAMPLES, Json, collect, containers, pod_spec

CRDS = Path(__file__).parents[1] / "data" / "kueue"
KUEUE = "kueue.x-k8s.io"
FILES = {"admissioncheck.yaml", "controller.yaml"}
RULES = {
    (KUEUE, "workloads"): {"get", "list", "watch"},
    (KUEUE, "workloads/status"): {"patch"},
    (KUEUE, "admissionchecks"): {"list", "watch"},
    (KUEUE, "admissionchecks/status"): {"patch"},
    ("", "serviceaccounts"): {"get"},
    ("", "secrets"): {"get"},
}
LEASE_RULES = {("coordination.k8s.io", "leases"): {"get", "create", "update"}}
_, _DOCUMENTS = collect()
DOCUMENTS = [d for d in _DOCUMENTS if d.path.parent == EXAMPLES / "kueue"]
CORE = [d for d in DOCUMENTS if not d.body["apiVersion"].startswith(f"{KUEUE}/")]


def _kind(kind: str) -> list[Json]:
    return [d.body for d in DOCUMENTS if d.body.get("kind") == kind]


def _schema(kind: str, version: str) -> Json:
    """The openAPIV3Schema of ``kind`` at ``version`` from Kueue's CRD."""
    crd = yaml.safe_load((CRDS / f"{KUEUE}_{kind.lower()}s.yaml").read_text("utf-8"))
    assert crd["spec"]["names"]["kind"] == kind
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    assert served["served"] is True
    return served["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def test_the_files_are_there() -> None:
    assert {d.path.name for d in DOCUMENTS} == FILES


@pytest.mark.parametrize("kind", ["AdmissionCheck", "ClusterQueue"])
def test_kueue_objects_match_the_crd(kind: str) -> None:
    [body] = _kind(kind)
    group, _, version = body["apiVersion"].partition("/")
    assert group == KUEUE
    validator = jsonschema.Draft7Validator(_schema(kind, version))
    problems = [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(body)]
    assert problems == []
    # Fields the schema does not know are pruned by the API server: none here.
    assert _unknown(body, _schema(kind, version)) == []


def test_the_queue_uses_the_check_of_our_controller() -> None:
    [check] = _kind("AdmissionCheck")
    [queue] = _kind("ClusterQueue")
    assert check["spec"]["controllerName"] == CONTROLLER_NAME
    assert check["metadata"]["name"] in queue["spec"]["admissionChecks"]


@pytest.mark.parametrize("doc", by_label(CORE))
def test_core_schema_is_valid(doc: Any, validator: ModuleType) -> None:
    check_schema(validator, doc.body)


def test_the_controller_container() -> None:
    [deployment] = _kind("Deployment")
    pod = pod_spec(deployment)
    assert pod is not None
    [(_, container)] = list(containers(pod))
    for key, value in HARDENED.items():
        assert (container.get("securityContext") or {}).get(key) == value, key
    params = cli_params(container["args"], kueue_check)
    assert not params["once"] and not params["dry_run"]
    assert deployment["spec"]["replicas"] == 2 and params["leader_elect"] is not False
    port = int(params["metrics_listen"].rpartition(":")[2])
    assert container["ports"] == [{"name": "metrics", "containerPort": port}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}


def test_rbac_is_what_kueue_check_uses() -> None:
    [role] = _kind("ClusterRole")
    [lease_role] = _kind("Role")
    assert granted(role) == RULES
    assert granted(lease_role) == LEASE_RULES
    [deployment] = _kind("Deployment")
    assert lease_role["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    account = (pod_spec(deployment) or {})["serviceAccountName"]
    for binding in _kind("ClusterRoleBinding") + _kind("RoleBinding"):
        assert {"kind": "ServiceAccount", "name": account, "namespace": "kueue-system"} in binding[
            "subjects"
        ]


def _unknown(node: Any, schema: Json, path: str = "") -> list[str]:
    """Paths in ``node`` that ``schema`` has no property for (metadata is the API's own)."""
    if not isinstance(node, dict) or "properties" not in schema:
        if isinstance(node, list) and "items" in schema:
            return [u for item in node for u in _unknown(item, schema["items"], f"{path}[]")]
        return []
    found: list[str] = []
    for key, value in node.items():
        if key == "metadata" and not path:
            continue
        if key not in schema["properties"]:
            found.append(f"{path}.{key}")
        else:
            found += _unknown(value, schema["properties"][key], f"{path}.{key}")
    return found
