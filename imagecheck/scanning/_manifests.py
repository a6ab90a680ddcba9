"""Images in Kubernetes manifests and Docker Compose files, read from the YAML node tree.

Kubernetes: every document (and every item of a ``List``) with a ``kind``; its pod spec is
found by kind, and any other kind with ``spec.template.spec`` (custom resources such as Argo
Rollouts, Knative Services, OpenShift DeploymentConfigs) is read as a pod template. Compose:
a document without ``kind`` whose ``services`` is a mapping.

Values reached through an alias (``image: *img``, ``- *sidecar``, ``<<: *defaults``) are
reported on the line of the alias, the place that puts the image into this object; two uses
of one anchor are then two occurrences on two lines, not one line twice. Merge keys (``<<``)
are followed as YAML 1.1 defines them: keys written in the mapping win, then the merged
mappings in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from imagecheck.scanning._model import (
    BUILT_BY_COMPOSE,
    PLACEHOLDER,
    FileProblem,
    Occurrence,
    placeholder_in,
)
from imagecheck.scanning._yamltree import Alias, Mapping, Node, Position, Scalar, Sequence

__all__ = ["Found", "images_in_document"]

# Where the pod spec is, by kind; every other kind: spec.template.spec.
_POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
_POD_TEMPLATE_PATH = ("spec", "template", "spec")
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_NULL_TAG = "tag:yaml.org,2002:null"
_MERGE_TAG = "tag:yaml.org,2002:merge"

Found = tuple[Position, Occurrence | FileProblem]
"""A result and where its value is written, to sort a file's results by."""


@dataclass(frozen=True, slots=True)
class _Value:
    """A node, and where the outermost alias that led to it is written (if one did)."""

    node: Scalar | Sequence | Mapping
    via: Position | None = None

    @property
    def at(self) -> Position:
        return self.via or _written_at(self.node)


def images_in_document(root: Node, file: str) -> Iterator[Found]:
    document = _value(root)
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
    items = _get(obj, "items")
    if kind.endswith("List") and items is not None and not in_list:
        for item in _sequence(items):
            if isinstance(item.node, Mapping):
                yield from _kubernetes_object(item, file, in_list=True)
        return
    pod_spec = _path(obj, _POD_SPEC_PATHS.get(kind, _POD_TEMPLATE_PATH))
    if pod_spec is None:
        return
    metadata = _get(obj, "metadata")
    # A Job made by `kubectl create -f` often has only generateName.
    name = _text(_get(metadata, "name")) or _text(_get(metadata, "generateName"))
    for field in _CONTAINER_LISTS:
        for container in _sequence(_get(pod_spec, field)):
            container_name = _text(_get(container, "name"))
            image = _get(container, "image")
            yield from _image(image, file, kind, name, container_name)


def _compose_services(services: _Value, file: str) -> Iterator[Found]:
    for key, service in _pairs(services):
        name = _text(key)
        if name is None or name == "<<":
            continue
        found = _image(_get(service, "image"), file, "compose", name, name)
        if _get(service, "build") is None:
            yield from found
            continue
        # With build:, image: names what compose builds and tags: not in a registry yet.
        reason = f"{BUILT_BY_COMPOSE} (service {name} has build:)"
        for at, item in found:
            if isinstance(item, Occurrence) and item.skipped is None:
                yield at, replace(item, skipped=reason)
            else:
                yield at, item


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
    placeholder = placeholder_in(text)
    skipped = None if placeholder is None else f"{PLACEHOLDER} {placeholder}"
    yield image.at, Occurrence(text, file, image.at[0], kind, name, container, skipped)


# --- reading the node tree --------------------------------------------------------------


def _value(node: Node, via: Position | None = None) -> _Value:
    if isinstance(node, Alias):
        return _Value(node.target, via or node.at)
    return _Value(node, via)


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
        for item in value.node.items:
            yield _value(item, value.via)


def _pairs(value: _Value) -> Iterator[tuple[_Value, _Value]]:
    if isinstance(value.node, Mapping):
        for key, item in value.node.pairs:
            yield _value(key, value.via), _value(item, value.via)


def _path(value: _Value | None, keys: tuple[str, ...]) -> _Value | None:
    for key in keys:
        value = _get(value, key)
    return value


def _get(value: _Value | None, key: str) -> _Value | None:
    """``value[key]`` for a mapping, following merge keys; None when absent."""
    return None if value is None else _lookup(value, key, seen=set())


def _lookup(value: _Value, key: str, seen: set[int]) -> _Value | None:
    mapping = value.node
    if not isinstance(mapping, Mapping) or id(mapping) in seen:
        return None  # not a mapping, or a merge that loops back (&a {<<: *a})
    seen.add(id(mapping))
    found: _Value | None = None
    merges: list[_Value] = []
    for key_node, value_node in mapping.pairs:
        name = _value(key_node).node
        if not isinstance(name, Scalar):
            continue
        if name.tag == _MERGE_TAG or (name.value == "<<" and not name.style):
            merges.append(_value(value_node, value.via))
        elif name.value == key:
            found = _value(value_node, value.via)  # a repeated key: the last one wins
    if found is not None:
        return found
    for merge in merges:
        sources = list(_sequence(merge)) if isinstance(merge.node, Sequence) else [merge]
        for source in sources:
            result = _lookup(source, key, seen)
            if result is not None:
                return result
    return None
