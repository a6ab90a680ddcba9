"""A kustomization file as kustomize reads it, and kustomize's image transformer.

Follows kubernetes-sigs/kustomize v5.8.1 (the one kubectl 1.37 embeds); the rules, with the
files they come from, are in :mod:`imagecheck.scanning._kustomize`'s docstring.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

import yaml

from imagecheck.scanning._yamltree import (
    Alias,
    Mapping,
    Node,
    Scalar,
    Sequence,
    SyntaxProblem,
    documents,
)

# konfig.RecognizedKustomizationFileNames(), in kustomize's order.
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")

__all__ = [
    "KUSTOMIZATION_NAMES",
    "MAX_WALK",
    "REMOTE_SHAPE",
    "Kustomization",
    "Override",
    "Problem",
    "image_passes",
    "kustomization",
]

MAX_WALK = 2_000_000  # steps to find the image fields of one resource file
# The field specs of builtinpluginconsts/images.go; LegacyFilter reaches the first four too.
_FIELD_SPECS = tuple(
    tuple(path.replace("[]", "/[]").split("/"))
    for path in (
        "spec/containers[]/image",
        "spec/initContainers[]/image",
        "spec/volumes[]/image/reference",
        "spec/template/spec/containers[]/image",
        "spec/template/spec/initContainers[]/image",
        "spec/template/spec/volumes[]/image/reference",
    )
)
_LEGACY_KEYS = frozenset({"containers", "initContainers"})
_PLAIN_NAME = re.compile(r"[A-Za-z0-9._/:@-]+")  # no regular-expression syntax but "."
_TAG_DIGEST = r"(?::[a-zA-Z0-9_.{}-]*)?(?:@sha256:[a-zA-Z0-9_.{}-]*)?"
REMOTE_SHAPE = re.compile(
    r"[a-z][a-z0-9+.-]*://|git@|git::|(github\.com|gitlab\.com|bitbucket\.org)/"
)
_FIELDS = ("name", "newName", "newTag", "digest", "tagSuffix")
_EXPONENT = re.compile(r"[-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+")  # a number to Go, not PyYAML
_RESOLVER = yaml.resolver.Resolver()
_NOT_STRINGS = frozenset(
    {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
)
_NULL = "tag:yaml.org,2002:null"


@dataclass(frozen=True, slots=True)
class Override:
    """One ``images`` entry; ``line`` is that of its ``- name:``."""

    file: str
    line: int
    pattern: re.Pattern[str]
    new_name: str
    new_tag: str
    digest: str
    tag_suffix: str

    def apply(self, image: str) -> str | None:
        """The image this entry makes of ``image``; None if its name does not match."""
        if self.pattern.fullmatch(image) is None:
            return None
        name, tag, digest = _split(image)
        name = self.new_name or name
        if self.new_tag or self.digest:
            tag, digest = self.new_tag, self.digest
        elif self.tag_suffix:
            tag, digest = tag + self.tag_suffix, ""
        return name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def _split(image: str) -> tuple[str, str, str]:
    """Name, tag and digest as kustomize's image.Split has them (a port is not a tag)."""
    slash = image.find("/")
    start = max(slash, 0)
    at, colon = image.find("@", start), image.find(":", start)
    if at < 0 and colon < 0:
        return image, "", ""
    if at >= 0 and (colon < 0 or at < colon):
        return image[:at], "", image[at + 1 :]
    if at >= 0:
        return image[:colon], image[colon + 1 : at], image[at + 1 :]
    return image[:colon], image[colon + 1 :], ""


