"""The pull secrets a reviewed pod names, or else its ServiceAccount's
(``serve --use-pod-pull-secrets``), read through the Kubernetes API and kept for a minute."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from imagecheck._expiring import MISS, Expiring
from imagecheck.authn import ChainKeychain, Keychain, PullSecretKeychain
from imagecheck.errors import ImagecheckError
from imagecheck.kube import KubeClient
from imagecheck.webhook._accounts import AccountSecrets

log = logging.getLogger("imagecheck.webhook")


class PodSecrets:
    """The pull secrets a reviewed pod names, read through the API and kept for a minute (a
    review per replica must not become an API call per replica). A secret that cannot be
    read is logged and left out: the review then goes on with the webhook's own credentials.
    """

    TTL = 60.0
    # Bounded, since any pod may name secrets: keychains kept (least recently used dropped
    # first), and secrets read per review (a pod may list any number; the kubelet rarely needs
    # more than a few).
    MAX_ENTRIES = 1000
    MAX_SECRETS = 16

    def __init__(self, kube: KubeClient, base: Keychain) -> None:
        self._kube, self._base = kube, base
        self.accounts = AccountSecrets(kube)
        self._keychains: Expiring[tuple[str, tuple[str, ...]], Keychain | None]
        self._keychains = Expiring(self.MAX_ENTRIES)

    async def keychain(
        self, namespace: str, names: Sequence[str], accounts: Sequence[str] = ()
    ) -> Keychain | None:
        """``names``: the secrets the object names; ``accounts``: the ServiceAccounts of its
        pod templates that name none, whose secrets follow (:mod:`imagecheck.webhook._accounts`)."""
        names = list(names)
        for account in accounts:
            names += await self.accounts.names(namespace, account)
        names = list(dict.fromkeys(names))[: self.MAX_SECRETS]
        key = (namespace, tuple(names))
        cached = self._keychains.get(key)
        if cached is not MISS:
            return cached
        texts = []
        for name in names:
            try:
                text = await asyncio.to_thread(self._kube.pull_secret_json, name, namespace)
            except ImagecheckError as exc:
                log.warning(
                    "pull secret not used",
                    extra={"secret": f"{namespace}/{name}", "error": str(exc)},
                )
                continue
            texts.append((text, f"secret {namespace}/{name}"))
        chain: Keychain | None = None
        if texts:
            try:
                pod = PullSecretKeychain.from_paths([], texts)
            except ImagecheckError as exc:
                log.warning("pull secrets not used", extra={"error": str(exc)})
            else:
                chain = ChainKeychain((pod, self._base))
        self._keychains.put(key, chain, self.TTL)
        return chain
