"""The kubelet's ``CredentialProviderConfig`` (``--image-credential-provider-config``), read
and checked as the kubelet checks it (kubernetes/kubernetes
``pkg/credentialprovider/plugin/config.go``, ``validateCredentialProviderConfig``).

The file is YAML or JSON::

    apiVersion: kubelet.config.k8s.io/v1
    kind: CredentialProviderConfig
    providers:
      - name: ecr-credential-provider        # the executable in the bin dir
        matchImages: ["*.dkr.ecr.*.amazonaws.com"]
        defaultCacheDuration: "12h"          # a Go duration
        apiVersion: credentialprovider.kubelet.k8s.io/v1
        args: [get-credentials]              # optional
        env: [{name: AWS_PROFILE, value: x}] # optional

A directory is read as the kubelet reads one: its ``*.json``, ``*.yaml``, ``*.yml`` files in
lexical order, their providers merged. Any problem is one :class:`CredentialsError` naming
the file and the field; nothing is guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagecheck._files import MAX_CONFIG_FILE, read_regular_file
from imagecheck._text import printable
from imagecheck.authn._urlmatch import BadURL, parse_schemeless_url
from imagecheck.errors import CredentialsError

CONFIG_API_VERSIONS = frozenset(f"kubelet.config.k8s.io/{v}" for v in ("v1", "v1beta1", "v1alpha1"))
# The kubelet's apiVersions map (plugin.go): what a provider may speak.
PLUGIN_API_VERSIONS = frozenset(
    f"credentialprovider.kubelet.k8s.io/{v}" for v in ("v1", "v1beta1", "v1alpha1")
)
_SHOWN = 80  # of a value quoted in an error
_CONFIG_SUFFIXES = (".json", ".yaml", ".yml")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}
_UNITS["h"] = 3600.0
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


@dataclass(frozen=True, slots=True)
class Provider:
    """One ``providers`` entry. ``env`` values are the config's, never shown."""

    name: str
    api_version: str
    match_images: tuple[str, ...]
    default_cache_duration: float  # seconds
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:  # env values may be secrets
        return f"Provider(name={self.name!r}, match_images={self.match_images!r})"


