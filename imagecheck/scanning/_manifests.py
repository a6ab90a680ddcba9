"""Images in Kubernetes manifests and Docker Compose files, read from the YAML node tree.

Kubernetes: every document (and item of a ``List``, object of an OpenShift ``Template``) with a
``kind``; its containers are found by shape (:mod:`imagecheck.kube._workload`), its other image
fields by :mod:`._places`. Compose:
a document without ``kind`` whose ``services`` is a mapping.

Values reached through an alias (``image: *img``, ``- *sidecar``, ``<<: *defaults``) are
reported on the line of the alias, the place that puts the image into this object; two uses
of one anchor are then two occurrences on two lines, not one line twice. Merge keys (``<<``)
are followed as YAML 1.1 defines them: keys written in the mapping win, then the merged
mappings in order.

An alias makes the walk read its anchor's values again, so a few KiB of aliases to aliases
could ask for millions of reads and occurrences: what one file reads through
aliases is bounded (:class:`AliasBudget`), and so is the depth of merge keys that merge
mappings with merge keys (:data:`MAX_MERGE_DEPTH`). Past either, the problem is reported where
the alias is written, and the rest of the file is not scanned.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass, replace

from imagecheck.kube._workload import containers
from imagecheck.scanning._builds import Fact, NamedContext, build_contexts, stripped
from imagecheck.scanning._model import (
    BUILT_BY_COMPOSE,
    MAX_IMAGE_LENGTH,
    FileProblem,
    Occurrence,
    as_checked,
)
from imagecheck.scanning._places import filled_by_triggers, places
from imagecheck.scanning._yamltree import Alias, Mapping, Node, Position, Scalar, Sequence

__all__ = ["MAX_ALIAS_READS", "MAX_MERGE_DEPTH", "AliasBudget", "Found", "images_in_document"]

# Values read through aliases in one file. A Compose file that merges 30 defaults into each
# of 200 services reads some 12,000; a lookup costs a mapping's size, an image reached through
# an alias a unit per 64 characters (so the output of a file stays a few MB).
MAX_ALIAS_READS = 100_000
# Merge keys in a mapping merged in a mapping merged...: layered defaults are a few deep.
MAX_MERGE_DEPTH = 100

_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_NULL_TAG = "tag:yaml.org,2002:null"
_MERGE_TAG = "tag:yaml.org,2002:merge"

Found = tuple[Position, Occurrence | FileProblem | Fact]
"""A result and where its value is written, to sort a file's results by."""


class AliasBudget:
    """What one file may still read through aliases; every document of the file spends it."""

    def __init__(self, limit: int = MAX_ALIAS_READS) -> None:
        self.limit = limit
        self.remaining = limit

    @property
    def exhausted(self) -> bool:
        return self.remaining < 0

    def spend(self, count: int, at: Position) -> None:
        self.remaining -= count
        if self.remaining < 0:
            raise _LimitReached(
                at,
                f"aliases lead to more than {self.limit:,} values to read: "
                "the rest of the file is not scanned",
            )


class _LimitReached(Exception):
    def __init__(self, at: Position, message: str) -> None:
        super().__init__(message)
        self.at = at
        self.message = message


@dataclass(frozen=True, slots=True)
class _Value:
    """A node, and where the outermost alias that led to it is written (if one did)."""

    node: Scalar | Sequence | Mapping
    budget: AliasBudget
    via: Position | None = None

    @property
    def at(self) -> Position:
        return self.via or _written_at(self.node)

    def child(self, node: Node) -> _Value:
        """A node in this one, through its alias if it is one."""
        if isinstance(node, Alias):
            return _Value(node.target, self.budget, self.via or node.at)
        return _Value(node, self.budget, self.via)

    def spend(self, count: int) -> None:
        """Charge ``count`` reads if this value was reached through an alias."""
        if self.via is not None:
            self.budget.spend(count, self.via)


def images_in_document(root: Node, file: str, budget: AliasBudget | None = None) -> Iterator[Found]:
    """The images in one document; ``budget`` is shared by a file's documents."""
    document = _Value(Scalar("", (0, 0), None, None), budget or AliasBudget()).child(root)
    try:
        yield from _document(document, file)
    except _LimitReached as exc:
        yield exc.at, FileProblem(file, exc.at[0], exc.message)


def _document(document: _Value, file: str) -> Iterator[Found]:
    if not isinstance(document.node, Mapping):
        return
    if _get(document, "kind") is not None:
        yield from _kubernetes_object(document, file, in_list=False)
    else:
        services = _get(document, "services")
        if services is not None:
            yield from _compose_services(services, file)


