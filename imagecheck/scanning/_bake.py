"""docker buildx bake files (``docker-bake.hcl``, ``docker-bake.json``, their overrides).

What a target builds, its ``tags``, is not in a registry before the build: each tag is
reported skipped (:data:`~imagecheck.scanning._builds.BUILT_BY_BAKE`), and the scan skips
the same repository elsewhere. A target's ``contexts`` are named build contexts (a
Dockerfile's ``FROM name`` reads them); one that is ``docker-image://IMAGE`` is an image
BuildKit pulls: checked. ``${VAR}`` is replaced by a ``variable`` block's string default,
as bake does when the environment does not set it; anything else stays a placeholder.

HCL is read by :mod:`._hcl`, a bounded reader of the part of HCL that bake files use for
these attributes; the JSON form by :mod:`._jsonc`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from imagecheck.scanning._builds import BUILT_BY_BAKE, DOCKER_IMAGE, NamedContext
from imagecheck.scanning._hcl import Block, Text, read_hcl
from imagecheck.scanning._jsonc import document, text_of
from imagecheck.scanning._manifests import Found
from imagecheck.scanning._model import MAX_IMAGE_LENGTH, FileProblem, Occurrence, as_checked
from imagecheck.scanning._yamltree import Mapping, Node, Scalar, Sequence

__all__ = ["images_in_bake"]

_VARIABLE = re.compile(r"\$\{\s*([A-Za-z_][A-Za-z0-9_-]*)\s*\}")
# Rounds of substitution: a default that names another variable, a few deep.
_ROUNDS = 8


def images_in_bake(text: str, file: str) -> Iterator[Found]:
    if file.lower().endswith(".json"):
        targets, variables = _json_bake(text, file)
    else:
        targets, variables = _hcl_bake(text, file)
    for target, tags, contexts in targets:
        if isinstance(target, FileProblem):
            yield (target.line or 0, 0), target
            continue
        for tag in tags:
            image = _substituted(tag.value, variables)
            if len(image) <= MAX_IMAGE_LENGTH:
                found = Occurrence(image, file, tag.line, "bake", target, "tags", BUILT_BY_BAKE)
                yield (tag.line, 0), found
        for name, value in contexts:
            yield (value.line, 0), NamedContext(name, file, value.line)
            if value.value.startswith(DOCKER_IMAGE):
                image = _substituted(value.value.removeprefix(DOCKER_IMAGE), variables)
                if len(image) <= MAX_IMAGE_LENGTH:
                    checked, skipped = as_checked(image)
                    where = f"contexts.{name}"
                    found = Occurrence(checked, file, value.line, "bake", target, where, skipped)
                    yield (value.line, 0), found


_Target = tuple[str | FileProblem, list[Text], list[tuple[str, Text]]]


def _hcl_bake(text: str, file: str) -> tuple[list[_Target], dict[str, str]]:
    body = read_hcl(text)
    if isinstance(body, tuple):
        line, message = body
        return [(FileProblem(file, line, f"HCL: {message}"), [], [])], {}
    variables: dict[str, str] = {}
    targets: list[_Target] = []
    for block in body.blocks:
        if block.type == "variable" and block.labels:
            default = block.attributes.get("default")
            if isinstance(default, Text) and len(default.value) <= MAX_IMAGE_LENGTH:
                variables[block.labels[0]] = default.value
        elif block.type == "target" and block.labels:
            targets.append(_hcl_target(block))
    return targets, variables


def _hcl_target(block: Block) -> _Target:
    tags = block.attributes.get("tags")
    contexts = block.attributes.get("contexts")
    tag_list = [t for t in tags if isinstance(t, Text)] if isinstance(tags, list) else []
    context_list = (
        [(k, v) for k, v in contexts.items() if isinstance(v, Text)]
        if isinstance(contexts, dict)
        else []
    )
    return block.labels[0], tag_list, context_list


def _json_bake(text: str, file: str) -> tuple[list[_Target], dict[str, str]]:
    root = document(text, file)
    if isinstance(root, FileProblem):
        return [(root, [], [])], {}
    variables: dict[str, str] = {}
    for name, variable in _pairs(_member(root, "variable")):
        default = text_of(_member(variable, "default"))
        if default is not None and len(default) <= MAX_IMAGE_LENGTH:
            variables[name] = default
    targets: list[_Target] = []
    for name, target in _pairs(_member(root, "target")):
        tags = _member(target, "tags")
        tag_list = [_text(t) for t in tags.items] if isinstance(tags, Sequence) else []
        contexts = [(k, _text(v)) for k, v in _pairs(_member(target, "contexts"))]
        targets.append(
            (
                name,
                [t for t in tag_list if t is not None],
                [(k, v) for k, v in contexts if v is not None],
            )
        )
    return targets, variables


def _member(node: Node | None, key: str) -> Node | None:
    for name, value in _pairs(node):
        if name == key:
            return value
    return None


def _pairs(node: Node | None) -> Iterator[tuple[str, Node]]:
    if isinstance(node, Mapping):
        for key, value in node.pairs:
            if isinstance(key, Scalar):
                yield key.value, value


def _text(node: Node) -> Text | None:
    value = text_of(node)
    return None if value is None else Text(value, node.at[0])


def _substituted(text: str, variables: dict[str, str]) -> str:
    for _ in range(_ROUNDS):
        replaced = _VARIABLE.sub(lambda m: variables.get(m.group(1), m.group(0)), text)
        if replaced == text or len(replaced) > MAX_IMAGE_LENGTH:
            return replaced
        text = replaced
    return text
