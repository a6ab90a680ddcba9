"""CircleCI, Drone, Woodpecker and Bitbucket Pipelines: where each writes its images.

- CircleCI (https://circleci.com/docs/reference/configuration-reference/): ``docker:`` lists
  of ``image:`` under ``jobs.<id>`` and ``executors.<id>``, and under the same keys of an
  orb written inline (``orbs.<name>.jobs``). ``machine.image`` is a virtual machine, not a
  container image. ``<< parameters.tag >>`` is a placeholder.
- Drone (https://docs.drone.io/pipeline/docker/syntax/): a ``kind: pipeline`` document's
  ``steps[].image`` and ``services[].image``, whatever its ``type``: the docker and kubernetes
  runners run every step in its image, the VM runners a step that names one.
- Woodpecker (https://woodpecker-ci.org/docs/usage/workflow-syntax): ``steps``, ``services``
  and ``clone``, each a list or a mapping of name to step, with ``image``; ``pipeline:`` is the
  old name of ``steps``.
- Bitbucket Pipelines (https://support.atlassian.com/bitbucket-cloud/docs/
  bitbucket-pipelines-configuration-reference/): the top-level ``image`` (a string or a
  mapping with ``name``), every ``step``'s ``image`` under ``pipelines`` (in ``parallel`` and
  ``stage`` groups too, at any depth up to :data:`MAX_STEP_DEPTH`), and
  ``definitions.services.<name>.image``. A step written under ``definitions`` to be aliased
  is reported where it is used.
"""

from __future__ import annotations

from collections.abc import Iterator

from imagecheck.scanning._ci_nodes import (
    Found,
    Value,
    entries,
    get,
    image_field,
    items,
    members,
    text,
)

__all__ = [
    "BITBUCKET",
    "CIRCLECI",
    "DRONE",
    "MAX_STEP_DEPTH",
    "WOODPECKER",
    "images_in_bitbucket",
    "images_in_circleci",
    "images_in_drone",
    "images_in_woodpecker",
]

CIRCLECI = "circleci"
DRONE = "drone"
WOODPECKER = "woodpecker"
BITBUCKET = "bitbucket-pipelines"
# Bitbucket nests a step in a pipeline, a parallel group and a stage: a few levels.
MAX_STEP_DEPTH = 16


def images_in_circleci(root: Value, file: str) -> Iterator[Found]:
    yield from _circleci(root, file)
    for _, orb in entries(get(root, "orbs")):  # an orb's name is a reference; its body inline
        yield from _circleci(orb, file)


def _circleci(config: Value, file: str) -> Iterator[Found]:
    for section in ("jobs", "executors"):
        for name, job in entries(get(config, section)):
            for image in items(get(job, "docker")):
                yield from image_field(image, file, CIRCLECI, name, key="image")


def images_in_drone(root: Value, file: str) -> Iterator[Found]:
    if text(get(root, "kind")) != "pipeline":
        return
    name = text(get(root, "name"))
    for section in ("steps", "services"):
        for step in items(get(root, section)):
            step_name = text(get(step, "name"))
            yield from image_field(get(step, "image"), file, DRONE, name, step_name)


def images_in_woodpecker(root: Value, file: str) -> Iterator[Found]:
    for section in ("steps", "pipeline", "services", "clone"):
        for name, step in members(get(root, section)):
            yield from image_field(get(step, "image"), file, WOODPECKER, None, name)


def images_in_bitbucket(root: Value, file: str) -> Iterator[Found]:
    yield from image_field(get(root, "image"), file, BITBUCKET, None)
    for name, service in entries(get(get(root, "definitions"), "services")):
        yield from image_field(get(service, "image"), file, BITBUCKET, None, name)
    yield from _bitbucket_steps(get(root, "pipelines"), file)


def _bitbucket_steps(pipelines: Value | None, file: str) -> Iterator[Found]:
    """Every ``step`` mapping under ``pipelines``, depth first, in the order written."""
    stack: list[tuple[Value, int]] = [] if pipelines is None else [(pipelines, 0)]
    while stack:
        value, depth = stack.pop()
        children: list[Value] = []
        if depth < MAX_STEP_DEPTH:
            for key, child in entries(value):
                if key == "step":
                    step = text(get(child, "name"))
                    yield from image_field(get(child, "image"), file, BITBUCKET, step)
                else:
                    children.append(child)
            children.extend(items(value))
        stack.extend((child, depth + 1) for child in reversed(children))