def _kubernetes_object(obj: _Value, file: str, *, in_list: bool) -> Iterator[Found]:
    kind = _text(_get(obj, "kind"))
    if kind is None:
        return
    items = _get(obj, "objects" if kind == "Template" else "items")  # OpenShift's Template
    if (kind.endswith("List") or kind == "Template") and items is not None and not in_list:
        for item in _sequence(items):
            if isinstance(item.node, Mapping):
                yield from _kubernetes_object(item, file, in_list=True)
        return
    metadata = _get(obj, "metadata")
    # A Job made by `kubectl create -f` often has only generateName.
    name = _text(_get(metadata, "name")) or _text(_get(metadata, "generateName"))
    filled = filled_by_triggers(_TREE, obj)
    for slot in containers(_TREE, obj):
        for at, result in _image(slot.image, file, kind, name, slot.container):
            yield at, filled(result)
    for place in places(_TREE, obj):
        found = _image(place.image, file, place.kind or kind, name, place.container)
        yield from ((at, place.marked(result)) for at, result in found)


def _compose_services(services: _Value, file: str) -> Iterator[Found]:
    for key, service in _pairs(services):
        name = _text(key)
        if name is None or name == "<<":
            continue
        found = _image(_get(service, "image"), file, "compose", name, name)
        build = _get(service, "build")
        if build is None:
            yield from found
            continue
        yield from _compose_contexts(build, file, name)
        # With build:, image: names what compose builds and tags: not in a registry yet.
        reason = f"{BUILT_BY_COMPOSE} (service {name} has build:)"
        for at, item in found:
            if isinstance(item, Occurrence) and item.skipped is None:
                yield at, replace(item, skipped=reason)
            else:
                yield at, item


def _compose_contexts(build: _Value, file: str, service: str) -> Iterator[Found]:
    """A compose build's named contexts; a ``docker-image://`` one's image, to check."""
    for context, value, prefix in build_contexts(_TREE, build):
        yield value.at, NamedContext(context, file, value.at[0])
        if prefix:
            found = _image(value, file, "compose", service, f"additional_contexts.{context}")
            yield from ((at, stripped(result, prefix)) for at, result in found)


