"""The ``imagePullSecrets`` of the ServiceAccounts a reviewed object's pods will run as
(``serve --use-pod-pull-secrets``), read through the Kubernetes API and kept for a minute.

A Deployment's or a Job's template that names no pull secret gets its ServiceAccount's when
its pods are created (the ServiceAccount admission plugin: :mod:`imagecheck.kube._serviceaccount`),
so the webhook checks its images with those, as the kubelet will pull them.
"""

from __future__ import annotations

import asyncio
import logging

from imagecheck._expiring import MISS, Expiring
from imagecheck.errors import ImagecheckError, RegistryError
from imagecheck.kube import KubeClient, service_account_pull_secrets

log = logging.getLogger("imagecheck.webhook")


class AccountSecrets:
    """``await names(namespace, account)``: the ServiceAccount's pull secret names, in order.
    One that cannot be read (absent, RBAC, the API down) is logged and has none: the review
    goes on with the other credentials. Kept for :attr:`TTL`, failures too, so that a review
    per replica does not become an API call (or a log line) per replica."""

    TTL = 60.0
    # Bounded, since any namespace may name any ServiceAccount (least recently used first out).
    MAX_ENTRIES = 1000

    def __init__(self, kube: KubeClient, max_entries: int = MAX_ENTRIES) -> None:
        self._kube = kube
        self._names: Expiring[tuple[str, str], list[str]] = Expiring(max_entries)

    async def names(self, namespace: str, account: str) -> list[str]:
        key = (namespace, account)
        cached = self._names.get(key)
        if cached is not MISS:
            return cached
        try:
            obj = await asyncio.to_thread(self._kube.service_account, account, namespace)
            names = service_account_pull_secrets(obj)
        except ImagecheckError as exc:
            log.warning(
                "service account pull secrets not used",
                extra={"serviceaccount": f"{namespace}/{account}", "error": _why(exc, namespace)},
            )
            names = []
        self._names.put(key, names, self.TTL)
        return names


def _why(exc: ImagecheckError, namespace: str) -> str:
    """What to fix: the KubeClient's own 403 names the webhook's namespace, not the object's."""
    status = exc.status_code if isinstance(exc, RegistryError) else None
    if status == 403:
        return f"forbidden: needs 'get serviceaccounts' in namespace {namespace} (RBAC)"
    if status == 404:
        return "the ServiceAccount does not exist"
    return str(exc)
