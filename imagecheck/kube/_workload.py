"""Where a workload keeps its containers and its pull secrets: the one model that ``scan``,
the admission webhook and ``--from-pod`` share, so that what one finds the others find.

Containers are found by their *shape*, wherever they are in an object, not by a table of
paths per kind (Ray's ``workerGroupSpecs[].template``, JobSet's ``replicatedJobs[].template``,
Kubeflow's ``*ReplicaSpecs.*.template``, Knative, Argo Rollouts... are all pod templates at
paths of their own):

- an item with an ``image`` in a list under :data:`CONTAINER_LISTS` (``containers``,
  ``initContainers``, ``ephemeralContainers``; Tekton ``steps`` and ``sidecars``; Argo
  ``containerSet.containers`` and template ``initContainers``/``sidecars``). A Tekton step
  without ``image`` (``ref:`` to a StepAction) and Argo's ``steps`` (lists of lists of
  template calls) have no such item;
- a mapping with an ``image`` under :data:`CONTAINER_KEYS`: Argo's template ``container`` and
  ``script``, Tekton's ``stepTemplate``, KServe's ``custom.container``, KubeVirt's
  ``containerDisk`` volumes;
- any other mapping whose ``image`` is a string beside a container field
  (:data:`CONTAINER_FIELDS`: ``command``, ``env``, ``resources``...): Tekton's StepAction
  ``spec``, an operator's ``spec`` with its pod's settings;
- an image volume's ``image.reference`` (Kubernetes 1.31+), which the kubelet pulls too;
- and, for the operators whose image field has no container shape at all, a small table by
  API group and kind (:data:`OPERATOR_FIELDS`: Prometheus ``spec.image``, ECK's,
  Spark's, Strimzi's, CloudNativePG's ``spec.imageName``, Crossplane packages, the
  OpenTelemetry operator's collector and auto-instrumentation images).

An object's pull secrets are every ``imagePullSecrets`` list in it (a pod spec's, Tekton's
``podTemplate``, Argo's ``spec``, an operator's ``spec``): what the kubelet gets for the pods
the object makes.

The walk is generic over a :class:`Tree`: the webhook and ``--from-pod`` read parsed JSON
(:data:`JSON`), ``scan`` reads YAML nodes that keep their lines and count what aliases make
it read. It is iterative (no recursion limit) and visits each node once per path to it; the
caller bounds the input (the webhook's body cap and depth pruning, scan's node and alias
budgets). :mod:`imagecheck.kube._workload_json` is the same walk specialised to parsed JSON, for
the webhook's reviews (held to this one's results by a parity test).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

__all__ = [
    "CONTAINER_FIELDS",
    "CONTAINER_KEYS",
    "CONTAINER_LISTS",
    "CORE_GROUPS",
    "JSON",
    "OPERATOR_FIELDS",
    "Slot",
    "Tree",
    "api_group",
    "containers",
    "operator_fields",
    "pull_secrets",
]

N = TypeVar("N")

# Lists whose items are containers when they have an image.
CONTAINER_LISTS = frozenset(
    {"initContainers", "containers", "ephemeralContainers", "sidecars", "steps"}
)
# Keys whose value is one container when it has an image; KubeVirt's containerDisk volume is
# an image the virt-launcher pod runs as a container.
CONTAINER_KEYS = frozenset({"container", "script", "stepTemplate", "containerDisk"})
# Beside a string ``image``, any of these makes a mapping a container (core/v1 Container's
# fields, Tekton's Step's ``script`` and ``computeResources``).
CONTAINER_FIELDS = frozenset(
    {
        "args",
        "command",
        "computeResources",
        "env",
        "envFrom",
        "imagePullPolicy",
        "lifecycle",
        "livenessProbe",
        "ports",
        "readinessProbe",
        "resources",
        "script",
        "securityContext",
        "startupProbe",
        "volumeDevices",
        "volumeMounts",
        "workingDir",
    }
)
# Image fields that are not in a container's shape, by (API group, kind); "*" is any kind of
# the group. Each path is a field name list from the object's root; a list in the path is
# crossed item by item.
OPERATOR_FIELDS: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {
    # prometheus-operator: the server's image and its Thanos sidecar's.
    ("monitoring.coreos.com", "Prometheus"): (("spec", "image"), ("spec", "thanos", "image")),
    ("monitoring.coreos.com", "PrometheusAgent"): (("spec", "image"),),
    ("monitoring.coreos.com", "Alertmanager"): (("spec", "image"),),
    ("monitoring.coreos.com", "ThanosRuler"): (("spec", "image"),),
    # Elastic Cloud on Kubernetes: every stack resource has spec.image.
    ("elasticsearch.k8s.elastic.co", "*"): (("spec", "image"),),
    ("kibana.k8s.elastic.co", "*"): (("spec", "image"),),
    ("apm.k8s.elastic.co", "*"): (("spec", "image"),),
    ("beat.k8s.elastic.co", "*"): (("spec", "image"),),
    ("agent.k8s.elastic.co", "*"): (("spec", "image"),),
    ("enterprisesearch.k8s.elastic.co", "*"): (("spec", "image"),),
    ("logstash.k8s.elastic.co", "*"): (("spec", "image"),),
    ("maps.k8s.elastic.co", "*"): (("spec", "image"),),
    # Kubeflow Spark operator: the application's, its driver's and executors' images.
    ("sparkoperator.k8s.io", "SparkApplication"): (
        ("spec", "image"),
        ("spec", "driver", "image"),
        ("spec", "executor", "image"),
    ),
    ("sparkoperator.k8s.io", "ScheduledSparkApplication"): (
        ("spec", "template", "image"),
        ("spec", "template", "driver", "image"),
        ("spec", "template", "executor", "image"),
    ),
    ("flink.apache.org", "FlinkDeployment"): (("spec", "image"),),
    # Strimzi: each component may override its image.
    ("kafka.strimzi.io", "Kafka"): (
        ("spec", "kafka", "image"),
        ("spec", "zookeeper", "image"),
        ("spec", "cruiseControl", "image"),
        ("spec", "kafkaExporter", "image"),
        ("spec", "entityOperator", "topicOperator", "image"),
        ("spec", "entityOperator", "userOperator", "image"),
    ),
    ("kafka.strimzi.io", "KafkaConnect"): (("spec", "image"),),
    ("kafka.strimzi.io", "KafkaMirrorMaker2"): (("spec", "image"),),
    ("kafka.strimzi.io", "KafkaBridge"): (("spec", "image"),),
    # CloudNativePG: the cluster's operand image, and a catalog's images by major version.
    ("postgresql.cnpg.io", "Cluster"): (("spec", "imageName"),),
    ("postgresql.cnpg.io", "ImageCatalog"): (("spec", "images", "image"),),
    ("postgresql.cnpg.io", "ClusterImageCatalog"): (("spec", "images", "image"),),
    ("k8s.mariadb.com", "MariaDB"): (("spec", "image"),),
    # OpenTelemetry operator: the collector's (and its target allocator's) image, and the
    # auto-instrumentation images it injects into pods as init containers.
    ("opentelemetry.io", "OpenTelemetryCollector"): (
        ("spec", "image"),
        ("spec", "targetAllocator", "image"),
    ),
    ("opentelemetry.io", "OpAMPBridge"): (("spec", "image"),),
    ("opentelemetry.io", "TargetAllocator"): (("spec", "image"),),
    ("opentelemetry.io", "Instrumentation"): tuple(
        ("spec", language, "image")
        for language in ("java", "nodejs", "python", "dotnet", "go", "apacheHttpd", "nginx")
    ),
    # Crossplane packages are OCI images the package manager pulls.
    ("pkg.crossplane.io", "Provider"): (("spec", "package"),),
    ("pkg.crossplane.io", "Function"): (("spec", "package"),),
    ("pkg.crossplane.io", "Configuration"): (("spec", "package"),),
}
# API groups whose objects Kubernetes itself runs: their image fields are never templates.
CORE_GROUPS = frozenset({"", "apps", "batch", "extensions"})


class Tree(Protocol[N]):
    """Read-only access to one kind of parsed document."""

    def get(self, node: N, key: str) -> N | None:
        """``node[key]`` when ``node`` is a mapping that has it, else None."""

    def pairs(self, node: N) -> Iterator[tuple[str | None, N]]:
        """A mapping's entries (the key's text, None for a key that is not a string); a
        non-mapping has none."""

    def items(self, node: N) -> Iterator[N]:
        """A sequence's items; a non-sequence has none."""

    def text(self, node: N | None) -> str | None:
        """A string scalar's text; None for anything else (null included)."""

    def is_mapping(self, node: N) -> bool: ...

    def identity(self, node: N) -> Hashable:
        """Equal for two reads of one mapping by one path (an alias is another path)."""

    def node(self, node: N) -> int:
        """Equal for every read of one mapping or sequence, whatever the path."""


