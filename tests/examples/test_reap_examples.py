"""``examples/reap-cronjob.yaml`` and ``examples/reap-deployment.yaml``: ``imagecheck reap`` run
by a CronJob (``--once``) and by a Deployment (the loop), checked offline.

* Every object validates against the Kubernetes schemas of ``K8S_VERSION``, strict.
* The container is hardened, its args are accepted by the real ``imagecheck reap``, and the
  CronJob's runs neither retry nor overlap.
* The RBAC is exactly what reap uses and no more: list pods (and watch them, the loop); get
  and patch jobs; create events, bound to the ServiceAccount the pod runs as; the loop's
  leader election: get, create and update leases in its own namespace only (a Role). No
  secrets, no deletes (``--include-pods`` is not in the args).

kubernetes-validate missing: skip locally, fail under CI=true.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from imagecheck.cli._reap import reap
from imagecheck.reference import parse_reference
from tests.examples.checks import HARDENED, by_label, check_job, check_schema, cli_params, granted
from tests.examples.manifests import EXAMPLES, Json, collect, containers, job_spec, pod_spec

FILES = {"reap-cronjob.yaml": "CronJob", "reap-deployment.yaml": "Deployment"}
RULES = {("", "pods"): {"list"}, ("batch", "jobs"): {"get", "patch"}, ("", "events"): {"create"}}
LOOP_RULES = {**RULES, ("", "pods"): {"list", "watch"}}
LEASE_RULES = {("coordination.k8s.io", "leases"): {"get", "create", "update"}}
_, _DOCUMENTS = collect()
DOCUMENTS = [d for d in _DOCUMENTS if d.path.name in FILES]


def _in(name: str) -> list[Json]:
    return [d.body for d in DOCUMENTS if d.path.name == name]


def test_the_files_are_there() -> None:
    assert {d.path.name for d in DOCUMENTS} == set(FILES)
    assert all((EXAMPLES / name).is_file() for name in FILES)


@pytest.mark.parametrize("doc", by_label(DOCUMENTS))
def test_schema_is_valid(doc: Any, validator: ModuleType) -> None:
    check_schema(validator, doc.body)


@pytest.mark.parametrize(("name", "kind"), FILES.items())
def test_the_reaper_container(name: str, kind: str) -> None:
    [workload] = [o for o in _in(name) if o.get("kind") == kind]
    pod = pod_spec(workload)
    assert pod is not None
    [(_, container)] = list(containers(pod))
    assert parse_reference(container["image"]).name == "ghcr.io/imagecheck/imagecheck-cluster"
    for key, value in HARDENED.items():
        assert (container.get("securityContext") or {}).get(key) == value, key
    assert "memory" in container["resources"]["limits"]
    params = cli_params(container["args"], reap)
    assert params["once"] is (kind == "CronJob")
    assert not params["include_pods"] and not params["dry_run"]
    assert params["grace"] >= 120, "at least the default grace"
    if kind == "CronJob":
        spec = job_spec(workload)
        assert spec is not None
        check_job(spec)
        assert workload["spec"]["concurrencyPolicy"] == "Forbid"
    else:
        assert workload["spec"]["replicas"] == 2, "leader election: one acts, one waits"
        assert params["leader_elect"] is not False
        env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
        assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
        port = int(params["metrics_listen"].rpartition(":")[2])
        assert container["ports"] == [{"name": "metrics", "containerPort": port}]
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}


@pytest.mark.parametrize("name", FILES)
def test_rbac_is_what_reap_uses(name: str) -> None:
    objects = _in(name)
    [workload] = [o for o in objects if o.get("kind") == FILES[name]]
    account = (pod_spec(workload) or {}).get("serviceAccountName")
    [sa] = [o for o in objects if o.get("kind") == "ServiceAccount"]
    assert sa["metadata"]["name"] == account
    subject = {"kind": "ServiceAccount", "name": account, "namespace": sa["metadata"]["namespace"]}
    [binding] = [o for o in objects if o.get("kind") == "ClusterRoleBinding"]
    assert subject in binding["subjects"]
    [role] = [o for o in objects if o.get("kind") == "ClusterRole"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert granted(role) == (RULES if FILES[name] == "CronJob" else LOOP_RULES)
    roles = [o for o in objects if o.get("kind") == "Role"]
    if FILES[name] == "CronJob":
        assert roles == [], "--once elects no leader"
        return
    [lease_role] = roles
    [lease_binding] = [o for o in objects if o.get("kind") == "RoleBinding"]
    assert lease_role["metadata"]["namespace"] == workload["metadata"]["namespace"]
    assert lease_binding["roleRef"]["name"] == lease_role["metadata"]["name"]
    assert subject in lease_binding["subjects"]
    assert granted(lease_role) == LEASE_RULES
