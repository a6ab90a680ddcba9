"""Short names in ``registries.conf``, as containers/image tells them apart
(``pkg/shortnames``, ``pkg/sysregistriesv2/shortnames.go``): a name is short when its first
component is no registry (no ``.``, no ``:``, not ``localhost``); an alias maps a short name
(no tag, no digest) to a repository with a registry (no tag, no digest).
"""

from __future__ import annotations

from imagecheck.errors import InvalidReferenceError
from imagecheck.reference import Reference, parse_reference


def has_registry(name: str) -> bool:
    """Whether a name (no tag, no digest) starts with a registry the way containers/image
    tells short names apart: a first component with ``.`` or ``:``, or ``localhost``."""
    first, slash, _ = name.partition("/")
    return bool(slash) and (first == "localhost" or "." in first or ":" in first)


def short_name_problem(name: str) -> str | None:
    if "@" in name:
        return "must not contain digest"
    if ":" in name.rpartition("/")[2]:
        return "must not contain tag"
    if has_registry(name):
        return "must not contain registry"
    try:
        parse_reference(name)
    except InvalidReferenceError as exc:
        return exc.reason
    return None


def alias_target(value: str) -> Reference:
    """The repository an alias names: a registry, no tag, no digest (``parseShortNameValue``);
    ``ValueError`` says what is wrong."""
    if "@" in value:
        raise ValueError("must not contain digest")
    if ":" in value.rpartition("/")[2]:
        raise ValueError("must not contain tag")
    if not has_registry(value):
        raise ValueError("must contain registry and repository")
    try:
        return parse_reference(value)
    except InvalidReferenceError as exc:
        raise ValueError(exc.reason) from None