@dataclass(frozen=True, slots=True)
class Slot(Generic[N]):
    """One container (or operator image field) and the node of its ``image`` value.

    ``container`` names it for people: the container's or step's ``name``, else the Argo
    template's name, else the field (``stepTemplate``, ``spec.image``). ``field`` is where it
    was found: the list or key (``containers``, ``steps``, ``script``...) or the path.
    """

    image: N
    container: str | None
    field: str


def containers(tree: Tree[N], obj: N) -> Iterator[Slot[N]]:
    """Every container in the object ``obj``, in document order, then its operator fields
    (:data:`OPERATOR_FIELDS`) that are not in a container's shape. A ``List``'s items are
    objects of their own: the caller walks them one by one."""
    operator = {tree.identity(holder): slot for holder, slot in operator_fields(tree, obj)}
    for holder, slot in _shaped(tree, obj):
        # A field of the table that also looks like a container is named as the table has it.
        yield operator.pop(tree.identity(holder), slot)
    yield from operator.values()


def pull_secrets(tree: Tree[N], obj: N) -> list[str]:
    """The names in every ``imagePullSecrets`` list in ``obj``, in order, each once."""
    names: dict[str, None] = {}
    stack = [obj]
    while stack:
        node = stack.pop()
        for key, value in reversed(list(tree.pairs(node))):
            if key == "imagePullSecrets":
                for item in tree.items(value):
                    name = tree.text(tree.get(item, "name"))
                    if name:
                        names[name] = None
            else:
                stack.append(value)
        stack.extend(reversed(list(tree.items(node))))
    return list(names)


