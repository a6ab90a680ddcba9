"""What cluster mode reads and writes, and the interface it goes through.

Objects are the API's JSON (``workload.JSON``): the same walk (``workload.containers``,
``workload.pull_secrets``) reads a Pod, a Job's template or a CronJob, whoever fetched them.
Every command is written against :class:`Cluster`; ``api.py`` implements it over the
Kubernetes API, and the tests implement it in memory or point ``api.py`` at an API stand-in.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from imagecheck.errors import ImagecheckError

JSON = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """A resource type as the API names it."""

    api_version: str  # "v1", "batch/v1", "coordination.k8s.io/v1"
    kind: str  # "Pod"
    plural: str  # "pods": the path segment, and the RBAC resource
    namespaced: bool = True

    @property
    def group(self) -> str:
        """The API group ("" for the core group), as RBAC rules name it."""
        return self.api_version.rpartition("/")[0]


POD = Kind("v1", "Pod", "pods")
# The gate the webhook adds and the gate controller removes (the pod scheduling readiness
# API: https://kubernetes.io/docs/concepts/scheduling-eviction/pod-scheduling-readiness/).
GATE = "imagecheck.io/images"
JOB = Kind("batch/v1", "Job", "jobs")
CRONJOB = Kind("batch/v1", "CronJob", "cronjobs")
EVENT = Kind("v1", "Event", "events")
LEASE = Kind("coordination.k8s.io/v1", "Lease", "leases")
SECRET = Kind("v1", "Secret", "secrets")
SERVICEACCOUNT = Kind("v1", "ServiceAccount", "serviceaccounts")
# The workload kinds audit lists by default (built in; a custom resource can be named).
DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments")
STATEFULSET = Kind("apps/v1", "StatefulSet", "statefulsets")
DAEMONSET = Kind("apps/v1", "DaemonSet", "daemonsets")
REPLICASET = Kind("apps/v1", "ReplicaSet", "replicasets")
# Kueue's (kueue.x-k8s.io): the kinds `kueue-check` reads, and writes the status of.
WORKLOAD = Kind("kueue.x-k8s.io/v1beta1", "Workload", "workloads")
ADMISSION_CHECK = Kind("kueue.x-k8s.io/v1beta1", "AdmissionCheck", "admissionchecks", False)


@dataclass(frozen=True)
class Selector:
    """Which objects: a namespace (None: all) and a label selector (None: any)."""

    namespace: str | None = None
    labels: str | None = None


class Listing(Protocol):
    """One list, read page by page: ``async for obj in listing``. Once the objects are read,
    ``resource_version`` is the version the list was served at (every page of one list is
    of one snapshot): a watch from it misses no change made since."""

    def __aiter__(self) -> AsyncIterator[JSON]: ...

    @property
    def resource_version(self) -> str:
        """The list's ``metadata.resourceVersion``; "" until the first page is read."""
        ...


class Cluster(Protocol):
    """The Kubernetes API as cluster mode uses it. Objects in and out are the API's JSON.

    Errors are :class:`ClusterError` subclasses, never a library's own exceptions.
    """

    def list(self, kind: Kind, selector: Selector = ...) -> AsyncIterator[JSON]:
        """Every object of ``kind`` that ``selector`` picks, fetched page by page (bounded
        memory however large the cluster)."""
        ...

    def snapshot(self, kind: Kind, selector: Selector = ...) -> Listing:
        """As :meth:`list`, and the list's resourceVersion, to start a :meth:`watch` from."""
        ...

    async def get(self, kind: Kind, namespace: str, name: str) -> JSON | None:
        """One object, or None when it does not exist."""
        ...

    async def patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        status: bool = False,
    ) -> JSON:
        """A JSON merge patch (RFC 7386); with ``metadata.resourceVersion`` in ``patch`` the
        API refuses it (:class:`Conflict`) when the object changed since it was read. With
        ``status``, to the status subresource (``.../NAME/status``): only the status changes.
        A cluster-scoped kind's ``namespace`` is ""."""
        ...

    async def json_patch(
        self, kind: Kind, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]
    ) -> JSON:
        """A JSON patch (RFC 6902): its ``test`` ops make it conditional on exactly the
        fields they name. A failed ``test`` (the API's 422) is :class:`Conflict`: read the
        object again and decide again."""
        ...

    async def create(self, kind: Kind, namespace: str, body: Mapping[str, Any]) -> JSON:
        """Create an object (an Event, a Lease); :class:`AlreadyExists` when its name is
        taken."""
        ...

    async def replace(self, kind: Kind, namespace: str, name: str, body: Mapping[str, Any]) -> JSON:
        """PUT the whole object (a Lease renewal): :class:`Conflict` on a stale
        ``metadata.resourceVersion``."""
        ...

    async def delete(self, kind: Kind, namespace: str, name: str) -> None:
        """Delete an object; one that is gone already is not an error."""
        ...

    async def close(self) -> None:
        """Let go of the connections; the object is not used again."""
        ...

    def watch(
        self, kind: Kind, selector: Selector, resource_version: str
    ) -> AsyncIterator[tuple[str, JSON]]:
        """Changes since ``resource_version`` as ("ADDED" | "MODIFIED" | "DELETED", object);
        :class:`Gone` when that version is too old (list again, then watch from there)."""
        ...


class ClusterError(ImagecheckError):
    """The Kubernetes API could not do what was asked."""


class Forbidden(ClusterError):
    """403: the service account lacks a permission. The message names the RBAC verb, group
    and resource, so the fix is one rule away."""

    def __init__(self, verb: str, kind: Kind, namespace: str | None) -> None:
        where = f" in namespace {namespace!r}" if namespace else " cluster-wide"
        group = kind.group or '""'
        super().__init__(
            f"forbidden: needs RBAC verb {verb!r} on resource {kind.plural!r} "
            f"(apiGroups: [{group}]){where}"
        )
        self.verb = verb
        self.kind = kind
        self.namespace = namespace


class Gone(ClusterError):
    """410: a watch's resourceVersion is too old; list again."""


class Conflict(ClusterError):
    """409 on an update (or a JSON patch's failed ``test``): the object changed since it was
    read; read it again and retry."""


class AlreadyExists(ClusterError):
    """409 on a create: the name is taken."""


class Unreachable(ClusterError):
    """The API server could not be reached, or answered 5xx, or something unreadable."""
