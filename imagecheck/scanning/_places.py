"""Images in Kubernetes objects that are not a container's, and the ones the build or the
platform fills in: read beside the containers that :mod:`imagecheck.kube._workload` finds.

The walk of :mod:`imagecheck.kube._workload` finds containers by shape (and KubeVirt's
``containerDisk`` volumes, the OpenTelemetry operator's image fields, by its tables). What
is here needs more than a path, so it is read for ``scan`` only:

- an OpenShift ``ImageStream``'s ``spec.tags[].from`` when its ``kind`` is ``DockerImage``
  (an ``ImageStreamTag`` or ``ImageStreamImage`` names another stream, not a registry);
- a CDI registry source, ``source.registry.url: docker://IMAGE``, wherever a KubeVirt or CDI
  object holds one (a ``DataVolume``, a ``VirtualMachine``'s ``dataVolumeTemplates``, a
  ``DataImportCron``'s template, a ``VolumeImportSource``): the rule is the shape, not the
  path;
- images the build makes, reported as skipped (:data:`BUILT`): a Skaffold ``Config``'s
  ``build.artifacts[].image`` (and each profile's), and a Strimzi ``KafkaConnect``'s
  ``spec.build.output.image``, which the operator builds and pushes (its ``spec.image`` is
  the build's base image: checked, by the operator table);
- containers whose image an OpenShift ``ImageChange`` trigger fills in (a
  ``DeploymentConfig``'s ``spec.triggers[].imageChangeParams.containerNames``, or the
  ``image.openshift.io/triggers`` annotation of a ``Deployment``...): skipped, whatever is
  written there (often ``" "``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from imagecheck.kube._workload import Tree, api_group
from imagecheck.scanning._builds import BUILT_BY_SKAFFOLD, BUILT_BY_STRIMZI, Fact, stripped
from imagecheck.scanning._model import FileProblem, Occurrence

__all__ = [
    "FILLED_BY_TRIGGER",
    "Place",
    "filled_by_triggers",
    "places",
]

N = TypeVar("N")

FILLED_BY_TRIGGER = "filled by an OpenShift ImageChange trigger"

_DOCKER_PREFIX = "docker://"
_Result = Occurrence | FileProblem | Fact
_TRIGGERS_ANNOTATION = "image.openshift.io/triggers"
# fieldPath: spec.template.spec.containers[?(@.name=="web")].image (either quote).
_FIELD_PATH_NAME = re.compile(r"""containers\[\?\(@\.name\s*==\s*["']([^"']*)["']\)\]""")


@dataclass(frozen=True, slots=True)
class Place(Generic[N]):
    """An image field outside a container: its node, how to name it, and what to do with its
    text (``prefix`` taken off; ``skipped``: why it is not checked)."""

    image: N
    container: str
    kind: str | None = None  # the kind to report, when not the object's
    prefix: str = ""
    skipped: str | None = None

    def marked(self, result: Occurrence | FileProblem | Fact) -> Occurrence | FileProblem | Fact:
        """The result of reading the field: its image without the prefix, skipped if it is."""
        return stripped(result, self.prefix, self.skipped)


def places(tree: Tree[N], obj: N) -> Iterator[Place[N]]:
    """The image fields of ``obj`` that are not containers', in document order by kind."""
    api_version = tree.text(tree.get(obj, "apiVersion")) or ""
    kind = tree.text(tree.get(obj, "kind")) or ""
    group = api_group(api_version)
    if api_version.startswith("skaffold/") and kind == "Config":
        yield from _skaffold(tree, obj)
    elif kind == "ImageStream" and group in ("", "image.openshift.io"):
        yield from _image_stream(tree, obj)
    elif kind == "KafkaConnect" and group == "kafka.strimzi.io":
        output = _path(tree, obj, ("spec", "build", "output"))
        image = tree.get(output, "image") if output is not None else None
        if image is not None:
            yield Place(image, "spec.build.output.image", skipped=BUILT_BY_STRIMZI)
    if group.endswith("kubevirt.io"):
        yield from _registry_sources(tree, obj)


def _path(tree: Tree[N], node: N | None, keys: tuple[str, ...]) -> N | None:
    for key in keys:
        if node is None:
            return None
        node = tree.get(node, key)
    return node


def _items(tree: Tree[N], node: N | None) -> Iterator[N]:
    return iter(()) if node is None else tree.items(node)