def parse_go_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` (``"12h"``, ``"1h30m"``, ``"0"``) in seconds; ``ValueError``
    otherwise."""
    rest, sign = text, 1.0
    if rest[:1] in ("+", "-"):
        sign, rest = (-1.0 if rest[0] == "-" else 1.0), rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(text)
    total, pos = 0.0, 0
    while pos < len(rest):
        match = _DURATION_PART.match(rest, pos)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(text)
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return sign * total


def load_provider_config(path: Path) -> tuple[Provider, ...]:
    """The providers of the config file (or directory) at ``path``, checked."""
    files = _config_files(path)
    providers: list[Provider] = []
    names: set[str] = set()
    for file in files:
        for provider in _parse_file(file):
            if provider.name in names:  # the kubelet refuses duplicates across files too
                raise CredentialsError(
                    f"{file}: providers.name: duplicate provider name {provider.name!r}"
                )
            names.add(provider.name)
            providers.append(provider)
    return tuple(providers)


def _config_files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    files = sorted(p for p in path.iterdir() if p.suffix in _CONFIG_SUFFIXES and not p.is_dir())
    if not files:
        raise CredentialsError(f"credential provider config {path}: no *.json/*.yaml files in it")
    return files


def _parse_file(path: Path) -> list[Provider]:
    # Imported here: check without this option must not load PyYAML (test_lazy_imports).
    import yaml  # noqa: PLC0415

    raw = read_regular_file(
        path, limit=MAX_CONFIG_FILE, what="credential provider config", error=CredentialsError
    )
    try:
        data = yaml.safe_load(raw)
    except (yaml.YAMLError, RecursionError):
        raise CredentialsError(f"{path}: not valid YAML or JSON") from None
    if not isinstance(data, dict):
        raise CredentialsError(f"{path}: expected a CredentialProviderConfig object")
    where = str(path)
    if data.get("kind") != "CredentialProviderConfig":
        raise CredentialsError(f"{where}: kind: must be CredentialProviderConfig")
    if data.get("apiVersion") not in CONFIG_API_VERSIONS:
        raise CredentialsError(
            f"{where}: apiVersion: {_shown(data.get('apiVersion'))} is not one of "
            + ", ".join(sorted(CONFIG_API_VERSIONS))
        )
    items = data.get("providers")
    if not isinstance(items, list) or not items:
        raise CredentialsError(f"{where}: providers: at least 1 provider is required")
    providers = [_provider(item, f"{where}: providers[{i}]") for i, item in enumerate(items)]
    seen: set[str] = set()
    for i, provider in enumerate(providers):
        if provider.name in seen:
            raise CredentialsError(
                f"{where}: providers[{i}].name: duplicate provider name {provider.name!r}"
            )
        seen.add(provider.name)
    return providers


def _provider(item: Any, where: str) -> Provider:
    if not isinstance(item, dict):
        raise CredentialsError(f"{where}: expected an object")
    _no_token_attributes(item, where)
    return Provider(
        name=_name(item.get("name"), where),
        api_version=_api_version(item.get("apiVersion"), where),
        match_images=_match_images(item.get("matchImages"), where),
        default_cache_duration=_cache_duration(item.get("defaultCacheDuration"), where),
        args=tuple(_strings(item.get("args"), f"{where}.args")),
        env=_env(item.get("env"), f"{where}.env"),
    )


def _no_token_attributes(item: dict[str, Any], where: str) -> None:
    # Service-account-token mode: the kubelet mints a token for the pod being started. A
    # component on the node has no such pod, so it cannot do what the kubelet does.
    if item.get("tokenAttributes") is not None:
        raise CredentialsError(
            f"{where}.tokenAttributes: service account token providers are not supported "
            "(the kubelet mints that token per pod)"
        )


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise CredentialsError(f"{where}.name: required")
    if "/" in value or " " in value or value in (".", ".."):
        raise CredentialsError(
            f"{where}.name: {_shown(value)}: must not contain '/' or spaces, nor be '.' or '..'"
        )
    return value


def _api_version(value: Any, where: str) -> str:
    if not value:
        raise CredentialsError(f"{where}.apiVersion: required")
    if value not in PLUGIN_API_VERSIONS:
        raise CredentialsError(
            f"{where}.apiVersion: {_shown(value)} is not one of "
            + ", ".join(sorted(PLUGIN_API_VERSIONS))
        )
    return str(value)


def _match_images(value: Any, where: str) -> tuple[str, ...]:
    images = _strings(value, f"{where}.matchImages")
    if not images:
        raise CredentialsError(f"{where}.matchImages: at least 1 item is required")
    for image in images:
        try:
            parse_schemeless_url(image)
        except BadURL as exc:
            raise CredentialsError(
                f"{where}.matchImages: {_shown(image)} is invalid: {exc}"
            ) from None
    return tuple(images)


def _cache_duration(value: Any, where: str) -> float:
    if value is None:
        raise CredentialsError(f"{where}.defaultCacheDuration: required")
    try:
        seconds = parse_go_duration(value) if isinstance(value, str) else -1.0
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        raise CredentialsError(
            f"{where}.defaultCacheDuration: {_shown(value)} is not a duration >= 0 "
            "(as Go writes one: 12h, 90m, 0)"
        )
    return seconds


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CredentialsError(f"{where}: must be a list of strings")
    return list(value)


def _env(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise CredentialsError(f"{where}: must be a list of {{name, value}}")
    pairs: list[tuple[str, str]] = []
    for i, entry in enumerate(value):
        name = entry.get("name") if isinstance(entry, dict) else None
        text = entry.get("value", "") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name or "=" in name or not isinstance(text, str):
            raise CredentialsError(f"{where}[{i}]: must be {{name, value}} strings")
        pairs.append((name, text))
    return tuple(pairs)


def _shown(value: Any) -> str:
    return repr(printable(str(value), _SHOWN))
