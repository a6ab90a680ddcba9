"""``--from-pod``: read the images (and, optionally, the pull secrets) of the pod imagecheck
runs in, from the Kubernetes API, so a Job spec need not repeat its image.

In-cluster configuration, as client-go's ``rest.InClusterConfig`` reads it: the API server at
``KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT``, the service-account token and CA under
``/var/run/secrets/kubernetes.io/serviceaccount``; the pod's name and namespace from the
Downward API (``POD_NAME``, ``POD_NAMESPACE``; the namespace file as a fallback).

Minimal RBAC: ``get`` on ``pods`` in the namespace; with ``--use-pod-pull-secrets`` also
``get`` on the named ``secrets`` (``resourceNames``). See ``examples/job-from-pod.yaml``.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from imagecheck._capped import parse_json_object, read_capped_sync
from imagecheck._files import MAX_CA_FILE, read_regular_file
from imagecheck.errors import CredentialsError, RegistryError, UsageError
from imagecheck.kube._workload import JSON, containers, pull_secrets

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# The API answers a pod or a secret in a few KiB; refuse to hold much more.
MAX_OBJECT_SIZE = 1024 * 1024
# The service-account token (a JWT) and namespace are small; the CA file is a few KiB.
MAX_MOUNTED_FILE = 64 * 1024
# How this module's errors name it; a front end words it as its own option (render.error_text).
SETTING = "the in-cluster API client"


class InClusterError(UsageError):
    """The pod's in-cluster configuration cannot be used."""

    def __init__(self, message: str) -> None:
        super().__init__(message, setting=SETTING)


@dataclass(frozen=True)
class InCluster:
    """Where the API is and who we are in it."""

    api_url: str
    token: str = field(repr=False)
    ca_file: Path
    namespace: str
    pod_name: str

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, need_pod: bool = True) -> InCluster:
        """``need_pod``: the pod's own name is needed (``--from-pod``), not just the API."""
        env = os.environ if env is None else env
        sa_dir = Path(env.get("IMAGECHECK_SERVICEACCOUNT_DIR", SERVICE_ACCOUNT_DIR))
        host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            raise InClusterError(
                f"{SETTING} works inside a pod: KUBERNETES_SERVICE_HOST/PORT are not set"
            )
        pod_name = env.get("POD_NAME") or env.get("HOSTNAME", "")
        namespace = env.get("POD_NAMESPACE") or _read(sa_dir / "namespace", "namespace").strip()
        if need_pod and not pod_name:
            raise InClusterError(f"{SETTING} needs POD_NAME (set it from the Downward API)")
        token = _read(sa_dir / "token", "service-account token").strip()
        host = f"[{host}]" if ":" in host else host  # an IPv6 service address
        return cls(f"https://{host}:{port}", token, sa_dir / "ca.crt", namespace, pod_name)


def _read(path: Path, what: str, limit: int = MAX_MOUNTED_FILE) -> str:
    """A file the kubelet mounted: a regular file (behind ``..data`` symlinks), capped."""
    raw = read_regular_file(path, limit=limit, what=f"{SETTING}'s {what}", error=InClusterError)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InClusterError(f"{SETTING}: the {what} at {path} is not UTF-8 text") from None


@dataclass(frozen=True)
class PodImages:
    images: list[str]
    pull_secret_names: list[str]


