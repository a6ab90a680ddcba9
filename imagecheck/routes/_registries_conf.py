"""``registries.conf`` (containers-registries.conf(5)) as CRI-O, podman and skopeo read it:
the checks, defaults and merging of containers/image v5.23 ``pkg/sysregistriesv2``
(``postProcessRegistries``, ``loadConfigFile``, ``updateWithConfigurationFrom``), the version
Debian bookworm's skopeo 1.9 is built with.

* ``location`` and ``prefix`` lose trailing slashes; a scheme (``https://``) is an error; a
  missing ``prefix`` is the ``location``; a missing ``location`` needs a ``*.example.com``
  prefix (the reference is then used as written).
* Two tables for one location may not differ in ``insecure`` or ``blocked``; of two tables
  with one prefix the first counts. Tables are kept sorted by prefix.
* ``pull-from-mirror`` (``all``, ``digest-only``, ``tag-only``) only on a mirror, and not
  with the registry's ``mirror-by-digest-only``.
* ``[aliases]``: a short name (no registry, tag or digest) to a name with a registry (no tag
  or digest); ``""`` erases an alias set earlier.
* Drop-ins: every ``*.conf`` in the drop-in directory, by name, read after the file, must be
  version 2; a drop-in's ``[[registry]]`` replaces the table of the same prefix, its
  ``unqualified-search-registries`` and ``short-name-mode`` replace the earlier ones when set,
  its aliases are added.

The version 1 format is converted as containers/image converts it; mixing the versions in one
file, or version 1 in a drop-in, is an error there and here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from imagecheck.errors import ConfigFileError
from imagecheck.reference import Reference
from imagecheck.routes._registries_file import (
    Invalid,
    RawFile,
    RawMirror,
    RawRegistry,
    read_file,
)
from imagecheck.routes._short_names import alias_target, short_name_problem

ShortNameMode = Literal["enforcing", "permissive", "disabled"]
PULL_FROM_MIRROR = ("", "all", "digest-only", "tag-only")
MAX_DROP_INS = 100

_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
# docker/reference DomainRegexp (v5.23): what unqualified-search-registries may hold.
_DOMAIN = re.compile(rf"{_COMPONENT}(?:\.{_COMPONENT})*(?::[0-9]+)?")


@dataclass(frozen=True, slots=True)
class Mirror:
    location: str  # as written: containers/image checks a trimmed copy but keeps this one
    insecure: bool = False
    pull_from_mirror: str = ""


@dataclass(frozen=True, slots=True)
class Registry:
    """One ``[[registry]]`` table after the checks: ``prefix`` set, slashes trimmed."""

    prefix: str
    location: str
    insecure: bool = False
    blocked: bool = False
    mirror_by_digest_only: bool = False
    mirrors: tuple[Mirror, ...] = ()
    origin: str = ""  # the file it came from, for messages


@dataclass(frozen=True, slots=True)
class Alias:
    target: Reference | None  # None: erased ("")
    origin: str


@dataclass(frozen=True, slots=True)
class RegistriesConf:
    """A file and its drop-ins, merged."""

    registries: tuple[Registry, ...] = ()
    search: tuple[str, ...] = ()
    search_origin: str = ""
    mode: ShortNameMode = "permissive"
    aliases: dict[str, Alias] = field(default_factory=dict)
    source: str = ""  # the files read, for messages


def load_conf(path: Path, drop_ins: Path | None) -> RegistriesConf:
    """Read ``path`` and the ``*.conf`` files in ``drop_ins`` (when it is a directory)."""
    files = [path, *_drop_in_files(drop_ins)]
    merged = _checked(read_file(path), drop_in=False)
    for drop_in in files[1:]:
        merged = _merge(merged, _checked(read_file(drop_in), drop_in=True))
    shown = str(path) if len(files) == 1 else f"{path} and {len(files) - 1} drop-in(s)"
    return RegistriesConf(
        registries=merged.registries,
        search=merged.search or (),
        search_origin=merged.search_origin,
        mode=merged.mode or "permissive",
        aliases=merged.aliases,
        source=shown,
    )


def _drop_in_files(directory: Path | None) -> list[Path]:
    """containers/image's ``dropInConfigs``: the directory's ``*.conf`` entries in name order,
    no subdirectories; a missing directory is no drop-ins."""
    if directory is None:
        return []
    try:
        with os.scandir(directory) as entries:
            names: list[str] = []
            for entry in entries:
                if len(names) >= MAX_DROP_INS:
                    raise ConfigFileError(directory, f"more than {MAX_DROP_INS} *.conf files")
                if entry.name.endswith(".conf") and not entry.is_dir(follow_symlinks=False):
                    names.append(entry.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise ConfigFileError(directory, f"cannot read the directory: {exc.strerror}") from None
    return [directory / name for name in sorted(names)]


@dataclass(frozen=True, slots=True)
class _Partial:
    """One file's settings, or several merged; None: not set."""

    registries: tuple[Registry, ...]
    search: tuple[str, ...] | None
    search_origin: str
    mode: ShortNameMode | None
    aliases: dict[str, Alias]


