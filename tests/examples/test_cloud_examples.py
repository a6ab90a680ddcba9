"""The cloud identity examples (``examples/cloud/``), checked offline for what their comments
promise; test_examples.py already holds them to what every Job example must be (schemas,
fail-fast settings, the hardened initContainer, its args against the main image).

* Each Job's initContainer checks images of exactly the registry hosts its cloud identity
  answers for (``imagecheck.authn.cloud._hosts.cloud_registry``, the code's own gate), with
  ``--cloud-auth auto``.
* Its ServiceAccount is defined beside it and carries what makes the pod that cloud's identity:
  the IRSA role annotation, none for EKS Pod Identity (IRSA would win), the GKE Google service
  account annotation, the AKS client ID annotation with the pod label.
* The IAM policies are IAM policy documents (grammar, no duplicate keys), grant what the
  credentials page says imagecheck needs on the repositories the examples check, and the IRSA
  trust policy names the example's ServiceAccount; every policy a comment names exists.
* The credentials page (docs/credentials.md) and examples/README.md link every file here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from imagecheck.authn.cloud._hosts import Cloud, CloudRegistry, Service, cloud_registry
from imagecheck.reference import parse_reference
from tests.examples.checks import cli_params, dig
from tests.examples.manifests import EXAMPLES, REPO, Json, containers, pod_spec, yaml
from tests.support.tools import skip_or_fail

CLOUD = EXAMPLES / "cloud"
ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::(?P<account>[0-9]{12}):role/[\w+=,.@/-]{1,512}")
GOOGLE_SA = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]"
                       r"\.iam\.gserviceaccount\.com")  # fmt: skip
GUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"


@dataclass(frozen=True)
class Identity:
    """What a cloud example must carry: the annotation on its ServiceAccount (None: must have
    no IRSA annotation) with the shape of its value, and a label on the pod template."""

    cloud: Cloud
    annotation: str | None
    value: re.Pattern[str] | None = None
    pod_label: tuple[str, str] | None = None


EXPECTED = {
    "eks-irsa.yaml": Identity(Cloud.AWS, IRSA_ANNOTATION, ROLE_ARN),
    "eks-pod-identity.yaml": Identity(Cloud.AWS, None),
    "gke-workload-identity.yaml": Identity(
        Cloud.GOOGLE, "iam.gke.io/gcp-service-account", GOOGLE_SA
    ),
    "aks-workload-identity.yaml": Identity(
        Cloud.AZURE,
        "azure.workload.identity/client-id",
        GUID,
        pod_label=("azure.workload.identity/use", "true"),
    ),
}
BY_FILE = pytest.mark.parametrize("name", sorted(EXPECTED))
POLICIES = sorted(CLOUD.glob("*.json"))


def objects(name: str) -> list[Json]:
    if yaml is None:
        skip_or_fail("PyYAML is not installed (it comes with kubernetes-validate)")
    return [d for d in yaml.safe_load_all((CLOUD / name).read_text(encoding="utf-8")) if d]


def one(name: str, kind: str) -> Json:
    (found,) = [o for o in objects(name) if o.get("kind") == kind]
    return found


def init_images(name: str) -> list[CloudRegistry | None]:
    pod = pod_spec(one(name, "Job"))
    assert pod is not None
    (imagecheck,) = [c for kind, c in containers(pod) if kind == "initContainers"]
    params = cli_params(imagecheck["args"])
    assert params["cloud_auth"] == "auto"
    assert params["images"], "no image to check"
    return [cloud_registry(parse_reference(image).registry) for image in params["images"]]


def load_policy(path: Path) -> Json:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> Json:
        keys = [key for key, _ in pairs]
        assert len(keys) == len(set(keys)), f"{path.name}: duplicate key in {keys}"
        return dict(pairs)

    loaded = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=no_duplicates)
    assert isinstance(loaded, dict)
    return loaded


def listed(value: Any) -> list[Any]:
    """IAM's "a string or a list of strings"."""
    return value if isinstance(value, list) else [value]


def iam_match(pattern: str, value: str) -> bool:
    """IAM's ARN wildcards: ``*`` any run of characters (``/`` included), ``?`` one."""
    regex = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
    return re.fullmatch(regex, value) is not None


# --- The Jobs and their ServiceAccounts ------------------------------------------------------


def test_every_cloud_example_is_in_the_table() -> None:
    assert {p.name for p in CLOUD.glob("*.yaml")} == set(EXPECTED)
    assert {identity.cloud for identity in EXPECTED.values()} == set(Cloud)


@BY_FILE
def test_the_images_checked_are_registries_of_its_cloud(name: str) -> None:
    for registry in init_images(name):
        assert registry is not None, "not a registry host a cloud identity answers for"
        assert registry.cloud is EXPECTED[name].cloud


@BY_FILE
def test_the_service_account_carries_the_identity(name: str) -> None:
    expected = EXPECTED[name]
    job = one(name, "Job")
    account = one(name, "ServiceAccount")
    pod = pod_spec(job) or {}
    assert pod.get("serviceAccountName") == account["metadata"]["name"]
    assert dig(account, "metadata", "namespace") == dig(job, "metadata", "namespace")
    annotations = dig(account, "metadata", "annotations") or {}
    if expected.annotation is None:
        assert IRSA_ANNOTATION not in annotations, "IRSA would be used, not Pod Identity"
    else:
        value = annotations.get(expected.annotation)
        assert isinstance(value, str), f"no {expected.annotation} annotation"
        assert expected.value is not None and expected.value.fullmatch(value), value
    if expected.pod_label is not None:
        key, value = expected.pod_label
        labels = dig(job, "spec", "template", "metadata", "labels") or {}
        assert labels.get(key) == value, f"the pod template needs the label {key}: {value!r}"


