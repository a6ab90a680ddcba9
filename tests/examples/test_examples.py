"""The Kubernetes examples (``examples/``) are valid, offline, and do what their comments say.

* Kubernetes objects (standalone files and kustomize bases, multi-document): validated against
  the OpenAPI schemas of Kubernetes ``K8S_VERSION`` with kubernetes-validate, strict (an unknown
  or misspelt field fails); every container image parses with imagecheck's own parser; every
  Job, and every CronJob's Job, has ``backoffLimit: 0`` and ``restartPolicy: Never``.
* The imagecheck initContainer of every standalone workload and kustomize patch: first among
  the initContainers, hardened, args accepted by the real CLI, ``--platform auto``, pull secrets
  mounted from the pod's own ``imagePullSecrets``, and checking exactly the images of the other
  containers -- or ``--from-pod`` with the Downward API env, the RBAC, and the API token in that
  container alone.
* kustomize files, which are not API objects: keys, and the files they name exist; the
  Component's replacement lands on the patch's placeholder argument. Each kustomization is
  built with ``kubectl kustomize`` (kubectl from the test extra) and its output checked like a
  standalone file.

kubernetes-validate (with PyYAML, which it brings) missing: skip locally, fail under CI=true.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from imagecheck.errors import InvalidReferenceError
from imagecheck.reference import parse_reference
from imagecheck.registry import parse_platform
from tests.examples.checks import (
    HARDENED,
    by_label,
    check_job,
    check_schema,
    cli_params,
    dig,
)
from tests.examples.manifests import (
    EXAMPLES,
    Document,
    Json,
    Role,
    collect,
    containers,
    is_kz,
    job_spec,
    pod_spec,
    yaml,
)
from tests.support.tools import skip_or_fail

IMAGECHECK = "imagecheck"  # the initContainer's name, and --self's default
IMAGECHECK_REPOSITORY = "ghcr.io/imagecheck/imagecheck"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
KUSTOMIZE_API = {
    "Kustomization": "kustomize.config.k8s.io/v1beta1",
    "Component": "kustomize.config.k8s.io/v1alpha1",
}
KUSTOMIZE_KEYS = {
    "apiVersion", "kind", "metadata", "resources", "components", "patches", "replacements",
    "images", "namespace", "namePrefix", "nameSuffix", "labels", "commonAnnotations",
    "configMapGenerator", "secretGenerator", "generatorOptions", "replicas",
}  # fmt: skip
REPLACED_ARG = re.compile(r"spec\.template\.spec\.initContainers\.\[name=imagecheck\]\.args\.(\d+)")

FILES, DOCUMENTS = collect()
# Checked by their own tests: the webhook's manifests (cert-manager objects, no initContainer)
# in test_webhook_examples.py, the CI pipelines (not Kubernetes objects) in test_ci_files.py, and
# cluster mode's (imagecheck is the main container, not an initContainer): reap's CronJob and
# Deployment in test_reap_examples.py, audit's CronJob and Deployment in test_cluster_examples.py,
# kueue-check's in test_kueue_examples.py, the gate's in test_gate_examples.py.
OWN_TESTS = (
    EXAMPLES / "webhook",
    EXAMPLES / "github-actions.yml",
    EXAMPLES / "gitlab-ci.yml",
    EXAMPLES / "reap-cronjob.yaml",
    EXAMPLES / "reap-deployment.yaml",
    EXAMPLES / "audit-cronjob.yaml",
    EXAMPLES / "audit-deployment.yaml",
    EXAMPLES / "kueue",
    EXAMPLES / "gate",
)


def _checked_here(path: Path) -> bool:
    return not any(path == own or own in path.parents for own in OWN_TESTS)


FILES = [f for f in FILES if _checked_here(f.path)]
DOCUMENTS = [d for d in DOCUMENTS if _checked_here(d.path)]
API_OBJECTS = [d for d in DOCUMENTS if d.role in (Role.STANDALONE, Role.BASE)]
KUSTOMIZATIONS = [d for d in DOCUMENTS if d.role is Role.KUSTOMIZATION]
JOBS = [d for d in API_OBJECTS if job_spec(d.body) is not None]
# Every workload but a base's carries the imagecheck initContainer (a base gets it from kustomize).
CHECKED = [
    d for d in DOCUMENTS if d.role in (Role.STANDALONE, Role.PATCH) and pod_spec(d.body) is not None
]


# --- Checks, shared by the tests on the files and on kustomize's output -----------------------


def check_images_parse(pod: Json) -> None:
    for kind, container in containers(pod):
        assert isinstance(container.get("image"), str), f"{kind}/{container.get('name')}: no image"
        parse_reference(container["image"])


def check_imagecheck(pod: Json, siblings: list[Json], *, partial: bool = False) -> None:
    """The imagecheck initContainer of ``pod``; ``siblings`` are the objects applied with it.
    ``partial``: a kustomize patch, without the rest of the pod."""
    init = pod.get("initContainers") or []
    assert [c.get("name") for c in init][:1] == [IMAGECHECK], "imagecheck must be the first"
    container = init[0]
    assert parse_reference(container["image"]).name == IMAGECHECK_REPOSITORY
    _check_hardened(container)
    params = cli_params(container.get("args") or [])
    assert params["platform"] == "auto", "--platform auto: the node's own platform"
    parse_platform(params["platform"])
    _check_pull_secrets(pod, container, params, partial=partial)
    if params["from_pod"]:
        _check_from_pod(pod, container, params, siblings)
    elif not partial:
        others = [c["image"] for _, c in containers(pod) if c.get("name") != IMAGECHECK]
        # The whole point: the very strings the kubelet will pull, no more, no fewer.
        assert sorted(set(params["images"])) == sorted(set(others))


def _check_hardened(container: Json) -> None:
    security = container.get("securityContext") or {}
    for key, value in HARDENED.items():
        assert security.get(key) == value, f"securityContext.{key}"
    assert not security.get("privileged")
    resources = container.get("resources") or {}
    assert {"cpu", "memory"} <= set(resources.get("requests") or {})
    assert "memory" in (resources.get("limits") or {})
    assert container.get("terminationMessagePolicy") == "FallbackToLogsOnError"


def _check_pull_secrets(
    pod: Json, container: Json, params: dict[str, Any], *, partial: bool
) -> None:
    """Each --pull-secret is a read-only mount of a secret the kubelet also pulls with."""
    pulled_with = {s.get("name") for s in pod.get("imagePullSecrets") or []}
    volumes = {v.get("name"): v for v in pod.get("volumes") or []}
    for path in params["pull_secrets"]:
        mounts = [
            m
            for m in container.get("volumeMounts") or []
            if path == m.get("mountPath") or path.startswith(f"{m.get('mountPath')}/")
        ]
        assert len(mounts) == 1, f"--pull-secret {path} is not mounted"
        assert mounts[0].get("readOnly") is True
        secret = volumes[mounts[0]["name"]].get("secret") or {}
        assert secret.get("secretName"), f"{path}: not a secret volume"
        if not partial:
            assert secret["secretName"] in pulled_with, f"{path}: not in imagePullSecrets"
    if pulled_with and not partial and not params["use_pod_pull_secrets"]:
        assert params["pull_secrets"], "the pod pulls with a secret: imagecheck needs it too"


def _check_from_pod(
    pod: Json, container: Json, params: dict[str, Any], siblings: list[Json]
) -> None:
    assert params["self_container"] == container["name"]
    env = {e.get("name"): e for e in container.get("env") or []}
    for name, field in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace")):
        assert dig(env.get(name) or {}, "valueFrom", "fieldRef") == {"fieldPath": field}, name
    account = pod.get("serviceAccountName")
    assert account, "--from-pod needs a ServiceAccount of its own"
    rules = _rules_bound_to(account, siblings)
    assert _allows(rules, "pods", None), "the Role must allow get on pods"
    if params["use_pod_pull_secrets"]:
        for secret in pod.get("imagePullSecrets") or []:
            assert _allows(rules, "secrets", secret["name"]), f"get secret {secret['name']}"
    for rule in rules:  # nothing more than that
        assert rule.get("verbs") == ["get"]
        assert rule.get("apiGroups") == [""]
        assert set(rule.get("resources") or []) <= {"pods", "secrets"}
        assert "secrets" not in rule["resources"] or rule.get("resourceNames"), "every secret"
    _check_token_in_imagecheck_only(pod, account, siblings)


def _rules_bound_to(account: str, siblings: list[Json]) -> list[Json]:
    """The rules of the Roles bound to the ServiceAccount, all defined in ``siblings``."""
    accounts = [o for o in siblings if _is(o, "ServiceAccount", account)]
    assert accounts, f"ServiceAccount {account} is not defined alongside"
    namespace = _namespace(accounts[0])
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    roles = {
        b["roleRef"]["name"]
        for b in siblings
        if b.get("kind") == "RoleBinding"
        and _namespace(b) == namespace
        and b["roleRef"].get("kind") == "Role"
        and subject in (b.get("subjects") or [])
    }
    assert roles, f"no RoleBinding binds ServiceAccount {namespace}/{account}"
    return [
        rule
        for role in siblings
        if role.get("kind") == "Role"
        and _namespace(role) == namespace
        and role["metadata"]["name"] in roles
        for rule in role.get("rules") or []
    ]


def _allows(rules: list[Json], resource: str, name: str | None) -> bool:
    return any(
        "get" in r.get("verbs", [])
        and "" in r.get("apiGroups", [])
        and resource in r.get("resources", [])
        and (not r.get("resourceNames") or name in r["resourceNames"])
        for r in rules
    )


def _check_token_in_imagecheck_only(pod: Json, account: str, siblings: list[Json]) -> None:
    """The API token reaches the imagecheck container and no other: automount is off, and the
    service-account directory is a projected token mounted in imagecheck alone."""
    sa = next(o for o in siblings if _is(o, "ServiceAccount", account))
    automount = pod.get("automountServiceAccountToken", sa.get("automountServiceAccountToken"))
    assert automount is False, "automount gives the token to every container"
    holders = [
        (c.get("name"), m["name"])
        for _, c in containers(pod)
        for m in c.get("volumeMounts") or []
        if m.get("mountPath") == SERVICE_ACCOUNT_DIR
    ]
    assert [name for name, _ in holders] == [IMAGECHECK]
    volume = next(v for v in pod.get("volumes") or [] if v.get("name") == holders[0][1])
    sources = (volume.get("projected") or {}).get("sources") or []
    assert any("serviceAccountToken" in s for s in sources), "a projected service-account token"
    assert any(dig(s, "configMap", "name") == "kube-root-ca.crt" for s in sources), "the CA"


def _is(body: Json, kind: str, name: str) -> bool:
    return body.get("kind") == kind and (body.get("metadata") or {}).get("name") == name


def _namespace(body: Json) -> str | None:
    namespace = (body.get("metadata") or {}).get("namespace")
    return None if namespace is None else str(namespace)


# --- Tests --------------------------------------------------------------------------------------


def test_examples_are_found() -> None:
    if yaml is None:
        skip_or_fail("PyYAML is not installed (it comes with kubernetes-validate)")
    files = {f.file for f in FILES}
    assert {"job.yaml", "cronjob.yaml", "job-from-pod.yaml"} <= files
    # Each kind of file is there, so no parametrized test below runs on an empty table.
    assert {d.role for d in DOCUMENTS} == set(Role)


@pytest.mark.parametrize("loaded", [pytest.param(f, id=f.file) for f in FILES])
def test_yaml_is_well_formed(loaded: Any) -> None:
    assert loaded.documents, "no YAML document"
    assert not loaded.problems


@pytest.mark.parametrize("doc", by_label(API_OBJECTS))
def test_schema_is_valid(doc: Document, validator: ModuleType) -> None:
    check_schema(validator, doc.body)


@pytest.mark.parametrize("doc", by_label(JOBS))
def test_job_fails_at_the_first_failure(doc: Document) -> None:
    spec = job_spec(doc.body)
    assert spec is not None
    check_job(spec)


@pytest.mark.parametrize(
    ("doc", "image"),
    [
        pytest.param(d, c.get("image"), id=f"{d.label} {kind}/{c.get('name')}")
        for d in DOCUMENTS
        if d.role is not Role.KUSTOMIZATION
        for kind, c in containers(pod_spec(d.body) or {})
    ],
)
def test_image_is_a_valid_reference(doc: Document, image: Any) -> None:
    assert isinstance(image, str), "no image"
    parse_reference(image)


@pytest.mark.parametrize("doc", by_label(CHECKED))
def test_imagecheck_init_container(doc: Document) -> None:
    pod = pod_spec(doc.body)
    assert pod is not None
    siblings = [d.body for d in DOCUMENTS if d.path == doc.path]
    check_imagecheck(pod, siblings, partial=doc.role is Role.PATCH)


@pytest.mark.parametrize("doc", by_label(KUSTOMIZATIONS))
def test_kustomization(doc: Document) -> None:
    body, here = doc.body, doc.path.parent
    assert body.get("apiVersion") == KUSTOMIZE_API.get(body.get("kind", "")), "apiVersion/kind"
    assert set(body) <= KUSTOMIZE_KEYS, f"unknown keys: {set(body) - KUSTOMIZE_KEYS}"
    assert body.get("resources") or body.get("components") or body.get("patches")
    for resource in body.get("resources") or []:
        target = here / resource
        assert target.is_file() or _kustomization_in(target), f"resource {resource}"
    for component in body.get("components") or []:
        found = _kustomization_in(here / component)
        assert found is not None, f"component {component}"
        assert _load_one(found).get("kind") == "Component", f"{component} is not a Component"
    for patch in body.get("patches") or []:
        assert isinstance(patch.get("patch"), str) or (here / patch["path"]).is_file(), patch
        assert (patch.get("target") or {}).get("kind"), f"patch {patch} has no target kind"
    for replacement in body.get("replacements") or []:
        assert {"kind", "fieldPath"} <= set(replacement["source"]), "replacement source"
        for target in replacement["targets"]:
            assert target["select"].get("kind") and target["fieldPaths"], "replacement target"


@pytest.mark.parametrize("doc", by_label([d for d in KUSTOMIZATIONS if d.body.get("replacements")]))
def test_replacement_fills_the_placeholder(doc: Document) -> None:
    """The Component copies the main image onto the patch's placeholder argument, and the
    placeholder itself is an invalid reference: if the copy ever missed, imagecheck would fail
    (exit 2) rather than check the wrong image."""
    patches = [_load_one(doc.path.parent / p["path"]) for p in doc.body.get("patches") or []]
    args = (((pod_spec(patches[0]) or {}).get("initContainers") or [{}])[0]).get("args") or []
    for replacement in doc.body["replacements"]:
        assert replacement["source"]["fieldPath"] == "spec.template.spec.containers.0.image"
        paths = [p for t in replacement["targets"] for p in t["fieldPaths"]]
        indexes = [int(m.group(1)) for p in paths if (m := REPLACED_ARG.fullmatch(p))]
        assert indexes, f"no target is an imagecheck argument: {paths}"
        for index in indexes:
            assert index < len(args)
            assert cli_params(args)["images"] == (args[index],), "not the only image argument"
            with pytest.raises(InvalidReferenceError):
                parse_reference(args[index])


@pytest.mark.parametrize(
    "doc", by_label([d for d in KUSTOMIZATIONS if d.body.get("kind") == "Kustomization"])
)
def test_kustomize_build(doc: Document, validator: ModuleType, kubectl: str) -> None:
    """What `kubectl apply -k` would send: every check a standalone file gets."""
    built = subprocess.run(
        [kubectl, "kustomize", str(doc.path.parent)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    assert yaml is not None
    objects = [o for o in yaml.safe_load_all(built.stdout) if o]
    assert objects
    for body in objects:
        check_schema(validator, body)
        if (spec := job_spec(body)) is not None:
            check_job(spec)
        if (pod := pod_spec(body)) is not None:
            check_images_parse(pod)
            check_imagecheck(pod, objects)


def _kustomization_in(directory: Path) -> Path | None:
    if not directory.is_dir():
        return None
    return next((p for p in directory.iterdir() if is_kz(p)), None)


def _load_one(path: Path) -> Json:
    assert yaml is not None
    body = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(body, dict), f"{path.relative_to(EXAMPLES)} is not a mapping"
    return body
