"""GitHub Actions: the images a workflow's jobs run in, and the image a Docker action runs.

A workflow (https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-syntax):
``jobs.<id>.container`` (an image, or a mapping with ``image``), ``jobs.<id>.services.<id>``
(a mapping with ``image``; an empty image turns the service off), and ``uses:
docker://IMAGE`` in a job's ``steps``. Any other ``uses`` (``owner/repo@ref``, ``./path``) is
an action or a reusable workflow, not an image.

An action's metadata, ``action.yml`` (https://docs.github.com/en/actions/reference/
workflows-and-actions/metadata-syntax): ``runs.image: docker://IMAGE`` when ``runs.using`` is
``docker`` (``runs.image: Dockerfile`` is a build, not an image), and ``uses: docker://IMAGE``
in a composite action's ``runs.steps``.

``${{ matrix.image }}`` and every other expression are placeholders: skipped, named.
"""

from __future__ import annotations

from collections.abc import Iterator

from imagecheck.scanning._ci_nodes import Found, Value, entries, get, image_field, items, text

__all__ = ["ACTION", "WORKFLOW", "images_in_action", "images_in_workflow"]

WORKFLOW = "github-actions"
ACTION = "github-action"
_DOCKER = "docker://"


def images_in_workflow(root: Value, file: str) -> Iterator[Found]:
    for job_id, job in entries(get(root, "jobs")):
        yield from image_field(get(job, "container"), file, WORKFLOW, job_id, key="image")
        for service, spec in entries(get(job, "services")):
            yield from image_field(spec, file, WORKFLOW, job_id, service, key="image")
        yield from _docker_steps(get(job, "steps"), file, WORKFLOW, job_id)


def images_in_action(root: Value, file: str) -> Iterator[Found]:
    runs = get(root, "runs")
    name = text(get(root, "name"))
    if (text(get(runs, "using")) or "").lower() == "docker":
        yield from image_field(get(runs, "image"), file, ACTION, name, prefix=_DOCKER)
    yield from _docker_steps(get(runs, "steps"), file, ACTION, name)


def _docker_steps(steps: Value | None, file: str, kind: str, name: str | None) -> Iterator[Found]:
    for step in items(steps):
        step_name = text(get(step, "name")) or text(get(step, "id"))
        yield from image_field(get(step, "uses"), file, kind, name, step_name, prefix=_DOCKER)
