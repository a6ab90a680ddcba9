"""Images the repository's own build makes are not missing: a scan-wide pass that skips them.

A build tool substitutes the images it builds wherever its configuration names them:
Skaffold replaces an artifact's image in the manifests it deploys, matching by repository
whatever the tag (so does Tilt); docker buildx bake tags what its targets build; Strimzi
builds and pushes a ``KafkaConnect``'s output image. Each reader reports such an image as
skipped, with a reason from :data:`PROPAGATED`; :func:`skip_built` then skips every other
occurrence in the scan whose repository is one of them, wherever it was read, before or
after the file that builds it.

A named build context (compose ``build.additional_contexts``, bake ``contexts``) stands in
for an image in a Dockerfile: ``FROM base`` with a context named ``base`` reads the context,
not ``docker.io/library/base``. The readers report each context's name as a
:class:`NamedContext` (a ``docker-image://`` context's own image is an occurrence: it is
checked), and :func:`skip_built` skips a Dockerfile's image that is exactly such a name.

A file can also name another file to read as a given format (a ``devcontainer.json``'s
Dockerfile or compose file): a :class:`Follow`, which ``scan_files`` reads once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TypeVar

from imagecheck.kube._workload import Tree
from imagecheck.scanning._model import FileProblem, Occurrence

__all__ = [
    "BUILT_BY_BAKE",
    "BUILT_BY_QUADLET",
    "BUILT_BY_SKAFFOLD",
    "BUILT_BY_STRIMZI",
    "BUILT_BY_TILT",
    "DOCKER_IMAGE",
    "NAMED_CONTEXT",
    "PROPAGATED",
    "Fact",
    "Follow",
    "NamedContext",
    "build_contexts",
    "repository",
    "skip_built",
    "stripped",
]

N = TypeVar("N")

BUILT_BY_SKAFFOLD = "built by skaffold"
BUILT_BY_STRIMZI = "built by Strimzi"
BUILT_BY_TILT = "built by tilt"
BUILT_BY_BAKE = "built by docker buildx bake"
BUILT_BY_QUADLET = "built by a podman quadlet .build unit"
NAMED_CONTEXT = "named build context"
# The skip reasons whose images are the same image wherever else a scan finds their name.
PROPAGATED = (BUILT_BY_SKAFFOLD, BUILT_BY_STRIMZI, BUILT_BY_TILT, BUILT_BY_BAKE, BUILT_BY_QUADLET)
# A build context that is an image: BuildKit pulls it (https://docs.docker.com/build/
# building/variables/#named-contexts, bake's and compose's contexts alike).
DOCKER_IMAGE = "docker-image://"


@dataclass(frozen=True, slots=True)
class NamedContext:
    """A build context's name, and where it is defined."""

    name: str
    file: str
    line: int


@dataclass(frozen=True, slots=True)
class Follow:
    """A file that ``file:line`` names, to be read as ``fmt`` (``dockerfile``, ``yaml``)."""

    path: str
    fmt: str
    file: str
    line: int
    root: str = ""  # the directory it must be inside (set by the scan)


Fact = NamedContext | Follow
"""What a reader learns about the scan beyond its own file's occurrences."""


def build_contexts(tree: Tree[N], build: N) -> Iterator[tuple[str, N, str]]:
    """A compose ``build``'s ``additional_contexts`` (a mapping, or a list of ``name=value``):
    each context's name, its value's node, and what to take off the value to get its image
    (``""`` when the context is not an image)."""
    contexts = tree.get(build, "additional_contexts")
    if contexts is None:
        return
    for key, value in tree.pairs(contexts):
        text = tree.text(value) or ""
        if key:
            yield key, value, DOCKER_IMAGE if text.startswith(DOCKER_IMAGE) else ""
    for item in tree.items(contexts):
        name, equals, text = (tree.text(item) or "").partition("=")
        if equals and name:
            image = text.startswith(DOCKER_IMAGE)
            yield name, item, f"{name}={DOCKER_IMAGE}" if image else ""


def stripped(
    result: Occurrence | FileProblem | Fact, prefix: str, skipped: str | None = None
) -> Occurrence | FileProblem | Fact:
    """An occurrence's image without ``prefix`` (``docker-image://``), skipped if ``skipped``
    says why; anything else as it is."""
    if not isinstance(result, Occurrence):
        return result
    return replace(
        result, image=result.image.removeprefix(prefix), skipped=skipped or result.skipped
    )


def repository(image: str) -> str:
    """``image`` without its digest and tag: ``registry:5000/a/b`` for ``registry:5000/a/b:1``."""
    name = image.partition("@")[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def skip_built(occurrences: list[Occurrence], contexts: list[NamedContext]) -> list[Occurrence]:
    """``occurrences``, each image that the scan's builds make (or a named context) skipped,
    with the reason and where the build names it. Two passes: linear in the scan's size."""
    built: dict[str, tuple[str, Occurrence]] = {}
    for o in occurrences:
        reason = _built_reason(o)
        if reason is not None:
            built.setdefault(repository(o.image), (reason, o))
    named: dict[str, NamedContext] = {}
    for context in contexts:
        named.setdefault(context.name, context)  # the first met names it
    if not built and not named:
        return occurrences
    return [_skipped(o, built, named) for o in occurrences]


def _built_reason(occurrence: Occurrence) -> str | None:
    if occurrence.skipped is None:
        return None
    return next((r for r in PROPAGATED if occurrence.skipped.startswith(r)), None)


def _skipped(
    o: Occurrence, built: dict[str, tuple[str, Occurrence]], named: dict[str, NamedContext]
) -> Occurrence:
    if o.skipped is not None:
        return o
    context = named.get(o.image) if o.kind == "Dockerfile" else None
    if context is not None:
        return replace(o, skipped=f"{NAMED_CONTEXT} {o.image} ({context.file}:{context.line})")
    found = built.get(repository(o.image))
    if found is None:
        return o
    reason, source = found
    return replace(o, skipped=f"{reason} ({source.image} at {source.file}:{source.line})")