def _checked(raw: RawFile, *, drop_in: bool) -> _Partial:
    try:
        return _check(raw, drop_in=drop_in)
    except Invalid as exc:
        raise ConfigFileError(raw.path, exc.reason, line=exc.line) from None


def _check(raw: RawFile, *, drop_in: bool) -> _Partial:
    registries, search = raw.registries, raw.search
    if raw.v1:
        if drop_in:
            raise Invalid("registry must be in v2 format but is in v1")
        if raw.v2:
            raise Invalid("mixing sysregistry v1/v2 is not supported")
        registries, search = _from_v1(raw), raw.v1_search
    origin = str(raw.path)
    checked = _unique_sorted([_registry(entry, origin) for entry in registries])
    _check_conflicts(registries)
    mode: ShortNameMode | None = None
    if raw.mode:
        if raw.mode not in ("enforcing", "permissive", "disabled"):
            raise Invalid(f"invalid short-name mode: {raw.mode!r}", raw.mode_line)
        mode = raw.mode  # type: ignore[assignment]
    for entry in checked:
        if entry.prefix.startswith("*.") and any(c in entry.prefix for c in "/@:"):
            raise Invalid(
                "Wildcarded prefix should be in the format: *.example.com. "
                f"Current prefix {entry.prefix!r} is incorrectly formatted"
            )
    return _Partial(
        registries=checked,
        search=None if search is None else _search(search, raw.search_line),
        search_origin=origin,
        mode=mode,
        aliases={name: _alias(name, value, origin, line) for name, value, line in raw.aliases},
    )


def _from_v1(raw: RawFile) -> tuple[RawRegistry, ...]:
    """``V1RegistriesConf.ConvertToV2``: one table per location, blocked and insecure."""
    blocked = {_location(location) for location in raw.v1_block}
    insecure = {_location(location) for location in raw.v1_insecure}
    return tuple(
        RawRegistry(
            prefix=location,
            location=location,
            insecure=location in insecure,
            blocked=location in blocked,
            mirror_by_digest_only=False,
            pull_from_mirror="",
            mirrors=(),
            line=None,
        )
        for location in sorted(blocked | insecure)
    )


def _location(text: str, line: int | None = None) -> str:
    """``parseLocation``: trailing slashes off, no scheme."""
    trimmed = text.rstrip("/")
    if trimmed.startswith(("http://", "https://")):
        raise Invalid(f"invalid location {text!r}: URI schemes are not supported", line)
    return trimmed