@BY_FILE
def test_policies_named_in_comments_exist(name: str) -> None:
    text = (CLOUD / name).read_text(encoding="utf-8")
    for named in re.findall(r"file://(\S+)", text):
        assert (REPO / named).is_file(), named


# --- The IAM policies --------------------------------------------------------------------------

STATEMENT_KEYS = {"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction",
                  "Resource", "NotResource", "Condition"}  # fmt: skip
ACTION = re.compile(r"[a-z0-9-]+:[A-Za-z0-9*?]+")


def test_the_policies_are_found() -> None:
    assert {p.name for p in POLICIES} == {
        "ecr-pull-policy.json",
        "eks-irsa-trust-policy.json",
        "eks-pod-identity-trust-policy.json",
    }


@pytest.mark.parametrize("path", POLICIES, ids=[p.name for p in POLICIES])
def test_policy_grammar(path: Path) -> None:
    """The IAM JSON policy grammar's outline: what IAM itself refuses, caught here."""
    policy = load_policy(path)
    assert set(policy) <= {"Version", "Id", "Statement"}
    assert policy["Version"] == "2012-10-17"
    statements = listed(policy["Statement"])
    assert statements
    sids = [s["Sid"] for s in statements if "Sid" in s]
    assert len(sids) == len(set(sids)), "Sids must be unique"
    for statement in statements:
        assert set(statement) <= STATEMENT_KEYS, set(statement) - STATEMENT_KEYS
        assert statement["Effect"] in ("Allow", "Deny")
        assert re.fullmatch(r"[A-Za-z0-9]*", statement.get("Sid", "")), "Sid: letters, digits"
        assert ("Action" in statement) != ("NotAction" in statement)
        for action in listed(statement.get("Action") or statement.get("NotAction")):
            assert ACTION.fullmatch(action), action
        trust = "Principal" in statement or "NotPrincipal" in statement
        # A trust policy names who may assume the role; a permissions policy what it may touch.
        assert trust != ("Resource" in statement or "NotResource" in statement)


def allowed(policy: Json, action: str) -> list[str]:
    """The resources ``policy`` allows ``action`` on (no Deny, no NotAction in these)."""
    return [
        resource
        for s in listed(policy["Statement"])
        if s["Effect"] == "Allow" and any(iam_match(a, action) for a in listed(s["Action"]))
        for resource in listed(s["Resource"])
    ]


def test_the_pull_policy_covers_the_repositories_the_examples_check() -> None:
    policy = load_policy(CLOUD / "ecr-pull-policy.json")
    assert allowed(policy, "ecr:GetAuthorizationToken") == ["*"]  # it takes no resource
    ecr = [r for name in EXPECTED for r in _ecr_repositories(name)]
    assert ecr
    for arn in ecr:
        assert any(iam_match(p, arn) for p in allowed(policy, "ecr:BatchGetImage")), arn


def _ecr_repositories(name: str) -> list[str]:
    """The repository ARNs of the private ECR images an example checks."""
    pod = pod_spec(one(name, "Job")) or {}
    arns = []
    for _, container in containers(pod):
        reference = parse_reference(container["image"])
        registry = cloud_registry(reference.registry)
        if registry is not None and registry.service is Service.ECR:
            arns.append(
                f"arn:{registry.partition}:ecr:{registry.region}:{registry.account}:"
                f"repository/{reference.repository}"
            )
    return arns


def test_the_irsa_trust_policy_names_the_example_service_account() -> None:
    (statement,) = listed(load_policy(CLOUD / "eks-irsa-trust-policy.json")["Statement"])
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    provider = statement["Principal"]["Federated"]
    match = re.fullmatch(r"arn:aws:iam::([0-9]{12}):oidc-provider/(oidc\.eks\.[^/]+/id/\w+)",
                         provider)  # fmt: skip
    assert match is not None, provider
    account = one("eks-irsa.yaml", "ServiceAccount")
    role = ROLE_ARN.fullmatch(account["metadata"]["annotations"][IRSA_ANNOTATION])
    assert role is not None and role["account"] == match[1], "the role and provider's account"
    issuer = match[2]
    namespace, name = account["metadata"]["namespace"], account["metadata"]["name"]
    assert statement["Condition"] == {
        "StringEquals": {
            f"{issuer}:sub": f"system:serviceaccount:{namespace}:{name}",
            f"{issuer}:aud": "sts.amazonaws.com",
        }
    }


def test_the_pod_identity_trust_policy_trusts_eks_pod_identity() -> None:
    (statement,) = listed(load_policy(CLOUD / "eks-pod-identity-trust-policy.json")["Statement"])
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    # TagSession too: the agent tags the session with the cluster, namespace and account.
    assert sorted(listed(statement["Action"])) == ["sts:AssumeRole", "sts:TagSession"]


# --- Where users find them ---------------------------------------------------------------------


# The docs site links a file of the repository by its address on GitHub.
SOURCE = re.compile(r"https://github\.com/imagecheck/imagecheck/(?:blob|tree)/main/")


@pytest.mark.parametrize("page", [REPO / "docs" / "credentials.md", EXAMPLES / "README.md"],
                         ids=["docs/credentials.md", "examples/README.md"])  # fmt: skip
def test_the_docs_link_every_cloud_example(page: Path) -> None:
    links = set(re.findall(r"\]\(([^)#\s]+)\)", page.read_text(encoding="utf-8")))
    linked = {
        (REPO / SOURCE.sub("", link) if SOURCE.match(link) else page.parent / link).resolve()
        for link in links
    }
    for path in sorted(CLOUD.iterdir()):
        assert path.resolve() in linked, f"{page.name} does not link {path.name}"
