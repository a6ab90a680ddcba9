"""Checking images from Python as ``imagecheck check`` does: :func:`check` and :func:`acheck`.

A run takes the command's steps, in the command's order, so the same input gets the same
answers and the same errors:

1. the options: numbers bounded, registry hosts normalized, the platform parsed (a bad one is
   a :class:`~imagecheck.errors.UsageError`);
2. every reference parsed: any invalid ones are one
   :class:`~imagecheck.errors.InvalidReferencesError` listing them all, and nothing is sent;
3. the credential sources read (:func:`keychain`: a broken file is a
   :class:`~imagecheck.errors.CredentialsError`);
4. every image checked at once, at most ``concurrency`` at a time, within ``deadline``; with
   ``wait``, missing and failing ones again until they appear or ``wait`` has passed.

Every answer, *missing* included, is a :class:`~imagecheck.result.CheckResult`;
:func:`~imagecheck.exitcodes.exit_code` says what the command would exit with. The library
never prints and never exits; ``imagecheck.cli`` is one client of this module.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from imagecheck._blocking import blocking
from imagecheck._deadline import Deadline
from imagecheck._wait import wait_for_images
from imagecheck.authn import Credentials, Keychain, SharedSources, default_keychain
from imagecheck.authn import shared_sources as _shared_sources
from imagecheck.authn.cloud._keychain import CloudAuth
from imagecheck.errors import InvalidReferenceError, InvalidReferencesError, UsageError
from imagecheck.reference import Reference, parse_reference
from imagecheck.registry import ClientOptions, ImageChecker, Platform, Progress, parse_platform
from imagecheck.registry._tls import trusted_context, verifying_context
from imagecheck.result import CheckResult
from imagecheck.routes import load_router

_DEFAULTS = ClientOptions()
DEFAULT_DEADLINE = 60.0
# The default deadline grows by this much per distinct image: 60 s alone cut a check of
# thousands of images, one token each, short, and a run's work grows with its images while
# a slow registry's retries do not.
DEADLINE_PER_IMAGE = 0.05
# What each number may be: never nan, inf or negative, never so large that a timer built from
# it overflows. The command line's options take the same ranges.
DEADLINE_RANGE = (0.1, 86400.0)  # a day
TIMEOUT_RANGE = (0.1, 3600.0)
WAIT_RANGE = (0.0, 7 * 86400.0)  # a week is longer than any pipeline waits for an image
RETRIES_RANGE = (0, 20)
CONCURRENCY_RANGE = (1, 256)

PathText = str | os.PathLike[str]
Mirrors = Mapping[str, str] | Iterable[tuple[str, str]]


def default_deadline(images: int) -> float:
    """The run's deadline when none is given: ``DEFAULT_DEADLINE`` for retries and a slow
    registry, plus ``DEADLINE_PER_IMAGE`` per distinct image (5,000 images: 310 s), within
    ``DEADLINE_RANGE``. The one home of this rule: the command line's ``--deadline`` and
    :func:`acheck` both leave it here."""
    seconds = DEFAULT_DEADLINE + DEADLINE_PER_IMAGE * max(0, images)
    return min(seconds, DEADLINE_RANGE[1])


def registry_host(text: str) -> str:
    """``text`` as the registry host a reference names, e.g. ``index.docker.io`` is
    ``docker.io``; a :class:`UsageError` when ``text`` is not a host (a path, a typo)."""
    try:
        parse_reference(f"{text}/probe")  # for the reason, when text breaks the grammar
        # The whole of text is the registry exactly when both path components stay the
        # repository: "foo" would make docker.io/foo/probe/probe.
        ref = parse_reference(f"{text}/probe/probe")
    except InvalidReferenceError as exc:
        raise UsageError(f"{text!r} is not a registry host: {exc.reason}") from None
    if ref.repository != "probe/probe":
        raise UsageError(f"{text!r} is not a registry host (e.g. mirror.example.com:5000)")
    return ref.registry


def client_options(
    *,
    timeout: float = _DEFAULTS.timeout,
    retries: int = _DEFAULTS.retries,
    concurrency: int = _DEFAULTS.concurrency,
    platform: str | Platform | None = None,
    mirrors: Mirrors = (),
    hosts_dir: PathText | None = None,
    registries_conf: PathText | None = None,
    insecure_registries: Iterable[str] = (),
    ca_files: Iterable[PathText] = (),
    denied_as_missing: bool = False,
    deep: bool = False,
) -> ClientOptions:
    """How to reach registries, checked: see :func:`acheck` for each option."""
    _check_range("timeout", timeout, TIMEOUT_RANGE)
    _check_range("retries", retries, RETRIES_RANGE, whole=True)
    _check_range("concurrency", concurrency, CONCURRENCY_RANGE, whole=True)
    pairs = list(mirrors.items() if isinstance(mirrors, Mapping) else mirrors)
    router = load_router(hosts_dir=hosts_dir, registries_conf=registries_conf, mirrors=bool(pairs))
    return ClientOptions(
        timeout=float(timeout),
        retries=retries,
        concurrency=concurrency,
        insecure_registries=frozenset(insecure_registries),
        ca_files=tuple(Path(p) for p in ca_files),
        mirrors=tuple((registry_host(source), registry_host(m)) for source, m in pairs),
        denied_as_missing=denied_as_missing,
        platform=parse_platform(platform) if isinstance(platform, str) else platform,
        deep=deep,
        router=router,
    )


def keychain(
    *,
    credentials: Credentials | None = None,
    credentials_for: Iterable[str] = (),
    docker_config: PathText | None = None,
    pull_secrets: Iterable[PathText] = (),
    pod_pull_secrets: Sequence[tuple[str, str]] = (),
    credential_providers: tuple[PathText, PathText] | None = None,
    cloud_auth: CloudAuth = "auto",
    ca_files: Iterable[PathText] = (),
    shared: SharedSources | None = None,
    env: Mapping[str, str] | None = None,
) -> Keychain:
    """The credential sources, in their precedence (``authn/_default.py``): ``credentials``
    (for the ``credentials_for`` registries only, when named), pull secrets (``pull_secrets``,
    ``IMAGECHECK_PULL_SECRETS``, ``pod_pull_secrets``: (.dockerconfigjson text, source)
    pairs), ``DOCKER_AUTH_CONFIG``, ``docker_config`` (or ``$DOCKER_CONFIG``, ``~/.docker``),
    podman's auth.json, the shared sources (``shared``; else made from
    ``credential_providers``, ``cloud_auth``, ``ca_files``: :func:`shared_sources`), anonymous.
    ``env`` replaces ``os.environ``. A broken file is a ``CredentialsError`` now."""
    if shared is None:
        shared = shared_sources(
            credential_providers=credential_providers,
            cloud_auth=cloud_auth,
            ca_files=ca_files,
            env=env,
        )
    return default_keychain(
        static=credentials,
        static_registries=[registry_host(h) for h in credentials_for],
        docker_config=None if docker_config is None else os.fspath(docker_config),
        pull_secrets=[os.fspath(p) for p in pull_secrets],
        pod_pull_secrets=pod_pull_secrets,
        shared=shared,
        env=None if env is None else dict(env),
    )


def shared_sources(
    *,
    credential_providers: tuple[PathText, PathText] | None = None,
    cloud_auth: CloudAuth = "auto",
    ca_files: Iterable[PathText] = (),
    env: Mapping[str, str] | None = None,
) -> SharedSources:
    """The process's own credential sources, to build once and share between keychains: the
    kubelet's credential provider plugins (``credential_providers``: its config file and
    plugin bin dir) and the cloud identities (``cloud_auth``), whose endpoints are trusted as
    registries are (``ca_files``, then ``SSL_CERT_FILE``/the system store)."""
    paths = tuple(Path(p) for p in ca_files)
    verifying_context(paths)  # a bad CA file is a usage error now, not at the first cloud call
    return _shared_sources(
        credential_providers=None
        if credential_providers is None
        else (os.fspath(credential_providers[0]), os.fspath(credential_providers[1])),
        cloud_auth=cloud_auth,
        tls=functools.partial(trusted_context, paths),
        env=None if env is None else dict(env),
    )


def parse_each(
    images: Iterable[Reference | str],
) -> tuple[list[tuple[str, Reference]], list[InvalidReferenceError]]:
    """Every image parsed once, in order: the valid ones as ``(text as given, reference)`` (a
    ``Reference`` given is its own text), and the error of each invalid one."""
    parsed: list[tuple[str, Reference]] = []
    invalid: list[InvalidReferenceError] = []
    for image in images:
        if isinstance(image, Reference):
            parsed.append((str(image), image))
            continue
        try:
            parsed.append((image, parse_reference(image)))
        except InvalidReferenceError as exc:
            invalid.append(exc)
    return parsed, invalid


def parse_all(images: Iterable[Reference | str]) -> list[tuple[str, Reference]]:
    """Every image parsed, as ``(text as given, reference)``; an
    :class:`InvalidReferencesError` naming every invalid one otherwise."""
    parsed, invalid = parse_each(images)
    if invalid:
        raise InvalidReferencesError(invalid)
    return parsed


async def acheck(
    images: Iterable[Reference | str],
    *,
    deadline: float | None = None,
    wait: float | None = None,
    progress: Callable[[str], None] | None = None,
    checked: Progress | None = None,
    timeout: float = _DEFAULTS.timeout,
    retries: int = _DEFAULTS.retries,
    concurrency: int = _DEFAULTS.concurrency,
    platform: str | Platform | None = None,
    mirrors: Mirrors = (),
    hosts_dir: PathText | None = None,
    registries_conf: PathText | None = None,
    insecure_registries: Iterable[str] = (),
    ca_files: Iterable[PathText] = (),
    denied_as_missing: bool = False,
    deep: bool = False,
    credentials: Credentials | None = None,
    credentials_for: Iterable[str] = (),
    docker_config: PathText | None = None,
    pull_secrets: Iterable[PathText] = (),
    pod_pull_secrets: Sequence[tuple[str, str]] = (),
    cloud_auth: CloudAuth = "auto",
    env: Mapping[str, str] | None = None,
) -> list[CheckResult]:
    """Check that each image exists in its registry; one result per image, in input order.

    - ``deadline``: seconds for the whole run, retries included (for each round with
      ``wait``); checks still running then are ``Status.ERROR`` results. Not given: 60 s
      plus 50 ms per distinct image (:func:`default_deadline`).
    - ``wait``: seconds to keep asking again for missing and failing images (pauses doubling
      from 1 s to 15 s); ``progress`` is called with a line before each pause.
    - ``checked``: called with (checks ended, checks in all) as each distinct image's check
      ends, answered or cut short (each round, with ``wait``): for a progress counter.
    - ``timeout``, ``retries``: seconds for one attempt; retries of a transient failure.
    - ``concurrency``: images checked at once.
    - ``platform``: ``"linux/arm64"``, ``"auto"`` or a ``Platform``: the image must offer it.
    - ``mirrors``: ``(registry, mirror)`` pairs (or a mapping), asked mirror first, in order.
    - ``hosts_dir``, ``registries_conf``: the node's registry configuration (containerd's
      ``hosts.toml`` directory, or CRI-O's ``registries.conf``): ask the hosts it names, in
      the runtime's order, with its TLS settings; the result names the host that answered.
    - ``insecure_registries``: hosts allowed plain HTTP and unverified TLS (and token realm
      hosts allowed credentials over plain HTTP).
    - ``ca_files``: extra PEM CA files to trust (``SSL_CERT_FILE``/``SSL_CERT_DIR`` too).
    - ``denied_as_missing``: a denial after a successful login counts as missing.
    - ``deep``: the platform's manifest (``platform``'s, else this machine's) and its config
      and layer blobs must be there too (one ``HEAD`` per blob).
    - ``credentials`` ... ``env``: the credential sources, see :func:`keychain`;
      ``cloud_auth``: ``"auto"`` gets a credential for a cloud's registry from the cloud
      identity the process has (EKS, GKE, AKS workload identity), ``"off"`` never does.

    Raises :class:`~imagecheck.errors.UsageError` for bad options or an unusable credential
    source, :class:`~imagecheck.errors.InvalidReferencesError` for invalid references, both
    before anything is sent. Registry trouble is never raised: it is a result.
    """
    if deadline is not None:
        _check_range("deadline", deadline, DEADLINE_RANGE)
    if wait is not None:
        _check_range("wait", wait, WAIT_RANGE)
    options = client_options(
        timeout=timeout,
        retries=retries,
        concurrency=concurrency,
        platform=platform,
        mirrors=mirrors,
        hosts_dir=hosts_dir,
        registries_conf=registries_conf,
        insecure_registries=insecure_registries,
        ca_files=ca_files,
        denied_as_missing=denied_as_missing,
        deep=deep,
    )
    items = parse_all(images)
    chain = keychain(
        credentials=credentials,
        credentials_for=credentials_for,
        docker_config=docker_config,
        pull_secrets=pull_secrets,
        pod_pull_secrets=pod_pull_secrets,
        cloud_auth=cloud_auth,
        ca_files=ca_files,
        env=env,
    )
    return await check_parsed(
        items, options, chain, deadline=deadline, wait=wait, progress=progress, checked=checked
    )


async def check_parsed(
    items: Sequence[tuple[str, Reference]],
    options: ClientOptions,
    chain: Keychain,
    *,
    deadline: float | None = None,
    wait: float | None = None,
    progress: Callable[[str], None] | None = None,
    checked: Progress | None = None,
) -> list[CheckResult]:
    """:func:`acheck`'s last step, for a caller that has its steps' values already: references
    parsed (:func:`parse_each`), options checked (:func:`client_options`), credential sources
    read (:func:`keychain`). ``deadline`` and ``wait`` as :func:`acheck` takes them."""
    if deadline is None:
        deadline = default_deadline(len({ref for _, ref in items}))
    async with ImageChecker(options, chain) as checker:
        if wait is None:
            return await checker.check_many(items, Deadline.after(deadline), checked=checked)
        # The last round starts when the wait ends, and still gets its own deadline.
        return await wait_for_images(
            checker,
            items,
            until=Deadline.after(wait),
            round_seconds=deadline,
            progress=progress or _ignore,
            checked=checked,
        )


# check(images, **options) -> list[CheckResult]: acheck's signature, blocking.
check = blocking(acheck, "check")
"""Check that each image exists in its registry: :func:`acheck`, with the same options, run to
its end on an event loop of its own (inside a running loop, ``await acheck(...)`` instead)."""


def _check_range(
    name: str, value: float, bounds: tuple[float, float], *, whole: bool = False
) -> None:
    low, high = bounds
    kinds: tuple[type, ...] = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise UsageError(f"{name} must be a {'whole ' if whole else ''}number: {value!r}")
    if not (math.isfinite(value) and low <= value <= high):
        raise UsageError(f"{name} must be between {low:g} and {high:g}: {value!r}")


def _ignore(_: str) -> None:
    pass
