"""``imagecheck audit``: every workload's images, read from the API and checked.

1. List the workload kinds, parents first (custom kinds named with ``--kind``, then CronJobs,
   Deployments, StatefulSets, DaemonSets, Jobs, ReplicaSets, Pods). An object whose
   controller (``ownerReferences[controller=true]``) was listed already and had containers is
   skipped: a Deployment's ReplicaSets and their pods, a CronJob's Jobs, a StatefulSet's pods
   say nothing their parent did not. Bare pods, and the pods of a controller audit does not
   list (a static pod's Node, an operator's resource not named with ``--kind``), are kept.
2. Keep only (workload, container, image) :class:`Use` triples and, per image, the pull
   secrets named by the workloads that use it: the objects themselves are dropped as they
   stream by, so 10,000 pods cost their triples, not their JSON. A malformed object or
   container is skipped with a log line.
3. A pod template that names no pull secret gets its ServiceAccount's when its pods are
   created (the ServiceAccount admission plugin, :mod:`imagecheck.kube._serviceaccount`): read
   each such ServiceAccount once (``get serviceaccounts``) and take its ``imagePullSecrets``
   as the template's. Pods carry theirs already and are not looked up. Then read each named
   Secret once (``get`` per namespace and name). A ServiceAccount that does not exist is a
   warning; a 403 is one warning per namespace, and the check goes on with the other
   credentials.
4. Check each distinct image once (``ImageChecker.check_many``), offering the pull secrets of
   *every* workload that uses it, then the local credentials (``--docker-config``,
   ``--username``...). Two workloads that use one image with different pull secrets: the
   image is found when any of their secrets (or the local credentials) can read it. The
   question audit answers is "does the image exist", as ``scan`` does; a workload whose own
   secrets lack access is not told apart (the kubelet's node credentials may cover it too).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from imagecheck._deadline import Deadline
from imagecheck._text import printable
from imagecheck.authn import (
    Credentials,
    Keychain,
    PullSecretKeychain,
    resolve_credentials,
    unanswered,
)
from imagecheck.cluster._model import (
    CRONJOB,
    DAEMONSET,
    DEPLOYMENT,
    JOB,
    POD,
    REPLICASET,
    STATEFULSET,
    Cluster,
    Kind,
    Selector,
)
from imagecheck.cluster._secrets import read_secrets, read_service_accounts
from imagecheck.errors import ImagecheckError, InvalidReferenceError, UsageError
from imagecheck.kube import JSON, pull_secrets, service_accounts
from imagecheck.kube._workload import containers
from imagecheck.reference import Reference, parse_reference
from imagecheck.registry import ClientOptions, ImageChecker
from imagecheck.result import CheckResult, Status
from imagecheck.run import default_deadline

log = logging.getLogger("imagecheck.audit")

# Parents before children, so that a child's controller is known when the child streams by.
WORKLOAD_KINDS = (CRONJOB, DEPLOYMENT, STATEFULSET, DAEMONSET, JOB, REPLICASET, POD)
# Longer than any image reference the parser accepts (255 for the name, 128 for the tag,
# a digest) or any DNS-1123 name: a longer one is held as this many characters at most.
MAX_TEXT = 1024
# Pull secrets read per workload (the webhook's bound): the kubelet rarely needs more.
MAX_SECRETS = 16


@dataclass(frozen=True, slots=True, order=True)
class Use:
    """One container of one workload and the image it runs: what audit reports."""

    namespace: str
    kind: str
    name: str
    container: str
    image: str


@dataclass
class Inventory:
    """What the workloads hold: their uses, and per image the pull secrets (namespace,
    name) of the workloads that use it, and the ServiceAccounts (namespace, name) of those
    whose pod templates name none."""

    uses: list[Use] = field(default_factory=list)
    secrets: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    accounts: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    skipped: int = 0  # malformed objects and containers


def parse_kind(text: str) -> Kind:
    """``--kind plural.group/version`` (``rayclusters.ray.io/v1``): a custom resource."""
    resource, _, version = text.partition("/")
    plural, _, group = resource.partition(".")
    if not (plural and group and version) or "/" in version:
        raise UsageError(f"--kind {text!r}: expected plural.group/version (rayclusters.ray.io/v1)")
    # The API's list path needs the plural only; the kind's own name is each object's "kind".
    return Kind(f"{group}/{version}", plural, plural)


async def collect(
    cluster: Cluster, selector: Selector, extra: Sequence[Kind] = (), *, secrets: bool = True
) -> Inventory:
    """Every workload's uses, the owned ones left out (see the module's docstring)."""
    inventory = Inventory()
    owners: set[str] = set()  # uids of listed controllers; pods own nothing audit lists
    for kind in (*extra, *WORKLOAD_KINDS):
        async for obj in cluster.list(kind, selector):
            _take(obj, kind, inventory, owners, secrets=secrets)
    inventory.uses.sort()
    return inventory


def _take(obj: Any, kind: Kind, inventory: Inventory, owners: set[str], *, secrets: bool) -> None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = _text(meta.get("name")) if isinstance(meta, dict) else None
    if meta is None or name is None:
        log.warning("skipped an object of %s: no metadata.name", kind.plural)
        inventory.skipped += 1
        return
    namespace = _text(meta.get("namespace")) or ""
    uses = _uses(obj, namespace, _text(obj.get("kind")) or kind.kind, name, inventory)
    uid = _text(meta.get("uid"))
    owned = _controller(meta) in owners
    if uid and kind is not POD and (uses or owned):
        owners.add(uid)
    if owned:
        return
    inventory.uses.extend(uses)
    names = pull_secrets(JSON, obj)[:MAX_SECRETS] if secrets else []
    for use in uses if names else []:
        inventory.secrets.setdefault(use.image, set()).update((namespace, n) for n in names)
    accounts = service_accounts(obj) if secrets else []
    for use in uses if accounts else []:
        inventory.accounts.setdefault(use.image, set()).update((namespace, a) for a in accounts)


async def add_account_secrets(cluster: Cluster, inventory: Inventory) -> None:
    """Each image's ServiceAccounts' pull secrets, added to its own: what the admission plugin
    will give the pods of the templates that name none. Each ServiceAccount is read once."""
    wanted = set().union(*inventory.accounts.values())
    found = await read_service_accounts(cluster, wanted) if wanted else {}
    for image, accounts in inventory.accounts.items():
        for key in sorted(accounts):
            names = found.get(key, [])[:MAX_SECRETS]
            inventory.secrets.setdefault(image, set()).update((key[0], n) for n in names)


def _uses(
    obj: dict[str, Any], namespace: str, kind: str, name: str, inventory: Inventory
) -> list[Use]:
    found: dict[tuple[str, str], None] = {}
    for slot in containers(JSON, obj):
        image = _text(slot.image)
        if image is None:
            log.warning("skipped a container of %s/%s/%s: its image is not text", namespace,
                        printable(kind), printable(name))  # fmt: skip
            inventory.skipped += 1
            continue
        found[(_text(slot.container) or slot.field, image)] = None
    return [Use(namespace, kind, name, container, image) for container, image in found]


def _controller(meta: Mapping[str, Any]) -> str | None:
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return _text(ref.get("uid"))
    return None


def _text(value: Any) -> str | None:
    """``value`` when it is text, at most :data:`MAX_TEXT` characters; else None."""
    return value[:MAX_TEXT] if isinstance(value, str) else None


def image_keychains(
    inventory: Inventory, texts: Mapping[tuple[str, str], str]
) -> dict[tuple[str, str | None, str | None], Keychain]:
    """Per image (its repository, tag and digest: a mirror's endpoint is found too), one
    keyring of the pull secrets of every workload that uses it."""
    keychains: dict[tuple[str, str | None, str | None], Keychain] = {}
    for image, wanted in inventory.secrets.items():
        found = [
            (texts[key], f"secret {key[0]}/{key[1]}") for key in sorted(wanted) if key in texts
        ]
        if not found:
            continue
        try:
            keychains[_key(parse_reference(image))] = PullSecretKeychain.from_paths([], found)
        except ImagecheckError as exc:  # an invalid image (reported), a broken secret
            log.warning("pull secrets for %s not used: %s", printable(image), printable(exc))
    return keychains


def _key(ref: Reference) -> tuple[str, str | None, str | None]:
    # Not the registry: a mirror is asked with the same repository under its own host, and
    # a pull secret's entries are offered only to the hosts they name anyway.
    return (ref.repository, ref.tag, ref.digest)


@dataclass(frozen=True)
class ImageSecretsKeychain:
    """An image's own pull secrets first, then ``base`` (the local credentials), as the
    webhook chains a pod's secrets before its own."""

    by_image: Mapping[tuple[str, str | None, str | None], Keychain]
    base: Keychain

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        own = self.by_image.get(_key(reference))
        return (own.resolve(reference) if own else ()) or self.base.resolve(reference)

    async def aresolve(self, reference: Reference, deadline: Deadline) -> Sequence[Credentials]:
        own = self.by_image.get(_key(reference))
        found = own.resolve(reference) if own else ()
        return found or await resolve_credentials(self.base, reference, deadline)

    def unanswered(self, reference: Reference) -> str | None:
        return unanswered(self.base, reference)


@dataclass(frozen=True)
class AuditReport:
    """Every use, sorted (namespace, kind, name, container), and each image's result."""

    uses: list[Use]
    results: dict[str, CheckResult]
    skipped: int = 0


async def audit(
    cluster: Cluster,
    selector: Selector,
    options: ClientOptions,
    base: Keychain,
    *,
    extra: Sequence[Kind] = (),
    secrets: bool = True,
    deadline: float | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AuditReport:
    """One audit: list, read the ServiceAccounts and pull secrets, check each distinct image
    once. ``base`` is the local credentials (``run.keychain``); ``deadline`` None:
    ``run.default_deadline``.
    Raises :class:`~imagecheck.cluster._model.ClusterError` when a list fails (a 403 names
    the RBAC rule)."""
    inventory = await collect(cluster, selector, extra, secrets=secrets)
    await add_account_secrets(cluster, inventory)
    wanted = set().union(*inventory.secrets.values())
    texts = await read_secrets(cluster, wanted) if wanted else {}
    keychain = ImageSecretsKeychain(image_keychains(inventory, texts), base)
    images = list(dict.fromkeys(use.image for use in inventory.uses))
    results = await check_images(images, options, keychain, deadline, transport)
    return AuditReport(inventory.uses, results, inventory.skipped)


async def check_images(
    images: Sequence[str],
    options: ClientOptions,
    keychain: Keychain,
    deadline: float | None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, CheckResult]:
    """Each of ``images`` (distinct) checked once; an invalid reference is a result too,
    and does not stop the others (as in ``scan``)."""
    items: list[tuple[str, Reference]] = []
    results: dict[str, CheckResult] = {}
    for image in images:
        try:
            items.append((image, parse_reference(image)))
        except InvalidReferenceError as exc:
            results[image] = CheckResult(image, None, Status.INVALID, exc.reason)
    if items:
        until = Deadline.after(deadline or default_deadline(len(items)))
        async with ImageChecker(options, keychain, transport=transport) as checker:
            for result in await checker.check_many(items, until):
                results[result.image] = result
    return results
