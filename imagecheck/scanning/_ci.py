"""Which YAML documents are CI configuration, and of which system: by the file's path first,
then, for any other YAML file, by a shape no other format has.

By path (the names each system reads): ``.github/workflows/*.yml``, ``action.yml``,
``.gitlab-ci.yml`` and ``*.gitlab-ci.yml``, ``.circleci/config.yml``, ``.drone.yml``,
``.woodpecker.yml`` and ``.woodpecker/*.yml``, ``bitbucket-pipelines.yml``,
``azure-pipelines.yml`` and any YAML in an ``azure-pipelines`` or ``.azure-pipelines``
directory. A document with both ``apiVersion`` and ``kind`` is a Kubernetes manifest wherever
it is.

By shape, for the files a pipeline includes under names of their own (a GitLab ``include:``,
an Azure template, a workflow kept elsewhere), when the document is a mapping without
``apiVersion``:

- ``kind: pipeline``: Drone (Kubernetes objects always have ``apiVersion``);
- ``on`` and a ``jobs`` mapping: a GitHub workflow; ``runs`` with ``using``: an action;
- ``version`` 2 or 2.1 and a ``jobs`` or ``executors`` mapping: CircleCI;
- ``pipelines`` whose keys are Bitbucket's (``default``, ``branches``...): Bitbucket;
- ``stages`` or ``jobs`` lists of ``stage``/``job``/``deployment`` mappings, or
  ``resources.containers``: Azure Pipelines;
- a top-level job with ``script``, or a template (``.name``) with ``image``, ``services``,
  ``script`` or ``extends``: GitLab CI.

Detection does not depend on how a file was found: named on the command line or met in a
directory walk, its path decides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import PurePath

from imagecheck.scanning._ci_azure import AZURE, images_in_azure
from imagecheck.scanning._ci_github import (
    ACTION,
    WORKFLOW,
    images_in_action,
    images_in_workflow,
)
from imagecheck.scanning._ci_gitlab import GITLAB, GLOBAL_KEYWORDS, images_in_gitlab
from imagecheck.scanning._ci_nodes import Found, LimitReached, Value, entries, get, items, text
from imagecheck.scanning._ci_pipelines import (
    BITBUCKET,
    CIRCLECI,
    DRONE,
    WOODPECKER,
    images_in_bitbucket,
    images_in_circleci,
    images_in_drone,
    images_in_woodpecker,
)
from imagecheck.scanning._manifests import AliasBudget
from imagecheck.scanning._model import FileProblem
from imagecheck.scanning._yamltree import Mapping, Node, Scalar, Sequence

__all__ = ["CI_FORMATS", "ci_format_named", "images_in_ci"]

Reader = Callable[[Value, str], Iterator[Found]]
_READERS: dict[str, Reader] = {
    WORKFLOW: images_in_workflow,
    ACTION: images_in_action,
    GITLAB: images_in_gitlab,
    CIRCLECI: images_in_circleci,
    DRONE: images_in_drone,
    WOODPECKER: images_in_woodpecker,
    BITBUCKET: images_in_bitbucket,
    AZURE: images_in_azure,
}
CI_FORMATS = tuple(_READERS)
_YAML = (".yml", ".yaml")
_BITBUCKET_PIPELINES = frozenset(
    {"default", "branches", "tags", "bookmarks", "custom", "pull-requests"}
)
_GITLAB_TEMPLATE_KEYS = ("image", "services", "script", "extends")
_AZURE_JOB_KEYS = ("job", "deployment", "template")


def ci_format_named(file: str) -> str | None:
    """The CI system whose file ``file`` is by its path alone, or None."""
    path = PurePath(file)
    name, parents = path.name, [part.lower() for part in path.parts[:-1]]
    parent = parents[-1] if parents else ""
    if not name.lower().endswith(_YAML):
        return None
    stem = name.lower().rsplit(".", 1)[0]
    found = None
    if parents[-2:] == [".github", "workflows"]:
        found = WORKFLOW
    elif stem == "action":
        found = ACTION
    elif stem.endswith(".gitlab-ci") or stem == ".gitlab-ci":
        found = GITLAB
    elif parent == ".circleci" and stem == "config":
        found = CIRCLECI
    elif stem == ".drone":
        found = DRONE
    elif stem == ".woodpecker" or parent == ".woodpecker":
        found = WOODPECKER
    elif stem == "bitbucket-pipelines":
        found = BITBUCKET
    elif stem == "azure-pipelines" or {"azure-pipelines", ".azure-pipelines"} & set(parents):
        found = AZURE
    return found


def images_in_ci(
    root: Node, file: str, budget: AliasBudget, named: str | None
) -> Iterator[Found] | None:
    """The images of one document read as the CI configuration it is (``named``: what the
    file's path says, :func:`ci_format_named`); None when it is not CI configuration."""
    document = Value(Scalar("", (0, 0), None, None), budget).child(root)
    if not isinstance(document.node, Mapping):
        return None
    try:
        if get(document, "apiVersion") is not None and get(document, "kind") is not None:
            return None
        fmt = named or _shape(document)
    except LimitReached as exc:
        return iter([(exc.at, FileProblem(file, exc.at[0], exc.message))])
    return None if fmt is None else _guarded(_READERS[fmt](document, file), file)


def _guarded(found: Iterator[Found], file: str) -> Iterator[Found]:
    try:
        yield from found
    except LimitReached as exc:
        yield exc.at, FileProblem(file, exc.at[0], exc.message)


def _shape(root: Value) -> str | None:
    if text(get(root, "kind")) == "pipeline":
        return DRONE
    keys = {key for key, _ in entries(root)}
    checks: list[tuple[str, Callable[[Value, set[str | None]], bool]]] = [
        (WORKFLOW, _is_workflow),
        (ACTION, _is_action),
        (CIRCLECI, _is_circleci),
        (BITBUCKET, _is_bitbucket),
        (AZURE, _is_azure),
        (GITLAB, _is_gitlab),
    ]
    return next((fmt for fmt, check in checks if check(root, keys)), None)


def _is_workflow(root: Value, keys: set[str | None]) -> bool:
    return "on" in keys and _is_mapping(get(root, "jobs"))


def _is_action(root: Value, keys: set[str | None]) -> bool:
    return get(get(root, "runs"), "using") is not None


def _is_circleci(root: Value, keys: set[str | None]) -> bool:
    version = text(get(root, "version"))
    sections = (_is_mapping(get(root, key)) for key in ("jobs", "executors"))
    return version in ("2", "2.0", "2.1") and any(sections)


def _is_bitbucket(root: Value, keys: set[str | None]) -> bool:
    pipelines = {key for key, _ in entries(get(root, "pipelines"))}
    return bool(pipelines) and pipelines <= _BITBUCKET_PIPELINES


def _is_azure(root: Value, keys: set[str | None]) -> bool:
    if any(True for _ in items(get(get(root, "resources"), "containers"))):
        return True
    listed = [*items(get(root, "stages")), *items(get(root, "jobs"))]
    return any(get(item, key) is not None for item in listed for key in ("stage", *_AZURE_JOB_KEYS))


def _is_gitlab(root: Value, keys: set[str | None]) -> bool:
    for key, job in entries(root):
        if key is None or key in GLOBAL_KEYWORDS or not _is_mapping(job):
            continue
        if key.startswith("."):
            if any(get(job, field) is not None for field in _GITLAB_TEMPLATE_KEYS):
                return True
        elif _is_script(get(job, "script")):
            return True
    return False


def _is_script(value: Value | None) -> bool:
    if value is None:
        return False
    if isinstance(value.node, Sequence):
        return all(isinstance(item.node, Scalar | Sequence) for item in items(value))
    return isinstance(value.node, Scalar)


def _is_mapping(value: Value | None) -> bool:
    return value is not None and isinstance(value.node, Mapping)
