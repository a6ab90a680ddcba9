"""The stand-in's state: objects with resourceVersions, the change history a watch reads,
the RBAC table and the write log. No HTTP here (``server.py``); every method is called with
the store's lock held, from the server's thread or a test's."""

from __future__ import annotations

import copy
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support import jsonpatch
from tests.support.fakecluster import merge_patch
from tests.support.kubeapi import subresources

JSON = dict[str, Any]
SERVICE_ACCOUNT = "system:serviceaccount:imagecheck:imagecheck"


@dataclass(frozen=True)
class Resource:
    """One resource type the stand-in serves, as the path names it."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status: bool = False  # has the status subresource (``subresources.py``)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``jobs.batch``, as the API's messages name a resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES = [
    Resource("", "v1", "pods", "Pod"),
    Resource("", "v1", "events", "Event"),
    Resource("", "v1", "secrets", "Secret"),
    Resource("", "v1", "serviceaccounts", "ServiceAccount"),
    Resource("batch", "v1", "jobs", "Job"),
    Resource("batch", "v1", "cronjobs", "CronJob"),
    Resource("coordination.k8s.io", "v1", "leases", "Lease"),
    Resource("apps", "v1", "deployments", "Deployment"),
    Resource("apps", "v1", "statefulsets", "StatefulSet"),
    Resource("apps", "v1", "daemonsets", "DaemonSet"),
    Resource("apps", "v1", "replicasets", "ReplicaSet"),
    # Kueue's CRDs (kueue.x-k8s.io, config/components/crd/bases): both with the status
    # subresource; an AdmissionCheck is cluster-scoped.
    Resource("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", status=True),
    Resource("kueue.x-k8s.io", "v1beta1", "admissionchecks", "AdmissionCheck", False, status=True),
]


@dataclass
class Write:
    """One write request as the stand-in received it, whatever it answered."""

    method: str  # PATCH, POST, PUT, DELETE
    path: str  # /apis/batch/v1/namespaces/ci/jobs/train
    content_type: str
    body: Any  # the parsed JSON, None without a body
    status: int  # what the stand-in answered


class ApiError(Exception):
    """An answer other than success, as the API's Status object."""

    def __init__(self, code: int, reason: str, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.status: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "details": {"kind": kind} if kind else {},
            "code": code,
        }


