"""Developer environments: ``devcontainer.json`` and Podman Quadlet units.

A dev container (https://containers.dev/implementors/json_reference/) is JSON with comments
and trailing commas (:mod:`._jsonc`). Its ``image`` is pulled; ``build.dockerfile`` (or the
older ``dockerFile``) and ``dockerComposeFile`` (a string or a list), each relative to the
``devcontainer.json``, are files to read as a Dockerfile and as compose files: each is a
:class:`~imagecheck.scanning._builds.Follow`, which the scan reads once, confined as the
``devcontainer.json`` was.

A Quadlet unit (podman-systemd.unit(5)) is systemd unit syntax: ``[Section]`` headers,
``Key=value`` lines, ``#`` and ``;`` comments, a trailing backslash continues a line. The
``Image=`` of ``[Container]`` (``*.container``) and of ``[Image]`` (``*.image``, a pull
unit) is the image podman pulls, unless it names another unit (``NAME.image``: that unit's
image; ``NAME.build``: what a build unit makes), which is skipped with the reason.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from pathlib import PurePath

from imagecheck.scanning._builds import BUILT_BY_QUADLET, Follow
from imagecheck.scanning._jsonc import document, get, text_of
from imagecheck.scanning._manifests import Found
from imagecheck.scanning._model import MAX_IMAGE_LENGTH, FileProblem, Occurrence, as_checked
from imagecheck.scanning._yamltree import Node, Sequence

__all__ = ["QUADLET_UNIT", "images_in_devcontainer", "images_in_quadlet"]

QUADLET_UNIT = "pulled by the quadlet unit"
_QUADLET_SECTIONS = frozenset({"Container", "Image"})


def images_in_devcontainer(text: str, file: str) -> Iterator[Found]:
    root = document(text, file)
    if isinstance(root, FileProblem):
        yield (root.line or 0, 0), root
        return
    if root is None:
        return
    name = text_of(get(root, "name"))
    image = get(root, "image")
    if text_of(image) is not None and image is not None:
        yield _occurrence(image, text_of(image) or "", file, name)
    directory = posixpath.dirname(PurePath(file).as_posix())
    build = get(root, "build")
    for dockerfile in (get(build, "dockerfile"), get(root, "dockerFile")):
        yield from _follow(dockerfile, directory, "dockerfile", file)
    compose = get(root, "dockerComposeFile")
    for item in compose.items if isinstance(compose, Sequence) else [compose]:
        yield from _follow(item, directory, "yaml", file)


def _occurrence(node: Node, text: str, file: str, name: str | None) -> Found:
    line = node.at[0]
    if len(text) > MAX_IMAGE_LENGTH:
        message = f"image longer than {MAX_IMAGE_LENGTH} characters"
        return node.at, FileProblem(file, line, message)
    checked, skipped = as_checked(text)
    return node.at, Occurrence(checked, file, line, "devcontainer", name, "image", skipped)


def _follow(node: Node | None, directory: str, fmt: str, file: str) -> Iterator[Found]:
    path = text_of(node)
    if node is None or not path or "${" in path:
        return  # ${localWorkspaceFolder}/...: a place on the developer's machine
    yield node.at, Follow(posixpath.join(directory, path), fmt, file, node.at[0])


def images_in_quadlet(text: str, file: str) -> Iterator[Found]:
    unit = PurePath(file).stem
    section = None
    for line, content in _logical_lines(text):
        if content.startswith("[") and content.endswith("]"):
            section = content[1:-1].strip()
            continue
        key, equals, value = content.partition("=")
        if not equals or key.strip() != "Image" or section not in _QUADLET_SECTIONS:
            continue
        image = _unquoted(value.strip())
        if not image:
            continue
        at = (line, 0)
        if len(image) > MAX_IMAGE_LENGTH:
            message = f"Image= longer than {MAX_IMAGE_LENGTH} characters"
            yield at, FileProblem(file, line, message)
            continue
        checked, skipped = as_checked(image)
        if image.endswith(".image"):
            skipped = f"{QUADLET_UNIT} {image}"
        elif image.endswith(".build"):
            skipped = f"{BUILT_BY_QUADLET} ({image})"
        yield at, Occurrence(checked, file, line, "quadlet", unit, section, skipped)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Each setting with the line it starts on: comments dropped, continuations joined."""
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped[0] in "#;"):
            continue
        if pending and stripped[:1] in ("#", ";"):
            continue  # systemd drops comment lines inside a continuation
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1] + " ")
            continue
        pending.append(stripped)
        yield start, "".join(pending).strip()
        pending = []
    if pending:
        yield start, "".join(pending).strip()


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