def api_group(api_version: str | None) -> str:
    """``apps`` for ``apps/v1``, ``""`` (core) for ``v1``."""
    if not api_version or "/" not in api_version:
        return ""
    return api_version.split("/", 1)[0]


def _shaped(tree: Tree[N], obj: N) -> Iterator[tuple[N, Slot[N]]]:
    # Depth first, in document order: (node, the key it is under, the name of the nearest
    # mapping around it that has one, whether it is an item of a container list), or the
    # node() of a collection whose walk ends there. A collection that contains itself
    # (YAML: `spec: &s {template: {spec: *s}}`) is not entered again inside itself.
    stack: list[tuple[N, str | None, str | None, bool] | int] = [(obj, None, None, False)]
    walking: set[int] = set()
    while stack:
        top = stack.pop()
        if isinstance(top, int):
            walking.discard(top)
            continue
        node, key, owner, listed = top
        if tree.is_mapping(node):
            slot = _container(tree, node, key, owner, listed=listed)
            if slot is not None:
                yield node, slot
                continue
            name = tree.text(tree.get(node, "name")) or owner
            children = [(value, k, name, False) for k, value in tree.pairs(node)]
        else:
            in_list = key in CONTAINER_LISTS
            children = [(item, key, owner, in_list) for item in tree.items(node)]
        if children and tree.node(node) not in walking:
            walking.add(tree.node(node))
            stack.append(tree.node(node))
            stack.extend(reversed(children))


def _container(
    tree: Tree[N], node: N, key: str | None, owner: str | None, *, listed: bool
) -> Slot[N] | None:
    """The container (or image volume) that the mapping ``node`` under ``key`` is, if any."""
    image = tree.get(node, "image")
    name = tree.text(tree.get(node, "name"))
    field = key or ""
    if image is not None and listed:
        return Slot(image, name, field)
    if image is not None and key in CONTAINER_KEYS:
        return Slot(image, name or owner or key, field)
    if image is not None and tree.text(image) is not None and _container_like(tree, node):
        return Slot(image, name or key, field)
    reference = tree.get(node, "reference")
    if key == "image" and reference is not None and tree.text(reference) is not None:
        # An image volume (Kubernetes 1.31+): the kubelet pulls it like a container's.
        return Slot(reference, owner, "volumes.image")
    return None


def _container_like(tree: Tree[N], node: N) -> bool:
    return any(key in CONTAINER_FIELDS for key, _ in tree.pairs(node))


def operator_fields(tree: Tree[N], obj: N) -> Iterator[tuple[N, Slot[N]]]:
    """The image fields of :data:`OPERATOR_FIELDS` in ``obj``: (the mapping that holds it,
    its slot)."""
    group = api_group(tree.text(tree.get(obj, "apiVersion")))
    kind = tree.text(tree.get(obj, "kind")) or ""
    paths = OPERATOR_FIELDS.get((group, kind)) or OPERATOR_FIELDS.get((group, "*"), ())
    for path in paths:
        field = ".".join(path)
        for holder in _holders(tree, obj, path[:-1]):
            image = tree.get(holder, path[-1])
            if image is not None and tree.text(image) is not None:
                yield holder, Slot(image, field, field)


def _holders(tree: Tree[N], node: N, path: tuple[str, ...]) -> Iterator[N]:
    """The mappings at ``path`` from ``node``; a list on the way is crossed item by item."""
    nodes = [node]
    for key in path:
        found: list[N] = []
        for current in nodes:
            value = tree.get(current, key)
            if value is not None:
                found.extend(list(tree.items(value)) or [value])
        nodes = found
    yield from (holder for holder in nodes if tree.is_mapping(holder))


class _JSONTree:
    """:class:`Tree` over ``json.loads`` values."""

    def get(self, node: Any, key: str) -> Any:
        return node.get(key) if isinstance(node, dict) else None

    def pairs(self, node: Any) -> Iterator[tuple[str | None, Any]]:
        if isinstance(node, dict):
            yield from ((k if isinstance(k, str) else None, v) for k, v in node.items())

    def items(self, node: Any) -> Iterator[Any]:
        if isinstance(node, list):
            yield from node

    def text(self, node: Any) -> str | None:
        return node if isinstance(node, str) else None

    def is_mapping(self, node: Any) -> bool:
        return isinstance(node, dict)

    def identity(self, node: Any) -> Hashable:
        return id(node)

    def node(self, node: Any) -> int:
        return id(node)


JSON: Tree[Any] = _JSONTree()
"""The :class:`Tree` of parsed JSON (an AdmissionReview's object, a pod from the API)."""