@dataclass
class Store:
    """Objects by (plural, namespace, name). ``allowed``: the RBAC table, (verb, plural)
    pairs (None: everything allowed). ``history``: (resourceVersion, type, object) of every
    change after ``compacted``, the oldest version a watch may start from. ``before``: a
    change to make once, just before the next request of a (verb, plural) is served: another
    writer (a controller, kubectl) acting between a client's read and its write."""

    objects: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    history: list[tuple[int, str, JSON]] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    allowed: set[tuple[str, str]] | None = None
    version: int = 1000
    compacted: int = 0
    before: dict[tuple[str, str], Callable[[Store], None]] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def add(self, obj: JSON) -> JSON:
        """Store ``obj`` (the server fills uid, resourceVersion, creationTimestamp); its
        status is kept, as if its controller had written it since."""
        res = resource_of(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        namespace = meta.get("namespace", "default") if res.namespaced else ""
        with self.lock:
            return self.create(res, namespace, obj, seed=True)

    def add_raw(self, plural: str, namespace: str, key: str, raw: Any) -> None:
        """Store anything at all (a malformed object a list will serve as it is)."""
        with self.lock:
            self.objects[(plural, namespace, key)] = raw

    def compact(self) -> None:
        """Forget the history so far, as etcd compaction does: older watches get 410."""
        with self.lock:
            self.history.clear()
            self.compacted = self.version

    def check(
        self, verb: str, res: Resource, namespace: str | None, subresource: str | None = None
    ) -> None:
        plural = f"{res.plural}/{subresource}" if subresource else res.plural
        if self.allowed is None or (verb, plural) in self.allowed:
            return
        where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        raise ApiError(
            403,
            "Forbidden",
            f'{res.qualified} is forbidden: User "{SERVICE_ACCOUNT}" cannot {verb} resource '
            f'"{plural}" in API group "{res.group}" {where}',
            res.plural,
        )

    def interject(self, verb: str, res: Resource) -> None:
        """Make the change registered in ``before`` for this request, if any (once)."""
        change = self.before.pop((verb, res.plural), None)
        if change is not None:
            change(self)

    def items(self, res: Resource, namespace: str | None) -> list[Any]:
        keys = sorted(k for k in self.objects if k[0] == res.plural)
        return [self.objects[k] for k in keys if namespace is None or k[1] == namespace]

    def get(self, res: Resource, namespace: str, name: str) -> JSON:
        obj = self.objects.get((res.plural, namespace, name))
        if obj is None and (res.plural, name) == ("serviceaccounts", "default"):
            # The ServiceAccount controller makes "default" in every namespace.
            meta = {"name": name, "namespace": namespace, "resourceVersion": "1"}
            obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
        if obj is None:
            raise ApiError(404, "NotFound", f'{res.qualified} "{name}" not found', res.plural)
        return copy.deepcopy(obj)

    def create(self, res: Resource, namespace: str, body: JSON, *, seed: bool = False) -> JSON:
        obj = copy.deepcopy(body) if seed else subresources.created(res.status, body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)
        name = meta.get("name")
        if (res.plural, namespace, name) in self.objects:
            raise ApiError(
                409, "AlreadyExists", f'{res.qualified} "{name}" already exists', res.plural
            )
        meta.update(creationTimestamp="2026-12-03T09:00:00Z")
        if res.namespaced:
            meta["namespace"] = namespace
        if res.status:
            meta.setdefault("generation", 1)
        meta["uid"] = f"uid-{res.kind.lower()}-{name}"
        obj.update(apiVersion=res.api_version, kind=res.kind)
        return self._put(res, namespace, obj, "ADDED")

    def patch(
        self,
        res: Resource,
        namespace: str,
        name: str,
        patch: Any,
        subresource: str | None = None,
        json_patch: bool = False,
    ) -> JSON:
        """A merge patch, or (``json_patch``) an RFC 6902 one: a failed ``test`` or a path
        that is not there is 422 Invalid, as the apiserver's patch handler answers
        (``applyJSPatch``: ``NewGenericServerResponse(422, ...)``). A resourceVersion in the
        patched object is a precondition either way."""
        current = self.get(res, namespace, name)
        if json_patch:
            try:
                patched = jsonpatch.apply_patch(current, patch)
            except jsonpatch.PatchError as exc:
                raise ApiError(422, "Invalid", f"the server rejected our request due to an "
                               f"error in our request: {exc}") from None  # fmt: skip
        else:
            patched = merge_patch(current, patch)
        self._check_version(res, current, patched["metadata"].get("resourceVersion"))
        obj = subresources.written(res.status, current, patched, subresource)
        validate_update(res, current, obj)
        return self._put(res, namespace, obj, "MODIFIED")

    def replace(
        self, res: Resource, namespace: str, name: str, body: JSON, subresource: str | None = None
    ) -> JSON:
        current = self.get(res, namespace, name)
        self._check_version(res, current, (body.get("metadata") or {}).get("resourceVersion"))
        obj = copy.deepcopy(body)
        obj["metadata"].update(uid=current["metadata"]["uid"], name=name)
        if res.namespaced:
            obj["metadata"]["namespace"] = namespace
        obj = subresources.written(res.status, current, obj, subresource)
        validate_update(res, current, obj)
        return self._put(res, namespace, obj, "MODIFIED")

    def delete(self, res: Resource, namespace: str, name: str) -> JSON:
        obj = self.get(res, namespace, name)
        del self.objects[(res.plural, namespace, name)]
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.history.append((self.version, "DELETED", copy.deepcopy(obj)))
        return obj

    def _check_version(self, res: Resource, current: JSON, wanted: str | None) -> None:
        if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
            name = current["metadata"]["name"]
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has '
                "been modified; please apply your changes to the latest version and try again",
                res.plural,
            )

    def _put(self, res: Resource, namespace: str, obj: JSON, change: str) -> JSON:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.objects[(res.plural, namespace, obj["metadata"]["name"])] = obj
        self.history.append((self.version, change, copy.deepcopy(obj)))
        return copy.deepcopy(obj)


def resource_of(api_version: str, kind: str) -> Resource:
    for res in RESOURCES:
        if res.api_version == api_version and res.kind == kind:
            return res
    raise KeyError(f"the stand-in does not serve {api_version} {kind}")


def matches(obj: Any, selector: str) -> bool:
    """A label selector's equality and existence terms (``a=b``, ``a==b``, ``a!=b``, ``a``)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    labels = (meta.get("labels") or {}) if isinstance(meta, dict) else {}
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            ok = labels.get(key) != value
        elif "=" in term:
            key, _, value = term.partition("=")
            ok = labels.get(key) == value.removeprefix("=")
        else:
            ok = term in labels
        if not ok:
            return False
    return True


from tests.support.kubeapi.podrules import validate_update  # noqa: E402 - imports this module
