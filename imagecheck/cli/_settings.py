"""What the shared options say, as one typed value (:class:`CheckSettings`), built once from
click's values by :func:`with_settings`; the library's values (``ClientOptions``, a
``Keychain``) are made from it, not handed on as keywords."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from imagecheck.authn import Credentials, Keychain, SharedSources
from imagecheck.authn.cloud._keychain import CloudAuth
from imagecheck.cli._logs import setup_logging
from imagecheck.errors import UsageError
from imagecheck.exitcodes import OnError
from imagecheck.registry import ClientOptions
from imagecheck.run import client_options, keychain, shared_sources

DEFAULT_TERMINATION_LOG = "/dev/termination-log"


@dataclass(frozen=True)
class CheckSettings:
    """What the check options say, as one value (parsed by the option types)."""

    concurrency: int
    timeout: float
    retries: int
    denied_as_missing: bool
    platform: str | None
    mirrors: tuple[tuple[str, str], ...]
    insecure: tuple[str, ...]
    ca_files: tuple[Path, ...]
    username: str | None
    password_stdin: bool
    docker_config: str | None
    pull_secrets: tuple[str, ...]
    verbose: bool
    credentials_for: tuple[str, ...] = ()
    image_credential_provider_config: str | None = None
    image_credential_provider_bin_dir: str | None = None
    cloud_auth: CloudAuth = "auto"
    deep: bool = False
    hosts_dir: Path | None = None
    registries_conf: Path | None = None
    # run options (check, scan); serve has its own notion of each
    deadline: float | None = None  # None: imagecheck.run.default_deadline
    wait: float | None = None
    on_error: OnError = "fail"
    termination_log: str = DEFAULT_TERMINATION_LOG

    def client_options(self) -> ClientOptions:
        """How to reach registries."""
        return client_options(
            timeout=self.timeout,
            retries=self.retries,
            concurrency=self.concurrency,
            platform=self.platform,
            mirrors=self.mirrors,
            hosts_dir=self.hosts_dir,
            registries_conf=self.registries_conf,
            insecure_registries=self.insecure,
            ca_files=self.ca_files,
            denied_as_missing=self.denied_as_missing,
            deep=self.deep,
        )

    def keychain(
        self, credentials: Credentials | None, pod_pull_secrets: Sequence[tuple[str, str]] = ()
    ) -> Keychain:
        """The credential sources, with ``credentials`` read from the options already."""
        return keychain(
            credentials=credentials,
            credentials_for=self.credentials_for,
            docker_config=self.docker_config,
            pull_secrets=self.pull_secrets,
            pod_pull_secrets=pod_pull_secrets,
            shared=self.shared,
        )

    @functools.cached_property
    def shared(self) -> SharedSources:
        """The process's shared credential sources (the kubelet's plugins, the cloud
        identity), made once, so that every keychain a command builds (one per pod for reap
        and serve) shares their caches."""
        return shared_sources(
            credential_providers=self.credential_providers(),
            cloud_auth=self.cloud_auth,
            ca_files=self.ca_files,
        )

    def credential_providers(self) -> tuple[str, str] | None:
        """The kubelet's (config, bin dir), or None. One without the other is a usage error:
        the kubelet needs both, and half of it would silently run nothing."""
        config = self.image_credential_provider_config
        bin_dir = self.image_credential_provider_bin_dir
        if bool(config) != bool(bin_dir):
            given, missing = (
                ("--image-credential-provider-config", "--image-credential-provider-bin-dir")
                if config
                else ("--image-credential-provider-bin-dir", "--image-credential-provider-config")
            )
            raise UsageError(f"{given} needs {missing} too")
        return (config, bin_dir) if config and bin_dir else None


_FIELDS = frozenset(f.name for f in fields(CheckSettings))


# Any: click hands each option's value as its type converted it, which no checker can see;
# the option types make them what CheckSettings' fields say.
def start_run(params: Mapping[str, Any]) -> CheckSettings:
    """The settings among click's ``params`` (the rest are the command's own), with logging
    set up."""
    settings = CheckSettings(**{k: v for k, v in params.items() if k in _FIELDS})
    setup_logging(settings.verbose)
    settings.credential_providers()  # both or neither, before anything is read
    return settings


def with_settings(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` called with ``settings=``, the shared options as one value, and its own
    options as keywords. The innermost decorator: the options above it are declared on what
    it returns."""

    @functools.wraps(command)
    def call(**params: Any) -> None:  # Any: see start_run
        settings = start_run(params)
        command(settings=settings, **{k: v for k, v in params.items() if k not in _FIELDS})

    return call


def require_credentials_host(settings: CheckSettings, command: str) -> None:
    """scan and serve take registry names from files and reviews that others write: flag
    credentials must say which registry they are for, or they would go to any host named."""
    if (
        settings.username or os.environ.get("IMAGECHECK_PASSWORD")
    ) and not settings.credentials_for:
        raise UsageError(
            f"{command} with --username needs --credentials-for HOST: the registries it "
            "contacts are named by the files it reads, so credentials must not go to any of them"
        )
