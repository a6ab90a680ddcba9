"""``imagecheck scan``'s first half: find the image references in files, without the network.

Reads Kubernetes manifests (containers found by shape in any kind, :mod:`imagecheck.kube._workload`;
``List`` items), Docker Compose files (``services.<name>.image``), both in YAML or JSON,
kustomizations (their ``images:`` overrides rendered), Dockerfiles (``FROM``, ``COPY
--from``, ``RUN --mount=from=``, with ``ARG`` defaults substituted), CI configuration
(GitHub Actions workflows and actions, GitLab CI, CircleCI, Drone, Woodpecker, Bitbucket
Pipelines, Azure Pipelines: each occurrence's ``kind`` names the system), dev environments
(``devcontainer.json``, Quadlet units) and build tools' files (Skaffold, Tilt, bake), whose
images are skipped wherever the scan meets them::

    report = scan_files(["k8s/", "docker-compose.yml", "Dockerfile"])
    occurrences, problems = scan_paths(["k8s/"])  # the same, without the notes

Each :class:`Occurrence` is the reference *as written* (or as rendered: ``${TAG:-1}``'s
default, a kustomize override, with ``origin``), with its file and line; it is not parsed here,
so an invalid one still comes back for the checker to report. A template placeholder (``{{
.Values.image }}``, ``${IMAGE}``, ``$(TAG)``, an ``ARG`` without a default) comes back with
``skipped`` saying so. A file that cannot be read, or a YAML document that does not parse, is a
:class:`FileProblem`; the other documents and files are still scanned. Files skipped on purpose
(a Helm chart's raw templates, a ``.json`` file that is not a manifest) are each a
:class:`FileNote`, which is not a failure. Results are ordered by file (as given; sorted within
a directory), then by line.

Files may come from a hostile pull request: only regular files are read, capped,
never through a link out of the directory scanned; ARG substitution, YAML nesting, merge keys
and aliases are bounded, and each limit crossed is a :class:`FileProblem` on its line.

- ``_yamltree``: YAML events into nodes that keep their lines, aliases included
- ``_manifests``: Kubernetes and Compose images in those nodes
- ``_ci``: which documents are CI configuration (by path, else by shape), read by
  ``_ci_github``, ``_ci_gitlab``, ``_ci_pipelines`` (CircleCI, Drone, Woodpecker, Bitbucket)
  and ``_ci_azure`` over ``_ci_nodes``
- ``_dockerfile``: ``FROM``, ``COPY --from``, ``RUN --mount`` lines, continuations, stages
- ``_dfargs``: ``ARG`` substitution (quotes, escapes, ``${NAME:-default}``), bounded
- ``_json``: which ``.json`` files are manifests, and their text for the YAML reader
- ``_charts``: which files are a Helm chart's templates
- ``_kustfile``, ``_kustomize``: a kustomization read, and rendered over its resources
- ``_kustmerge``: the rendered images put among the scan's results
- ``_places``: images in Kubernetes objects outside containers, and those the platform fills
- ``_builds``: images the build makes, skipped scan-wide; named build contexts; files followed
- ``_formats``: the formats known by file name: ``_devenv`` (``devcontainer.json`` through
  ``_jsonc``, Quadlet units), ``_tilt`` (Tiltfiles), ``_bake`` (bake files, through ``_hcl``)
- ``_paths``: which files, read how (walks, confinement, bounded reads)
- ``_model``: the values a scan returns, and the template-placeholder rule
- ``_textscan``: ``scan_text``, one file's text by its format
- ``_files``: ``scan_files`` and ``scan_paths``
- ``_render``: a scan's findings and answers as text, JSON or GitHub workflow commands
"""

from imagecheck.scanning._files import scan_files, scan_paths
from imagecheck.scanning._model import (
    BUILT_BY_COMPOSE,
    PLACEHOLDER,
    FileNote,
    FileProblem,
    Occurrence,
    ScanReport,
)
from imagecheck.scanning._render import (
    render_scan_github,
    render_scan_json,
    render_scan_list_json,
    render_scan_list_text,
    render_scan_text,
)
from imagecheck.scanning._textscan import scan_text

__all__ = [
    "BUILT_BY_COMPOSE",
    "PLACEHOLDER",
    "FileNote",
    "FileProblem",
    "Occurrence",
    "ScanReport",
    "render_scan_github",
    "render_scan_json",
    "render_scan_list_json",
    "render_scan_list_text",
    "render_scan_text",
    "scan_files",
    "scan_paths",
    "scan_text",
]