class KubeClient:
    """Just enough of the Kubernetes API: get a pod, a secret, a ServiceAccount."""

    def __init__(self, cluster: InCluster, *, timeout: float = 10.0) -> None:
        self.cluster = cluster
        try:
            verify = ssl.create_default_context(
                cadata=_read(cluster.ca_file, "cluster CA", MAX_CA_FILE)
            )
        except (ValueError, ssl.SSLError) as exc:
            raise InClusterError(
                f"{SETTING}: cannot load the cluster CA {cluster.ca_file}: {exc}"
            ) from None
        self._client = httpx.Client(
            base_url=cluster.api_url,
            verify=verify,
            timeout=timeout,
            headers={
                "Authorization": f"Bearer {cluster.token}",
                "Accept": "application/json",
                "Accept-Encoding": "identity",
            },
            trust_env=False,  # in-cluster traffic goes straight to the service address
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, path: str, what: str) -> dict[str, Any]:
        """The object at ``path``. The API server is remote, so what it answers is bounded
        and any other shape is a RegistryError (exit 4, like a registry's), never a
        traceback. Only a 200's body is read: the others' say nothing we show."""
        try:
            with self._client.stream("GET", path) as response:
                body = (
                    read_capped_sync(
                        response, MAX_OBJECT_SIZE, f"Kubernetes API: {what}", error=RegistryError
                    )
                    if response.status_code == 200
                    else b""
                )
        except httpx.HTTPError as exc:
            raise RegistryError(
                f"cannot reach the Kubernetes API at {self.cluster.api_url}: {exc}"
            ) from None
        if response.status_code == 403:
            raise RegistryError(
                f"Kubernetes API refused to get {what} (403): the pod's service account needs "
                f"a Role with 'get' on it in namespace {self.cluster.namespace} "
                "(see examples/job-from-pod.yaml)",
                status_code=403,
            )
        if response.status_code != 200:
            raise RegistryError(
                f"Kubernetes API answered HTTP {response.status_code} for {what}",
                status_code=response.status_code,
            )
        return parse_json_object(body, f"Kubernetes API: {what}", error=RegistryError)

    def pod_images(self, skip_container: str) -> PodImages:
        ns, name = self.cluster.namespace, self.cluster.pod_name
        pod = self.get(f"/api/v1/namespaces/{ns}/pods/{name}", f"pod {ns}/{name}")
        return images_of(pod, skip_container)

    def pull_secret_json(self, secret_name: str, namespace: str | None = None) -> str:
        """The ``.dockerconfigjson`` (or legacy ``.dockercfg``) text of a secret."""
        ns = namespace or self.cluster.namespace
        secret = self.get(
            f"/api/v1/namespaces/{ns}/secrets/{secret_name}", f"secret {ns}/{secret_name}"
        )
        return dockerconfig_text(secret, f"secret {ns}/{secret_name}")

    def service_account(self, name: str, namespace: str) -> dict[str, Any]:
        """A ServiceAccount as the API answers it (the webhook reads its imagePullSecrets)."""
        return self.get(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}",
            f"serviceaccount {namespace}/{name}",
        )


def dockerconfig_text(secret: Mapping[str, Any], where: str) -> str:
    """The ``.dockerconfigjson`` (or legacy ``.dockercfg``) text of a Secret as the API
    answers it (base64 in ``data``; ``where`` names it in errors): ``--from-pod``, the
    webhook, ``reap`` and ``audit`` read pull secrets so."""
    data = secret.get("data") or {}
    for key in (".dockerconfigjson", ".dockercfg"):
        if isinstance(data, dict) and isinstance(data.get(key), str):
            try:
                return base64.b64decode(data[key], validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise CredentialsError(f"{where}: {key} is not valid base64") from None
    raise CredentialsError(f"{where} holds neither .dockerconfigjson nor .dockercfg")


def images_of(pod: Mapping[str, Any], skip_container: str) -> PodImages:
    """Every container's image but ``skip_container``'s, in spec order, each once; and the
    names of the pod's ``imagePullSecrets``: found as scan and the webhook find them
    (:mod:`imagecheck.kube._workload`). A field of another shape than the API's is a
    RegistryError."""
    spec = pod.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise RegistryError("Kubernetes API: the pod's spec is not an object")
    for name in (*_POD_LISTS, "imagePullSecrets"):
        if spec.get(name) is not None and not isinstance(spec[name], list):
            raise RegistryError(f"Kubernetes API: the pod's spec.{name} is not a list")
    images: dict[str, None] = {}
    for slot in containers(JSON, {"spec": spec}):
        if isinstance(slot.image, str) and slot.container != skip_container:
            images[slot.image] = None
    return PodImages(list(images), pull_secrets(JSON, {"spec": spec}))


_POD_LISTS = ("initContainers", "containers", "ephemeralContainers")