def _image(
    image: _Value | None, file: str, kind: str, name: str | None, container: str | None
) -> Iterator[Found]:
    if image is None:
        return  # no image: a patch (kustomize) or a compose service that only builds
    node = image.node
    text: str | None
    if isinstance(node, Mapping) and node.source.startswith("{{"):
        # An unquoted {{ .Values.image }} is valid YAML: a flow mapping in a flow mapping.
        text = node.source
    elif isinstance(node, Scalar):
        text = _text(image)
        if text is None:
            return  # image: null / image: ~
    elif kind == "compose":
        # Not a compose file after all: Helm values often have services.<x>.image mappings.
        return
    else:
        what = f"{kind} {name}" if name else kind
        where = f", container {container}" if container and kind != "compose" else ""
        yield image.at, FileProblem(file, image.at[0], f"{what}{where}: image is not a string")
        return
    if len(text) > MAX_IMAGE_LENGTH:
        what = f"{kind} {name}" if name else kind
        where = f", container {container}" if container and kind != "compose" else ""
        message = f"{what}{where}: image longer than {MAX_IMAGE_LENGTH} characters"
        yield image.at, FileProblem(file, image.at[0], message)
        return
    image.spend(1 + len(text) // 64)
    checked, skipped = as_checked(text)
    yield image.at, Occurrence(checked, file, image.at[0], kind, name, container, skipped)


# --- reading the node tree --------------------------------------------------------------


def _written_at(node: Scalar | Sequence | Mapping) -> Position:
    """Where the value itself starts: for a block scalar (``|``, ``>``), its first line of
    content, not the indicator."""
    line, column = node.at
    if isinstance(node, Scalar) and node.style in ("|", ">"):
        leading_blank_lines = len(node.value) - len(node.value.lstrip("\n"))
        return (line + 1 + leading_blank_lines, 1)
    return (line, column)


def _text(value: _Value | None) -> str | None:
    """A scalar's text; None for null, a missing value or a collection."""
    if value is None or not isinstance(value.node, Scalar):
        return None
    scalar = value.node
    if scalar.tag == _NULL_TAG or (not scalar.style and scalar.value in _NULLS):
        return None
    return scalar.value


def _sequence(value: _Value | None) -> Iterator[_Value]:
    if value is not None and isinstance(value.node, Sequence):
        value.spend(len(value.node.items))
        for item in value.node.items:
            yield value.child(item)


def _pairs(value: _Value) -> Iterator[tuple[_Value, _Value]]:
    if isinstance(value.node, Mapping):
        value.spend(len(value.node.pairs))
        for key, item in value.node.pairs:
            yield value.child(key), value.child(item)


def _get(value: _Value | None, key: str) -> _Value | None:
    """``value[key]`` for a mapping, following merge keys; None when absent.

    Merge keys as YAML 1.1 has them: a key written in the mapping wins, then each merged
    mapping in order, depth first; a mapping merged twice (or into itself, ``&a {<<: *a}``)
    is read once.
    """
    if value is None:
        return None
    seen: set[int] = set()
    stack: list[tuple[_Value, int]] = [(value, 0)]  # depth first: the next one last
    while stack:
        current, depth = stack.pop()
        mapping = current.node
        if not isinstance(mapping, Mapping) or id(mapping) in seen:
            continue
        seen.add(id(mapping))
        found, merged = _own_key(current, key)
        if found is not None:
            return found
        if merged and depth == MAX_MERGE_DEPTH:
            message = f"merge keys (<<) nested more than {MAX_MERGE_DEPTH} deep"
            raise _LimitReached(current.at, message)
        stack.extend((source, depth + 1) for source in reversed(merged))
    return None


def _own_key(value: _Value, key: str) -> tuple[_Value | None, list[_Value]]:
    """``key``'s value as written in this mapping (the last if repeated), and the mappings
    its merge keys merge, in order."""
    found: Node | None = None
    merged: list[_Value] = []
    pairs = value.node.pairs if isinstance(value.node, Mapping) else []
    value.spend(len(pairs))
    for key_node, value_node in pairs:  # the hot loop of a scan: nothing allocated
        name = key_node.target if isinstance(key_node, Alias) else key_node
        if not isinstance(name, Scalar):
            continue
        if name.tag == _MERGE_TAG or (name.value == "<<" and not name.style):
            merge = value.child(value_node)
            merged.extend(_sequence(merge) if isinstance(merge.node, Sequence) else [merge])
        elif name.value == key:
            found = value_node
    return None if found is None else value.child(found), merged


def _merged_pairs(value: _Value) -> Iterator[tuple[str | None, _Value]]:
    """A mapping's entries as its reader sees them: the keys written in it, then those of the
    mappings its merge keys merge (in :func:`_get`'s order) that it does not already have."""
    seen_keys: set[str | None] = set()
    seen: set[int] = set()
    stack: list[tuple[_Value, int]] = [(value, 0)]
    while stack:
        current, depth = stack.pop()
        if not isinstance(current.node, Mapping) or id(current.node) in seen:
            continue
        seen.add(id(current.node))
        merged: list[_Value] = []
        current.spend(len(current.node.pairs))
        for key_node, value_node in current.node.pairs:
            name = key_node.target if isinstance(key_node, Alias) else key_node
            text = name.value if isinstance(name, Scalar) else None
            if isinstance(name, Scalar) and (
                name.tag == _MERGE_TAG or (text == "<<" and not name.style)
            ):
                merge = current.child(value_node)
                merged.extend(_sequence(merge) if isinstance(merge.node, Sequence) else [merge])
            elif text not in seen_keys or text is None:
                seen_keys.add(text)
                yield text, current.child(value_node)
        if merged and depth == MAX_MERGE_DEPTH:
            message = f"merge keys (<<) nested more than {MAX_MERGE_DEPTH} deep"
            raise _LimitReached(current.at, message)
        stack.extend((source, depth + 1) for source in reversed(merged))


class _YAMLTree:
    """:class:`imagecheck.kube._workload.Tree` over the nodes of :mod:`._yamltree`, aliases and
    merge keys followed, what aliases make it read counted against the file's budget."""

    def get(self, node: _Value, key: str) -> _Value | None:
        return _get(node, key)

    def pairs(self, node: _Value) -> Iterator[tuple[str | None, _Value]]:
        return _merged_pairs(node)

    def items(self, node: _Value) -> Iterator[_Value]:
        return _sequence(node)

    def text(self, node: _Value | None) -> str | None:
        return _text(node)

    def is_mapping(self, node: _Value) -> bool:
        return isinstance(node.node, Mapping)

    def identity(self, node: _Value) -> Hashable:
        return (id(node.node), node.via)

    def node(self, node: _Value) -> int:
        return id(node.node)


_TREE = _YAMLTree()
