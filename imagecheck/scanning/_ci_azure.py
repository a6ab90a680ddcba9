"""Azure Pipelines: the images of container jobs and container resources
(https://learn.microsoft.com/en-us/azure/devops/pipelines/yaml-schema/).

- ``resources.containers[].image``: a container resource, named by its ``container`` alias.
- a job's ``container``: an image, the alias of a container resource (then the resource's
  image, already reported), or a mapping with ``image``. Azure looks a name up among the
  resources first. A bare name (``container: linux``) in a file that declares no container
  resource is a template's, whose resources are the including pipeline's: skipped as an
  alias, not checked as an image. Jobs are the pipeline itself (a
  single-job pipeline), ``jobs[]`` (``job`` and ``deployment``), and ``stages[].jobs[]``; a
  template file lists its jobs the same way.
- a job's ``services`` map names to container aliases: no image of their own.

``$(variable)``, ``$[ runtime ]`` and ``${{ template }}`` expressions are placeholders.
``pool.vmImage`` is a virtual machine, not a container image.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

from imagecheck.scanning._ci_nodes import Found, Value, get, image_field, items, text
from imagecheck.scanning._model import Occurrence
from imagecheck.scanning._yamltree import Scalar

__all__ = ["ALIAS_ELSEWHERE", "AZURE", "images_in_azure"]

AZURE = "azure-pipelines"
ALIAS_ELSEWHERE = "container resource alias of the including pipeline"
# A resource alias: "Acceptable values: [-_A-Za-z0-9]*".
_ALIAS = re.compile(r"[-_A-Za-z0-9]+")


def images_in_azure(root: Value, file: str) -> Iterator[Found]:
    aliases: set[str] = set()
    for resource in items(get(get(root, "resources"), "containers")):
        alias = text(get(resource, "container"))
        aliases.add(alias or "")
        yield from image_field(get(resource, "image"), file, AZURE, None, alias)
    jobs = [root, *items(get(root, "jobs"))]
    for stage in items(get(root, "stages")):
        jobs.extend(items(get(stage, "jobs")))
    for job in jobs:
        container = get(job, "container")
        if container is None:
            continue
        written = text(container) if isinstance(container.node, Scalar) else None
        if written in aliases:
            continue  # the resource's image, reported with the resource
        name = text(get(job, "job")) or text(get(job, "deployment"))
        for at, found in image_field(container, file, AZURE, name, key="image"):
            bare = written and not aliases and _ALIAS.fullmatch(written)
            if bare and isinstance(found, Occurrence) and found.skipped is None:
                yield at, replace(found, skipped=f"{ALIAS_ELSEWHERE} ({written})")
            else:
                yield at, found
