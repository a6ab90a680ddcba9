"""The kubelet's credential provider plugins as tests need them: a real executable in a bin
dir that follows the exec plugin protocol (:func:`install_plugin`), and the
``CredentialProviderConfig`` that names it (:func:`write_provider_config`)."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

PLUGIN_API = "credentialprovider.kubelet.k8s.io/v1"

# Reads the CredentialProviderRequest from stdin, logs what it was given (one JSON line per
# run, beside itself), then runs the body with `request` bound.
_PROLOGUE = """\
import json, os, sys, time
request = json.load(sys.stdin)
with open(__file__ + ".log", "a") as log:
    log.write(json.dumps({"argv": sys.argv[1:], "request": request,
                          "env": os.environ.get("PLUGIN_MARK", "")}) + "\\n")
"""


def answer(
    auth: dict[str, tuple[str, str]],
    *,
    cache_key_type: str = "Registry",
    cache_duration: str | None = None,
    api_version: str = PLUGIN_API,
) -> str:
    """A body that prints a CredentialProviderResponse with ``auth`` (key -> user, password)."""
    response: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": "CredentialProviderResponse",
        "cacheKeyType": cache_key_type,
        "auth": {k: {"username": u, "password": p} for k, (u, p) in auth.items()},
    }
    if cache_duration is not None:
        response["cacheDuration"] = cache_duration
    return f"print(json.dumps({response!r}))"


def install_plugin(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / name
    script.write_text(f"#!{sys.executable}\n{_PROLOGUE}{body}\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def plugin_runs(script: Path) -> list[dict[str, Any]]:
    """What each run of the plugin was given, in order."""
    log = script.with_name(script.name + ".log")
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def provider(name: str, *match_images: str, **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "matchImages": list(match_images),
        "defaultCacheDuration": "12h",
        "apiVersion": PLUGIN_API,
    }
    entry.update(fields)
    return entry


def write_provider_config(path: Path, *providers: dict[str, Any]) -> Path:
    """A CredentialProviderConfig (JSON, which is YAML too) listing ``providers``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1",
        "kind": "CredentialProviderConfig",
        "providers": list(providers),
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    return path
