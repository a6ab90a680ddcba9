"""What every CI reader shares: the node tree as ``_manifests`` reads it (aliases and merge keys
followed, reads counted against the file's budget), and an image field made an occurrence.

A CI image field is a string (``image: node:22``), or a mapping that names it (GitLab's and
Bitbucket's ``image: {name: ...}``, GitHub's ``container: {image: ...}``). An empty string is
no image (GitHub: "if the image is an empty string, the service will not start", the way a
matrix turns a service off); a sequence is GitLab's ``!reference [.job, image]``, whose image
is reported where it is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from imagecheck.scanning._manifests import (  # the one reader of the tree: shared, not copied
    Found,
    _get,
    _LimitReached,
    _merged_pairs,
    _sequence,
    _text,
    _Value,
)
from imagecheck.scanning._model import MAX_IMAGE_LENGTH, FileProblem, Occurrence, as_checked
from imagecheck.scanning._yamltree import Mapping, Sequence

__all__ = [
    "Found",
    "LimitReached",
    "Value",
    "entries",
    "get",
    "image_field",
    "items",
    "members",
    "text",
]

Value = _Value
LimitReached = _LimitReached
get = _get
text = _text
items = _sequence


def entries(value: Value | None) -> Iterator[tuple[str | None, Value]]:
    """A mapping's entries, merge keys followed; nothing for anything else."""
    if value is not None and isinstance(value.node, Mapping):
        yield from _merged_pairs(value)


def members(value: Value | None) -> Iterator[tuple[str | None, Value]]:
    """A list's items (each named by its ``name``) or a mapping's values (named by their key):
    Woodpecker's steps and services are either."""
    if value is None:
        return
    if isinstance(value.node, Sequence):
        for item in _sequence(value):
            yield _text(_get(item, "name")), item
    else:
        yield from entries(value)


def image_field(
    value: Value | None,
    file: str,
    kind: str,
    name: str | None,
    container: str | None = None,
    *,
    key: str = "name",
    prefix: str = "",
    substitute: Callable[[str], str] | None = None,
) -> Iterator[Found]:
    """The occurrence of an image field: a string, or a mapping whose ``key`` is the string.
    ``prefix`` is a scheme the text must start with (``docker://``), taken off; a text
    without it is not an image (a path, an action). ``substitute`` rewrites the text before
    it is checked (GitLab's variables); the line is still the field's."""
    written: str | None = None
    if value is not None and isinstance(value.node, Mapping):
        if value.node.source.startswith("{{"):  # an unquoted {{ .Values.image }}
            written = value.node.source
        else:
            value = _get(value, key)
    if value is None or isinstance(value.node, Sequence):
        return
    if written is None:
        written = _text(value)
    if not written or not written.startswith(prefix):
        return
    image = written.removeprefix(prefix)
    at = value.at
    if len(image) > MAX_IMAGE_LENGTH:
        what = f"{kind} {name}" if name else kind
        message = f"{what}: image longer than {MAX_IMAGE_LENGTH} characters"
        yield at, FileProblem(file, at[0], message)
        return
    value.spend(1 + len(image) // 64)
    checked, skipped = as_checked(image if substitute is None else substitute(image))
    yield at, Occurrence(checked, file, at[0], kind, name, container, skipped)
