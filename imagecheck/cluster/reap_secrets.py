"""The pull secrets a stuck pod names, read through the API, as the keychain ``imagecheck reap``
checks its image with (issue #15).

Unlike audit's ``read_secrets`` (every workload's secrets read up front, sorted, a refusal
remembered per namespace), reap reads a pod's secrets when its image is about to be checked, in
the pod's own order (the kubelet tries them in that order), and a refusal is remembered for the
process: reap's examples do not grant ``get`` on secrets, and a loop that asked again for every
pod would log the same refusal thousands of times.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from imagecheck.cluster.model import SECRET, Cluster, Forbidden
from imagecheck.cluster.reap import StuckPod
from imagecheck.credentials import Keychain
from imagecheck.errors import CredentialsError
from imagecheck.kube import dockerconfig_text

log = logging.getLogger("imagecheck")

# The pod's secrets' .dockerconfigjson texts (and where each came from) -> the keychain to
# check with: the CLI adds its own sources (config.json, --pull-secret...) behind them.
KeychainFor = Callable[[Sequence[tuple[str, str]]], Keychain]


class PodKeychains:
    """``await keychains(pod)``: the keychain for a pod's pull secrets. One per process (it
    remembers that RBAC refused)."""

    def __init__(self, cluster: Cluster, keychain_for: KeychainFor | None) -> None:
        self.cluster = cluster
        self.keychain_for = keychain_for
        self.forbidden = False

    async def __call__(self, pod: StuckPod) -> Keychain | None:
        """The pod's pull secrets ahead of the command's own sources; None (the checker's own:
        local config, then anonymous) when it has none or RBAC forbids reading secrets (said
        once)."""
        if not pod.pull_secrets or self.keychain_for is None or self.forbidden:
            return None
        texts: list[tuple[str, str]] = []
        for name in pod.pull_secrets:
            where = f"secret {pod.namespace}/{name}"
            try:
                secret = await self.cluster.get(SECRET, pod.namespace, name)
                if secret is not None:
                    texts.append((dockerconfig_text(secret, where), where))
            except Forbidden as exc:
                self.forbidden = True
                log.warning("%s; checking without pull secrets (local config, anonymous)", exc)
                return None
            except CredentialsError as exc:
                log.warning("%s: not used", exc)
        try:
            return self.keychain_for(texts) if texts else None
        except CredentialsError as exc:
            log.warning("pull secrets of pod %s not used: %s", pod.path, exc)
            return None
