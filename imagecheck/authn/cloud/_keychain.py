"""Registry credentials from the cloud identity the pod already has (EKS, GKE, AKS), the way
go-containerregistry's ``k8schain`` and the kubelet's credential plugins get them, with no
binary and no cloud SDK.

For a reference, in order, each step cheap enough to cost nothing where it does not apply:

1. **the host**: ``_hosts.cloud_registry`` names the one cloud whose registry the host is
   exactly (a look-alike gets nothing), else the keychain answers nothing;
2. **a plausible identity of that cloud**: the cloud's source (``_aws.py``, ``_google.py``,
   ``_azure.py``, each imported only when a host of its cloud is met) says which identity
   would ask, from its environment variables and small local files (a token file named by
   one, the machine's DMI vendor), with no request: none, and the keychain answers nothing,
   so no metadata server is probed off its cloud;
3. **a cached credential**, kept for the token's lifetime and renewed once three quarters of
   it have passed, so a long-lived process (``serve``, ``audit --serve``, ``reap``) renews
   before a token expires under it; a renewal that fails while the old token still holds
   keeps the old one (and logs why);
4. **the cloud's flow**: the source's requests (STS, the ECR API, a metadata server, Azure AD,
   ACR's exchange), through :class:`~imagecheck.authn.cloud._http.CloudHTTP`, inside the
   deadline; overlapping checks of one registry share one flow.

A flow that fails raises :class:`~imagecheck.errors.CloudAuthError` (the check is an error,
``--on-error`` decides): the kubelet would have pulled with the node's identity, so a
missing credential is not a verdict on the image. The registry's own refusal of the
credential is a denial, and the credential's ``source`` says which identity was used and what
it needs.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from imagecheck._deadline import Deadline
from imagecheck._expiring import MISS, Expiring
from imagecheck.authn._credentials import Credentials
from imagecheck.authn.cloud._hosts import Cloud, CloudRegistry, Service, cloud_registry
from imagecheck.authn.cloud._http import CloudHTTP
from imagecheck.errors import CloudAuthError
from imagecheck.reference import Reference

log = logging.getLogger(__name__)

CloudAuth = Literal["auto", "off"]
CLOUD_AUTH_MODES: tuple[CloudAuth, ...] = ("auto", "off")
# Credentials kept: one per registry host (ECR, ACR) or identity (Google).
MAX_CACHED = 256
# Renew once this share of a token's life has passed.
RENEW_AFTER = 0.75
# Stop offering a token this long before it expires: a check must not start with one that
# expires on the way.
EXPIRY_MARGIN = 60.0
# Where Linux shows the machine's DMI (SMBIOS) strings: the vendor says which cloud runs it.
DMI_DIR = Path("/sys/class/dmi/id")

# Registries whose every repository is public (ECR Public): anonymous pulls are what the
# kubelet does there, so a flow that fails leaves the check anonymous rather than failing it,
# and an anonymous refusal is the registry's answer about the image.
PUBLIC_SERVICES = frozenset({Service.ECR_PUBLIC})
_CLOUD_NAMES = {Cloud.AWS: "AWS", Cloud.GOOGLE: "Google", Cloud.AZURE: "Azure"}
_SOURCES = {
    Cloud.AWS: "imagecheck.authn.cloud._aws",
    Cloud.GOOGLE: "imagecheck.authn.cloud._google",
    Cloud.AZURE: "imagecheck.authn.cloud._azure",
}


@dataclass(frozen=True, slots=True)
class CloudToken:
    """A registry credential a cloud flow gave, and how many seconds it holds from now."""

    credentials: Credentials
    lifetime: float


class CloudSource(Protocol):
    """One cloud's way from an identity to a registry credential. A module in ``_SOURCES``
    makes one with ``source(env, dmi_dir)``."""

    def identity(self, registry: CloudRegistry) -> str | None:
        """The identity that would ask for ``registry`` ("IRSA role arn:..."), or None when
        none of this cloud is plausible here. Reads the environment and small local files
        only: never a request."""
        ...

    def cache_key(self, registry: CloudRegistry) -> str:
        """What a credential is good for: ``registry``'s host, or every registry of the
        cloud (a Google access token)."""
        ...

    async def token(
        self, registry: CloudRegistry, http: CloudHTTP, deadline: Deadline
    ) -> CloudToken:
        """Run the flow: a :class:`CloudAuthError` (or ``CredentialsError`` for a broken
        local input, named, never shown) when it gives nothing."""
        ...


SourceFactory = Callable[[Mapping[str, str], Path], CloudSource]


@dataclass(frozen=True)
class _Kept:
    credentials: Credentials
    renew_at: float


class CloudKeychain:
    """The cloud identities as a keychain: see the module docstring. One per process, shared
    by every check, so its cache carries from one check (or audit pass, or pod) to the next."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        http: CloudHTTP | None = None,
        sources: Mapping[Cloud, CloudSource] | None = None,
        dmi_dir: Path = DMI_DIR,
        max_cached: int = MAX_CACHED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._env = dict(os.environ if env is None else env)
        self._http = http or CloudHTTP()
        self._sources: dict[Cloud, CloudSource] = dict(sources or {})
        self._dmi_dir = dmi_dir
        self._clock = clock
        self._cache: Expiring[tuple[Cloud, str], _Kept] = Expiring(max_cached, clock)
        self._inflight: dict[tuple[Cloud, str], asyncio.Task[CloudToken]] = {}

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        """Without an event loop there is no flow to run: what is cached, else nothing.
        Checks ask :meth:`aresolve`."""
        found = self._applies(reference)
        if found is None:
            return ()
        kept = self._cache.get(found[2])
        return () if kept is MISS else (kept.credentials,)

    async def aresolve(self, reference: Reference, deadline: Deadline) -> Sequence[Credentials]:
        found = self._applies(reference)
        if found is None:
            return ()
        registry, source, key = found
        kept = self._cache.get(key)
        if kept is not MISS and self._clock() < kept.renew_at:
            return (kept.credentials,)
        try:
            token = await self._fetch(key, registry, source, deadline)
        except CloudAuthError as exc:
            if kept is not MISS:
                log.warning("renewing the credential for %s failed, the current one still holds:"
                            " %s", registry.address, exc)  # fmt: skip
                return (kept.credentials,)
            if registry.service in PUBLIC_SERVICES:
                log.warning(
                    "no credential for %s, asking it anonymously: %s", registry.address, exc
                )
                return ()
            raise
        return (token.credentials,)

    def unanswered(self, reference: Reference) -> str | None:
        """For a cloud's registry and no identity of that cloud here: say so. The kubelet pulls
        with the node's identity, so an anonymous denial is no verdict on the image."""
        registry = cloud_registry(reference.registry)
        if registry is None or registry.service in PUBLIC_SERVICES:
            return None
        if self._source(registry.cloud).identity(registry) is not None:
            return None
        return (
            f"no {_CLOUD_NAMES[registry.cloud]} identity in this process to ask "
            f"{registry.host} with: the kubelet pulls with the node's identity, which "
            "imagecheck does not have (give the pod a workload identity to check with)"
        )

    def _applies(
        self, reference: Reference
    ) -> tuple[CloudRegistry, CloudSource, tuple[Cloud, str]] | None:
        registry = cloud_registry(reference.registry)
        if registry is None:
            return None
        source = self._source(registry.cloud)
        if source.identity(registry) is None:
            return None
        return registry, source, (registry.cloud, source.cache_key(registry))

    def _source(self, cloud: Cloud) -> CloudSource:
        source = self._sources.get(cloud)
        if source is None:
            module = importlib.import_module(_SOURCES[cloud])
            factory: SourceFactory = module.source
            source = self._sources[cloud] = factory(self._env, self._dmi_dir)
        return source

    async def _fetch(
        self,
        key: tuple[Cloud, str],
        registry: CloudRegistry,
        source: CloudSource,
        deadline: Deadline,
    ) -> CloudToken:
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._run(key, registry, source, deadline))
            self._inflight[key] = task
            task.add_done_callback(lambda _: self._inflight.pop(key, None))
        # shield: a check cancelled at its deadline must not cancel the flow others await.
        return await asyncio.shield(task)

    async def _run(
        self,
        key: tuple[Cloud, str],
        registry: CloudRegistry,
        source: CloudSource,
        deadline: Deadline,
    ) -> CloudToken:
        token = await source.token(registry, self._http, deadline)
        usable = token.lifetime - min(EXPIRY_MARGIN, token.lifetime / 10)
        if usable > 0:
            kept = _Kept(token.credentials, self._clock() + usable * RENEW_AFTER)
            self._cache.put(key, kept, usable)
        return token
