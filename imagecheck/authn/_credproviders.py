"""Credentials from the kubelet's credential provider plugins (ecr-credential-provider,
gcp's, acr-credential-provider), run as the kubelet runs them (kubernetes/kubernetes
``pkg/credentialprovider/plugin/plugin.go``):

1. the providers whose ``matchImages`` match the image (``URLsMatchStr``, ``_urlmatch.py``)
   are asked, in the config's order, unless an answer is cached;
2. each runs as ``<bin dir>/<name> <args...>`` with the node's environment plus the config's
   ``env``, a ``CredentialProviderRequest`` (``{"apiVersion", "kind", "image"}``) on stdin;
3. it prints a ``CredentialProviderResponse``: ``cacheKeyType`` (``Image``, ``Registry`` or
   ``Global``: which images the answer is good for), ``cacheDuration`` (else the config's
   ``defaultCacheDuration``; 0 caches nothing) and ``auth``, a map from match keys to
   ``{username, password}``;
4. every answer's ``auth`` entries go into one keyring, and those whose key matches the image
   are offered most specific first (``BasicDockerKeyring.Lookup``).

The image a plugin is asked about is the repository name (``docker.io/library/nginx``), as
the kubelet asks with the pull's ``repoToPull``. The process is bounded by the credential
helpers' runner (``_helperproc.py``): a time limit inside the deadline, capped output,
killed and reaped. Where the kubelet logs a failing plugin and pulls without its credentials,
this keychain raises a one-line :class:`CredentialsError` naming it: a check has no node log,
and a silent anonymous pull would be reported as a denial with no cause.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from imagecheck._deadline import Deadline
from imagecheck._expiring import MISS, Expiring
from imagecheck._text import printable
from imagecheck.authn._configfiles import parse_json_object
from imagecheck.authn._credentials import Credentials
from imagecheck.authn._credproviderconfig import Provider, load_provider_config, parse_go_duration
from imagecheck.authn._helperproc import run_bounded, run_capped
from imagecheck.authn._urlmatch import keyring_lookup, urls_match
from imagecheck.errors import CredentialsError, DeadlineExceeded
from imagecheck.reference import Reference

# The kubelet's catch-all limit for one plugin run.
DEFAULT_PLUGIN_TIMEOUT = 60.0
# Cached answers kept: a webhook meets images named by others.
MAX_CACHED = 1024
CACHE_KEY_TYPES = ("Image", "Registry", "Global")
_MAX_SHOWN = 200

_Auth = tuple[tuple[str, Credentials], ...]


class CredentialProviders:
    """The kubelet's credential provider plugins as a keychain, with the kubelet's cache:
    each answer is kept for its ``cacheKeyType`` (the image, its registry, or every image)
    and duration; at most ``max_cached`` answers, the least recently used dropped first.
    Runs for the same (provider, image) that overlap share one process."""

    def __init__(
        self,
        providers: Sequence[Provider],
        plugins: Mapping[str, Path],
        *,
        timeout: float = DEFAULT_PLUGIN_TIMEOUT,
        max_cached: int = MAX_CACHED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.providers = tuple(providers)
        self._plugins = dict(plugins)
        self.timeout = timeout
        self._cache: Expiring[tuple[str, str, str], _Auth] = Expiring(max_cached, clock)
        self._inflight: dict[tuple[str, str], asyncio.Task[_Auth]] = {}

    @classmethod
    def from_files(cls, config: Path, bin_dir: Path, **kwargs: Any) -> CredentialProviders:
        """Read and check ``config``; find each provider's executable in ``bin_dir`` now, as
        the kubelet does when it starts."""
        providers = load_provider_config(config)
        plugins = {p.name: plugin_path(bin_dir, p.name) for p in providers}
        return cls(providers, plugins, **kwargs)

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        image = reference.name
        entries: list[tuple[str, Credentials]] = []
        for provider in self._matching(image):
            cached = self._cached(provider, image)
            entries.extend(cached if cached is not None else self._run_sync(provider, image))
        return tuple(keyring_lookup(entries, image))

    async def aresolve(self, reference: Reference, deadline: Deadline) -> Sequence[Credentials]:
        image = reference.name
        entries: list[tuple[str, Credentials]] = []
        for provider in self._matching(image):
            cached = self._cached(provider, image)
            entries.extend(
                cached if cached is not None else await self._ask(provider, image, deadline)
            )
        return tuple(keyring_lookup(entries, image))

    def _matching(self, image: str) -> list[Provider]:
        return [p for p in self.providers if any(urls_match(m, image) for m in p.match_images)]

    # -- the cache ----------------------------------------------------------------------------

    def _cached(self, provider: Provider, image: str) -> _Auth | None:
        """``getCachedCredentials``: by image, then registry, then global."""
        for key in _cache_keys(provider.name, image):
            hit = self._cache.get(key)
            if hit is not MISS:
                return hit
        return None

    def _store(self, provider: Provider, image: str, text: str) -> _Auth:
        key_type, duration, auth = parse_response(provider, text)
        if duration is None:
            duration = provider.default_cache_duration
        if duration > 0:
            key = _cache_keys(provider.name, image)[CACHE_KEY_TYPES.index(key_type)]
            self._cache.put(key, auth, duration)
        return auth

    # -- running a plugin ---------------------------------------------------------------------

    def _run_sync(self, provider: Provider, image: str) -> _Auth:
        what = _what(provider)
        argv, stdin, env = self._command(provider, image)
        try:
            proc = run_capped(argv, stdin, self.timeout, what, env)
        except subprocess.TimeoutExpired:
            raise CredentialsError(f"{what} did not answer within {self.timeout:g}s") from None
        except OSError as exc:
            raise CredentialsError(f"{what} could not run: {exc.strerror}") from None
        _check_exit(what, proc.returncode, proc.stderr)
        return self._store(provider, image, proc.stdout)

    async def _ask(self, provider: Provider, image: str, deadline: Deadline) -> _Auth:
        key = (provider.name, image)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._run_async(provider, image, deadline))
            self._inflight[key] = task
            task.add_done_callback(lambda _: self._inflight.pop(key, None))
        # shield: a check cancelled at its deadline must not kill the run others await.
        return await asyncio.shield(task)

    async def _run_async(self, provider: Provider, image: str, deadline: Deadline) -> _Auth:
        what = _what(provider)
        left = deadline.remaining()
        if left <= 0:
            raise DeadlineExceeded(f"{what} not run: the deadline has passed")
        timeout = min(self.timeout, left)
        argv, stdin, env = self._command(provider, image)
        try:
            code, out, err = await run_bounded(
                argv, stdin.encode(), timeout=timeout, what=what, env=env
            )
        except TimeoutError:
            if timeout < self.timeout:
                raise DeadlineExceeded(
                    f"{what} did not answer before the deadline ({left:.1f}s left)"
                ) from None
            raise CredentialsError(f"{what} did not answer within {timeout:g}s") from None
        _check_exit(what, code, err.decode("utf-8", "replace"))
        return self._store(provider, image, out.decode("utf-8", "replace"))

    def _command(self, provider: Provider, image: str) -> tuple[list[str], str, dict[str, str]]:
        request = {
            "apiVersion": provider.api_version,
            "kind": "CredentialProviderRequest",
            "image": image,
        }
        # The node's environment, the config's env over it (plugin.go mergeEnvVars).
        env = {**os.environ, **dict(provider.env)}
        argv = [str(self._plugins[provider.name]), *provider.args]
        return argv, json.dumps(request), env


def plugin_path(bin_dir: Path, name: str) -> Path:
    """``bin_dir/name`` resolved: a regular, executable file inside ``bin_dir`` (a symlink
    may point elsewhere inside it, never out of it)."""
    what = f"credential provider plugin {name}"
    try:
        root = bin_dir.resolve(strict=True)
    except OSError:
        raise CredentialsError(f"credential provider bin dir {bin_dir} does not exist") from None
    if not root.is_dir():
        raise CredentialsError(f"credential provider bin dir {bin_dir} is not a directory")
    try:
        real = (root / name).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, or a symlink loop
        raise CredentialsError(f"{what}: {bin_dir / name} does not exist") from None
    if real.parent != root and root not in real.parents:
        raise CredentialsError(f"{what}: {bin_dir / name} leads out of {bin_dir}")
    if not real.is_file():
        raise CredentialsError(f"{what}: {bin_dir / name} is not a regular file")
    if not os.access(real, os.X_OK):
        raise CredentialsError(f"{what}: {bin_dir / name} is not executable")
    return real


def parse_response(provider: Provider, text: str) -> tuple[str, float | None, _Auth]:
    """A ``CredentialProviderResponse``: ``(cacheKeyType, cacheDuration or None, auth)``.
    Errors never quote the output, which may hold the secret."""
    what = _what(provider)
    try:
        data = parse_json_object(text, what)
    except CredentialsError:
        raise CredentialsError(f"{what} printed something that is not a JSON object") from None
    if data.get("apiVersion") != provider.api_version:
        raise CredentialsError(
            f"{what} answered apiVersion {_shown(data.get('apiVersion'))}, "
            f"not {provider.api_version}"
        )
    if data.get("kind") != "CredentialProviderResponse":
        raise CredentialsError(f"{what} answered kind {_shown(data.get('kind'))}")
    key_type = data.get("cacheKeyType")
    if key_type not in CACHE_KEY_TYPES:
        raise CredentialsError(
            f"{what} answered cacheKeyType {_shown(key_type)}, not Image, Registry or Global"
        )
    return key_type, _duration(data.get("cacheDuration"), what), _auth(data.get("auth"), what)


def _duration(value: Any, what: str) -> float | None:
    if value is None:
        return None
    try:
        seconds = parse_go_duration(value) if isinstance(value, str) else -1.0
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        raise CredentialsError(f"{what} answered a cacheDuration that is not a duration >= 0")
    return seconds


def _auth(value: Any, what: str) -> _Auth:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise CredentialsError(f"{what} answered an auth that is not an object")
    entries: list[tuple[str, Credentials]] = []
    for key, entry in value.items():
        username = entry.get("username") or "" if isinstance(entry, dict) else None
        password = entry.get("password") or "" if isinstance(entry, dict) else None
        if not isinstance(username, str) or not isinstance(password, str):
            raise CredentialsError(f"{what} answered an auth entry without username/password")
        entries.append((key, Credentials(username=username, password=password, source=what)))
    return tuple(entries)


def _check_exit(what: str, code: int, stderr: str) -> None:
    if code == 0:
        return
    # The exit status and the first line of stderr; never stdout, which may hold a secret.
    said = stderr.strip().splitlines()
    first = printable(said[0], _MAX_SHOWN) if said else ""
    raise CredentialsError(f"{what} failed (exit {code})" + (f": {first}" if first else ""))


def _cache_keys(name: str, image: str) -> tuple[tuple[str, str, str], ...]:
    """The keys an answer for ``image`` is cached under, per cacheKeyType (plugin.go's
    ``parseRegistry``: the registry is what comes before the first ``/``)."""
    return (
        (name, "Image", image),
        (name, "Registry", image.split("/", 1)[0]),
        (name, "Global", ""),
    )


def _what(provider: Provider) -> str:
    return f"credential provider plugin {provider.name}"


def _shown(value: Any) -> str:
    return repr(printable(str(value), 80))
