"""Pull secrets read through the Kubernetes API: the ``.dockerconfigjson`` texts that
``imagecheck audit`` and ``imagecheck reap`` check images with.

The two read them differently, on purpose:

* audit (:func:`read_secrets`) reads every workload's secrets up front, each once, sorted; a
  refusal is remembered per namespace (another namespace may grant ``get``);
* reap and gate (:class:`PodKeychains`) read a pod's secrets when its image is about to be
  checked, in the pod's own order (the kubelet tries them in that order); a refusal is
  remembered for the process: reap's examples do not grant ``get`` on secrets, and a loop
  that asked again for every pod would log the same refusal thousands of times.

Both read one secret the same way (:func:`read_dockerconfig`): a secret that does not exist or
is not a docker config is a warning with its name, never its content.

audit also reads the ServiceAccounts of pod templates that name no pull secret
(:func:`read_service_accounts`): their pods will get the ServiceAccount's
(:mod:`imagecheck.kube._serviceaccount`). reap does not: it reads pods, which the
ServiceAccount admission plugin has given those secrets already; so does gate, whose gated
pods have been through admission too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from imagecheck._text import printable
from imagecheck.authn import Keychain
from imagecheck.cluster._model import SECRET, SERVICEACCOUNT, Cluster, Forbidden
from imagecheck.errors import CredentialsError
from imagecheck.kube import dockerconfig_text, service_account_pull_secrets

log = logging.getLogger("imagecheck")

# The pod's secrets' .dockerconfigjson texts (and where each came from) -> the keychain to
# check with: the CLI adds its own sources (config.json, --pull-secret...) behind them.
KeychainFor = Callable[[Sequence[tuple[str, str]]], Keychain]


async def read_dockerconfig(
    cluster: Cluster, namespace: str, name: str, *, say_absent: bool = True
) -> str | None:
    """The ``.dockerconfigjson`` text of one secret; None when it does not exist (a warning
    if ``say_absent``) or is not a docker config (a warning). Raises :class:`Forbidden` when
    RBAC refuses."""
    where = f"secret {namespace}/{name}"
    try:
        secret = await cluster.get(SECRET, namespace, name)
        if secret is None:
            if say_absent:
                log.warning("pull %s does not exist: not used", printable(where))
            return None
        return dockerconfig_text(secret, where)
    except CredentialsError as exc:  # not a docker config
        log.warning("pull secret not used: %s", printable(exc))
        return None


async def read_secrets(
    cluster: Cluster, wanted: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], str]:
    """audit's: the ``.dockerconfigjson`` text of each (namespace, name), each read once, in
    order; one that cannot be read is a warning (its name, never its content) and left out."""
    texts: dict[tuple[str, str], str] = {}
    refused: set[str] = set()
    for namespace, name in sorted(set(wanted)):
        if namespace in refused:
            continue
        try:
            text = await read_dockerconfig(cluster, namespace, name)
        except Forbidden as exc:
            refused.add(namespace)
            log.warning("cannot read pull secrets in namespace %s (%s): checking with the "
                        "local credentials", printable(namespace), exc)  # fmt: skip
            continue
        if text is not None:
            texts[(namespace, name)] = text
    return texts


async def read_service_accounts(
    cluster: Cluster, wanted: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], list[str]]:
    """audit's: the ``imagePullSecrets`` names of each (namespace, ServiceAccount), each read
    once, in their order. One that does not exist, or that RBAC will not give (remembered per
    namespace), is a warning naming it and the permission, and has none."""
    names: dict[tuple[str, str], list[str]] = {}
    refused: set[str] = set()
    for namespace, account in sorted(set(wanted)):
        where = printable(f"ServiceAccount {namespace}/{account}")
        if namespace in refused:
            continue
        try:
            obj = await cluster.get(SERVICEACCOUNT, namespace, account)
        except Forbidden as exc:
            refused.add(namespace)
            log.warning("cannot read %s (%s): its pull secrets are not used", where, exc)
            continue
        if obj is None:
            log.warning("%s does not exist: no pull secrets from it", where)
            continue
        names[(namespace, account)] = service_account_pull_secrets(obj)
    return names


class PodSecrets(Protocol):
    """What a pod's keychain depends on: reap's stuck pod, gate's gated pod."""

    @property
    def namespace(self) -> str: ...
    @property
    def pull_secrets(self) -> tuple[str, ...]: ...
    @property
    def path(self) -> str: ...


class PodKeychains:
    """reap's: ``await keychains(pod)``, the keychain for a pod's pull secrets. One per process
    (it remembers that RBAC refused)."""

    def __init__(self, cluster: Cluster, keychain_for: KeychainFor | None) -> None:
        self.cluster = cluster
        self.keychain_for = keychain_for
        self.forbidden = False

    async def __call__(self, pod: PodSecrets) -> Keychain | None:
        """The pod's pull secrets ahead of the command's own sources; None (the checker's own:
        local config, then anonymous) when it has none or RBAC forbids reading secrets (said
        once)."""
        return await self.for_secrets(pod.namespace, pod.pull_secrets, f"pod {pod.path}")

    async def for_secrets(
        self, namespace: str, names: Sequence[str], where: str
    ) -> Keychain | None:
        """As a pod's, for the secrets ``names`` of ``namespace`` (``where`` uses them: a
        pod, a Workload's pod set)."""
        if not names or self.keychain_for is None or self.forbidden:
            return None
        texts: list[tuple[str, str]] = []
        for name in names:
            try:
                # Silent when absent: a loop would say it again for every pod of every pass.
                text = await read_dockerconfig(self.cluster, namespace, name, say_absent=False)
            except Forbidden as exc:
                self.forbidden = True
                log.warning("%s; checking without pull secrets (local config, anonymous)", exc)
                return None
            if text is not None:
                texts.append((text, f"secret {namespace}/{name}"))
        try:
            return self.keychain_for(texts) if texts else None
        except CredentialsError as exc:
            log.warning("pull secrets of %s not used: %s", where, exc)
            return None