def _skaffold(tree: Tree[N], obj: N) -> Iterator[Place[N]]:
    configs = [obj, *_items(tree, tree.get(obj, "profiles"))]
    for config in configs:
        for artifact in _items(tree, _path(tree, config, ("build", "artifacts"))):
            image = tree.get(artifact, "image")
            if image is not None:
                where = "build.artifacts" if config is obj else "profiles.build.artifacts"
                yield Place(image, where, "skaffold", skipped=BUILT_BY_SKAFFOLD)


def _image_stream(tree: Tree[N], obj: N) -> Iterator[Place[N]]:
    for tag in _items(tree, _path(tree, obj, ("spec", "tags"))):
        source = tree.get(tag, "from")
        if source is None or tree.text(tree.get(source, "kind")) != "DockerImage":
            continue
        image = tree.get(source, "name")
        if image is not None:
            yield Place(image, f"tag {tree.text(tree.get(tag, 'name')) or '?'}")


def _registry_sources(tree: Tree[N], obj: N) -> Iterator[Place[N]]:
    """Every ``source: {registry: {url: docker://...}}`` in ``obj``, in document order."""
    stack: list[tuple[N, str | None, str | None]] = [(obj, None, None)]
    seen: set[int] = set()
    while stack:
        node, key, owner = stack.pop()
        if tree.node(node) in seen:
            continue
        seen.add(tree.node(node))
        if key == "source" and tree.is_mapping(node):
            url = _path(tree, node, ("registry", "url"))
            text = tree.text(url)
            if url is not None and text is not None and text.startswith(_DOCKER_PREFIX):
                yield Place(url, owner or "source.registry.url", prefix=_DOCKER_PREFIX)
                continue
        # The nearest metadata name names the image: a dataVolumeTemplate's, else the object's.
        name = tree.text(_path(tree, node, ("metadata", "name"))) or owner
        children = [(value, k, name) for k, value in tree.pairs(node)]
        children.extend((item, key, owner) for item in tree.items(node))
        stack.extend(reversed(children))


def filled_by_triggers(tree: Tree[N], obj: N) -> Callable[[_Result], _Result]:
    """What to do to each container's result of ``obj``: skip it when an ImageChange trigger
    fills its image in."""
    targets = _trigger_targets(tree, obj)
    if not targets:
        return _unchanged

    def filled(item: _Result) -> _Result:
        if not isinstance(item, Occurrence):
            return item
        source = targets.get(item.container or "") or targets.get("*")
        if source is None:
            return item
        return replace(item, skipped=f"{FILLED_BY_TRIGGER} (from {source})")

    return filled


def _unchanged(item: _Result) -> _Result:
    return item


def _trigger_targets(tree: Tree[N], obj: N) -> dict[str, str]:
    """The containers an ImageChange trigger fills in, each with the image stream tag it comes
    from; ``"*"``: a trigger whose containers could not be read (then all of them)."""
    targets: dict[str, str] = {}
    for trigger in _items(tree, _path(tree, obj, ("spec", "triggers"))):
        params = tree.get(trigger, "imageChangeParams")
        if tree.text(tree.get(trigger, "type")) != "ImageChange" or params is None:
            continue
        source = tree.text(_path(tree, params, ("from", "name"))) or "an image stream"
        for name in _items(tree, tree.get(params, "containerNames")):
            targets.setdefault(tree.text(name) or "*", source)
    annotation = tree.text(_path(tree, obj, ("metadata", "annotations", _TRIGGERS_ANNOTATION)))
    if annotation:
        targets.update(_annotation_targets(annotation))
    return targets


def _annotation_targets(annotation: str) -> dict[str, str]:
    """``image.openshift.io/triggers``: a JSON list of ``{from: {kind, name}, fieldPath}``."""
    try:
        triggers = json.loads(annotation)
    except (ValueError, RecursionError):
        return {}
    targets: dict[str, str] = {}
    for trigger in triggers if isinstance(triggers, list) else []:
        if not isinstance(trigger, dict):
            continue
        source = trigger.get("from")
        name = source.get("name") if isinstance(source, dict) else None
        path = trigger.get("fieldPath")
        match = _FIELD_PATH_NAME.search(path) if isinstance(path, str) else None
        targets.setdefault(match.group(1) if match else "*", str(name or "an image stream"))
    return targets
