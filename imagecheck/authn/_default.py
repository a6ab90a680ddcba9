"""Which credential sources are read, and in what order (the documented precedence):

1. ``--username`` + ``--password-stdin`` (or ``IMAGECHECK_USERNAME`` / ``IMAGECHECK_PASSWORD``)
2. Kubernetes pull secrets: ``--pull-secret``, ``IMAGECHECK_PULL_SECRETS``, and the pod's own
   ``imagePullSecrets`` read through the API (``--use-pod-pull-secrets``)
3. ``DOCKER_AUTH_CONFIG`` (a config.json as text, as GitLab CI passes it)
4. Docker's ``config.json`` (``--docker-config``, ``$DOCKER_CONFIG``, ``~/.docker``), then
   podman's ``auth.json`` (``REGISTRY_AUTH_FILE``, ``$XDG_RUNTIME_DIR/containers/auth.json``)
5. the kubelet's credential provider plugins (``--image-credential-provider-config`` with
   ``--image-credential-provider-bin-dir``), run only when no source above had an answer
6. the cloud identity the process has (``--cloud-auth auto``, the default; ``cloud/_keychain.py``),
   for a registry of that cloud only
7. anonymous

The first source with an answer for a registry wins; within pull secrets, and within the
plugins' answers, every matching entry is a candidate, tried in turn as the kubelet does.

The plugins and the cloud identity belong to the process, not to a pod it checks: a process
that builds a keychain per pod (``reap``, the webhook) builds them once
(:func:`shared_sources`) and shares them, so their caches carry from pod to pod.

Why the plugins come after the Docker config files: the kubelet tries a pod's pull secrets
first, then one keyring that merges the node's Docker config (its provider is registered
first) with the plugins' answers, so for the same registry it offers the config's entry
before a plugin's. Running a plugin is also the costly step (a process, a cloud API call), so
a file that already answers spares it, as the node's own config would.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from imagecheck.authn._configfiles import AuthsKeychain
from imagecheck.authn._credentials import (
    AnonymousKeychain,
    ChainKeychain,
    Credentials,
    Keychain,
    StaticKeychain,
)
from imagecheck.authn._credproviders import CredentialProviders
from imagecheck.authn._helpers import CredentialHelpers
from imagecheck.authn._pullsecrets import PullSecretKeychain, pull_secret_paths
from imagecheck.authn.cloud._http import CloudHTTP, TLSFactory
from imagecheck.authn.cloud._keychain import CloudAuth, CloudKeychain
from imagecheck.errors import CredentialsError


def docker_config_path(explicit: str | None = None, env: dict[str, str] | None = None) -> Path:
    """Where Docker's config.json is: ``--docker-config`` (a file or a directory), then
    ``$DOCKER_CONFIG/config.json``, then ``~/.docker/config.json``."""
    env = dict(os.environ) if env is None else env
    if explicit:
        path = Path(explicit).expanduser()
        return path / "config.json" if path.is_dir() else path
    if env.get("DOCKER_CONFIG"):
        return Path(env["DOCKER_CONFIG"]).expanduser() / "config.json"
    return Path.home() / ".docker" / "config.json"


def auth_json_path(env: dict[str, str] | None = None) -> Path | None:
    """podman/skopeo's auth.json: ``REGISTRY_AUTH_FILE``, else under ``XDG_RUNTIME_DIR``."""
    env = dict(os.environ) if env is None else env
    if env.get("REGISTRY_AUTH_FILE"):
        return Path(env["REGISTRY_AUTH_FILE"]).expanduser()
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / "containers" / "auth.json"
    return None


@dataclass(frozen=True)
class SharedSources:
    """The credential sources every keychain of a process shares (the kubelet's plugins, the
    cloud identity), built once, so that their caches carry from one pod or check to the next."""

    providers: CredentialProviders | None = None
    cloud: CloudKeychain | None = None

    def keychains(self) -> list[Keychain]:
        return [k for k in (self.providers, self.cloud) if k is not None]


def shared_sources(
    *,
    credential_providers: tuple[str, str] | None = None,
    cloud_auth: CloudAuth = "auto",
    tls: TLSFactory | None = None,
    env: dict[str, str] | None = None,
) -> SharedSources:
    """The kubelet's plugins (``credential_providers``: its config file and plugin bin dir,
    read and checked now) and the cloud identities (unless ``cloud_auth`` is ``off``),
    reaching cloud endpoints with ``tls``'s contexts."""
    providers = None
    if credential_providers is not None:
        config, bin_dir = credential_providers
        providers = CredentialProviders.from_files(Path(config), Path(bin_dir))
    cloud = None
    if cloud_auth != "off":
        http = CloudHTTP() if tls is None else CloudHTTP(tls=tls)
        cloud = CloudKeychain(env, http=http)
    return SharedSources(providers, cloud)


def default_keychain(
    *,
    static: Credentials | None = None,
    static_registries: Iterable[str] = (),
    pull_secrets: Sequence[str] = (),
    pod_pull_secrets: Sequence[tuple[str, str]] = (),
    docker_config: str | None = None,
    credential_providers: tuple[str, str] | None = None,
    cloud_auth: CloudAuth = "auto",
    shared: SharedSources | None = None,
    env: dict[str, str] | None = None,
) -> Keychain:
    """The precedence chain above. Every file is read and checked now, so a broken one is a
    one-line :class:`CredentialsError` before any request. An explicitly named file that does
    not exist is an error; a default location that does not exist is simply skipped.
    ``shared`` is the process's shared sources; without it they are made from
    ``credential_providers`` (the kubelet's ``(config file, plugin bin dir)``) and
    ``cloud_auth``."""
    env = dict(os.environ) if env is None else env
    helpers = CredentialHelpers()  # one per run: each helper asked once per registry
    chain: list[Keychain] = []
    if static is not None:
        hosts = list(static_registries)
        chain.extend(StaticKeychain(static, host) for host in hosts)
        if not hosts:
            chain.append(StaticKeychain(static))
    secrets = pull_secret_paths(pull_secrets, env)
    if secrets or pod_pull_secrets:
        chain.append(PullSecretKeychain.from_paths(secrets, pod_pull_secrets))
    if env.get("DOCKER_AUTH_CONFIG"):
        chain.append(
            AuthsKeychain.from_json_text(
                env["DOCKER_AUTH_CONFIG"], where="DOCKER_AUTH_CONFIG", helpers=helpers
            )
        )
    path = docker_config_path(docker_config, env)
    # exists() follows symlinks and never opens: a FIFO or device here is refused by the
    # reader (regular files only), not waited on.
    if docker_config and not path.exists():
        raise CredentialsError(f"docker config {path} does not exist")
    if path.exists():
        chain.append(AuthsKeychain.from_file(path, what="docker config", helpers=helpers))
    auth_json = auth_json_path(env)
    if auth_json is not None and (auth_json.exists() or env.get("REGISTRY_AUTH_FILE")):
        if not auth_json.exists():
            raise CredentialsError(f"REGISTRY_AUTH_FILE {auth_json} does not exist")
        chain.append(AuthsKeychain.from_file(auth_json, what="auth.json", helpers=helpers))
    if shared is None:
        shared = shared_sources(
            credential_providers=credential_providers, cloud_auth=cloud_auth, env=env
        )
    chain.extend(shared.keychains())
    chain.append(AnonymousKeychain())
    return ChainKeychain(tuple(chain))