def _registry(raw: RawRegistry, origin: str) -> Registry:
    line = raw.line
    location = _location(raw.location, line)
    if not raw.prefix:
        if not location:
            raise Invalid("invalid condition: both location and prefix are unset", line)
        prefix = location
    else:
        prefix = _location(raw.prefix, line)
        if not prefix.startswith("*.") and not location:
            raise Invalid(
                "invalid condition: location is unset and prefix is not in the format: "
                "*.example.com",
                line,
            )
    if raw.pull_from_mirror:
        raise Invalid(
            f"pull-from-mirror must not be set for a non-mirror registry {prefix!r}", line
        )
    return Registry(
        prefix=prefix,
        location=location,
        insecure=raw.insecure,
        blocked=raw.blocked,
        mirror_by_digest_only=raw.mirror_by_digest_only,
        mirrors=tuple(_mirror(mirror, raw, prefix) for mirror in raw.mirrors),
        origin=origin,
    )


def _mirror(raw: RawMirror, registry: RawRegistry, prefix: str) -> Mirror:
    trimmed = _location(raw.location, raw.line)
    if not trimmed:
        raise Invalid("invalid condition: mirror location is unset", raw.line)
    if registry.mirror_by_digest_only and raw.pull_from_mirror:
        raise Invalid(
            "cannot set mirror usage mirror-by-digest-only for the registry "
            f"({prefix!r}) and pull-from-mirror for per-mirror ({raw.location!r}) at the same time",
            raw.line,
        )
    if raw.pull_from_mirror not in PULL_FROM_MIRROR:
        raise Invalid(
            f"unsupported pull-from-mirror value {raw.pull_from_mirror!r} "
            f"for mirror {raw.location!r}",
            raw.line,
        )
    return Mirror(raw.location, raw.insecure, raw.pull_from_mirror)


def _check_conflicts(registries: tuple[RawRegistry, ...]) -> None:
    """Tables for one location (one wildcard prefix, when the location is unset) must agree
    on ``insecure`` and ``blocked``."""
    seen: dict[str, RawRegistry] = {}
    for raw in registries:
        location = _location(raw.location)
        key = location or _location(raw.prefix)
        other = seen.setdefault(key, raw)
        for name, mine, theirs in (
            ("insecure", raw.insecure, other.insecure),
            ("blocked", raw.blocked, other.blocked),
        ):
            if mine != theirs:
                raise Invalid(
                    f"registry {location!r} is defined multiple times "
                    f"with conflicting {name!r} setting",
                    raw.line,
                )


def _unique_sorted(registries: list[Registry]) -> tuple[Registry, ...]:
    """The first table of each prefix, in prefix order (containers/image sorts them, and a
    later table with the same prefix could never be chosen)."""
    first: dict[str, Registry] = {}
    for registry in registries:
        first.setdefault(registry.prefix, registry)
    return tuple(first[prefix] for prefix in sorted(first))


def _search(entries: tuple[str, ...], line: int | None) -> tuple[str, ...]:
    found = []
    for entry in entries:
        host = _location(entry, line)
        if not _DOMAIN.fullmatch(host):
            raise Invalid(f"Invalid unqualified-search-registries entry {host!r}", line)
        found.append(host)
    return tuple(found)


# --- aliases ---------------------------------------------------------------------------------

_ALIASES = "validating short-name aliases"


def _alias(name: str, value: str, origin: str, line: int | None) -> Alias:
    problem = short_name_problem(name)
    if problem:
        raise Invalid(f"{_ALIASES}: invalid short name {name!r}: {problem}", line)
    if not value:
        return Alias(None, origin)
    try:
        return Alias(alias_target(value), origin)
    except ValueError as exc:
        raise Invalid(f"{_ALIASES}: invalid alias {value!r}: {exc}", line) from None


# --- drop-ins ----------------------------------------------------------------------------


def _merge(base: _Partial, update: _Partial) -> _Partial:
    tables = {registry.prefix: registry for registry in base.registries}
    tables.update({registry.prefix: registry for registry in update.registries})
    return _Partial(
        registries=tuple(tables[prefix] for prefix in sorted(tables)),
        search=base.search if update.search is None else update.search,
        search_origin=base.search_origin if update.search is None else update.search_origin,
        mode=update.mode or base.mode,
        aliases={**base.aliases, **update.aliases},
    )