class Problem(Exception):
    """What is wrong with a kustomization, and its line."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass(frozen=True, slots=True)
class Kustomization:
    """What of a kustomization file the images depend on; entries with their lines."""

    file: str
    kind: str
    overrides: list[Override]
    resources: list[tuple[str, int]]
    components: list[tuple[str, int]]


def kustomization(file: str, document: Node) -> Kustomization:
    """The kustomization in ``document``, as kusttarget.go's FixKustomization has it: legacy
    ``bases`` after ``resources``, ``imageTags`` after ``images``."""
    root, _ = _resolved(document)
    if not isinstance(root, Mapping):
        raise Problem(root.at[0], "not a kustomization: not a mapping")
    kind = _string(_value(root, "kind"), "kind") or "Kustomization"
    overrides = [
        _override(file, entry) for key in ("images", "imageTags") for entry in _list(root, key)
    ]
    return Kustomization(
        file,
        kind,
        overrides,
        [_entry(e, "resources") for key in ("resources", "bases") for e in _list(root, key)],
        [_entry(e, "components") for e in _list(root, "components")],
    )


def _override(file: str, node: Node) -> Override:
    entry, via = _resolved(node)
    line = via or entry.at[0]
    if not isinstance(entry, Mapping):
        raise Problem(line, "images: an entry that is not a mapping")
    name, new_name, new_tag, digest, suffix = (
        _string(_value(entry, key), f"images {key}") or "" for key in _FIELDS
    )
    if not name:
        raise Problem(line, "images: an entry without a name")
    if _PLAIN_NAME.fullmatch(name) is None:
        message = f"images name {name!r}: regular-expression syntax, not evaluated here"
        raise Problem(line, message[:200])
    pattern = re.compile(name + _TAG_DIGEST)  # "." is the only syntax _PLAIN_NAME lets by
    return Override(file, line, pattern, new_name, new_tag, digest, suffix)


def _entry(node: Node, what: str) -> tuple[str, int]:
    line = _resolved(node)[0].at[0]
    value = _string(node, what)
    if not value:
        raise Problem(line, f"{what}: an empty entry")
    if "\0" in value:  # no path has one; os.path raises on it
        raise Problem(line, f"{what}: a NUL character in {value[:100]!r}")
    return value, line


def _list(mapping: Mapping, key: str) -> list[Node]:
    node = _value(mapping, key)
    value = None if node is None else _resolved(node)[0]
    if value is None or (isinstance(value, Scalar) and _is_null(value)):
        return []
    if isinstance(value, Sequence):
        return value.items
    raise Problem(value.at[0], f"{key} is not a list")


def _string(node: Node | None, what: str) -> str | None:
    """A string as kustomize unmarshals one (into a Go string); None for null or absent."""
    if node is None:
        return None
    value, _ = _resolved(node)
    if isinstance(value, Sequence):
        raise Problem(value.at[0], f"{what} is a list, not a string")
    if not isinstance(value, Scalar):
        raise Problem(value.at[0], f"{what} is a mapping, not a string")
    if _is_null(value):
        return None
    if _tag(value) in _NOT_STRINGS or (not value.style and _EXPONENT.fullmatch(value.value)):
        raise Problem(value.at[0], f"{what} {value.value[:100]} is not a string: quote it")
    return value.value


def _tag(scalar: Scalar) -> str | None:
    """The tag YAML 1.1 gives the scalar (sigs.k8s.io/yaml agrees: yes, 010 and 1.10 are not
    strings to kustomize); None for a quoted one without a tag."""
    if scalar.tag or scalar.style:
        return scalar.tag
    tag: str = _RESOLVER.resolve(yaml.ScalarNode, scalar.value, (True, False))  # type: ignore[no-untyped-call]
    return tag


def _is_null(scalar: Scalar) -> bool:
    return _tag(scalar) == _NULL


def image_passes(text: str) -> dict[tuple[int, str], int]:
    """How many times kustomize applies each override to the image at (line, text): once for
    each of LegacyFilter and the field specs that reaches it (an alias: the alias's line).

    At most :data:`MAX_WALK` steps: aliases to long lists could otherwise ask for N x M; past
    it, the rest of the file's images are left as written (scan_text reports such a file).
    """
    counts: dict[tuple[int, str], int] = {}
    budget = [MAX_WALK]
    for document in documents(text):
        if isinstance(document, SyntaxProblem):
            continue
        for obj in _objects(document):
            if _text(_value(obj, "kind")) == "CustomResourceDefinition":
                continue  # imagetag.go isOnDenyList, legacy.go
            for place in itertools.chain(
                _legacy(obj, budget), *(_at(obj, spec, budget) for spec in _FIELD_SPECS)
            ):
                counts[place] = counts.get(place, 0) + 1
    return counts


def _objects(document: Node) -> list[Mapping]:
    """A document's objects: a ``*List``'s items, as kustomize's resource factory splits it."""
    root, _ = _resolved(document)
    if not isinstance(root, Mapping):
        return []
    items = _value(root, "items")
    kind = _text(_value(root, "kind")) or ""
    if not kind.endswith("List") or items is None:
        return [root]
    found = (_resolved(item)[0] for item in _sequence_items(items))
    return [item for item in found if isinstance(item, Mapping)]


def _legacy(obj: Mapping, budget: list[int]) -> Iterator[tuple[int, str]]:
    """LegacyFilter's images: in a list under ``containers`` or ``initContainers``, any depth.

    The walk does not enter an alias's target: that is walked where it is written.
    """
    stack: list[Node] = [obj]
    while stack and budget[0] > 0:
        node = stack.pop()
        budget[0] -= 1
        if isinstance(node, Sequence):
            stack.extend(item for item in node.items if not isinstance(item, Alias))
        elif isinstance(node, Mapping):
            for key, value in node.pairs:
                if not isinstance(value, Alias):
                    stack.append(value)
                if isinstance(key, Scalar) and key.value in _LEGACY_KEYS:
                    yield from _at(value, ("[]", "image"), budget)


def _at(node: Node, parts: tuple[str, ...], budget: list[int]) -> Iterator[tuple[int, str]]:
    """The scalars at ``parts`` (keys; ``[]``: each item) under ``node``, by line."""
    nodes: list[tuple[Node, int | None]] = [(node, None)]
    for part in parts:
        following: list[tuple[Node, int | None]] = []
        for current, via in nodes:
            value, alias = _resolved(current)
            budget[0] -= 1
            if budget[0] < 0:
                return
            if part == "[]" and isinstance(value, Sequence):
                following.extend((item, via or alias) for item in value.items)
            elif isinstance(value, Mapping) and (found := _value(value, part)) is not None:
                following.append((found, via or alias))
        nodes = following
    for current, via in nodes:
        value, alias = _resolved(current)
        if isinstance(value, Scalar):
            yield via or alias or value.at[0], value.value


def _sequence_items(node: Node) -> list[Node]:
    value, _ = _resolved(node)
    return value.items if isinstance(value, Sequence) else []


def _resolved(node: Node) -> tuple[Scalar | Sequence | Mapping, int | None]:
    """The node an alias names, and the alias's line (None: not an alias)."""
    if isinstance(node, Alias):
        return node.target, node.at[0]
    return node, None


def _value(mapping: Mapping, key: str) -> Node | None:
    """``mapping[key]`` as written (the last if repeated); merge keys are not followed."""
    found = None
    for key_node, value in mapping.pairs:
        name, _ = _resolved(key_node)
        if isinstance(name, Scalar) and name.value == key:
            found = value
    return found


def _text(node: Node | None) -> str | None:
    value = None if node is None else _resolved(node)[0]
    return value.value if isinstance(value, Scalar) else None
