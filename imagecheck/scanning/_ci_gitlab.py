"""GitLab CI: the images of a ``.gitlab-ci.yml`` (https://docs.gitlab.com/ci/yaml/).

``image`` (a string, or a mapping with ``name``) and ``services`` (a list of strings or of
mappings with ``name``) at the top level (the old global defaults), under ``default:``, and in
every job. A job is any top-level key that is not a global keyword; a hidden job (``.name``)
is a template. Each image is reported once, where it is written, under the job that writes
it: a job that ``extends`` a template, or merges it with ``<<: *anchor``, inherits the image
(``extends`` deep-merges mappings and replaces lists, so whatever a job inherits is written in
some job or in ``default``), and a template may be extended from another file, so its image
is checked even when nothing in this file extends it. Through an alias, the image is the
alias's, on the alias's line, as everywhere in a scan.

Variables: ``image: $BUILD_IMAGE`` is expanded by GitLab from the variables it knows. A
variable written in the file's top-level ``variables:`` is substituted (its ``value`` when it
is a mapping), as compose's ``${X:-default}`` is: CI/CD settings can override it, as the
environment overrides a compose default. When any job sets the same variable in its own
``variables:``, the image depends on the job and stays a placeholder, as do predefined
variables (``$CI_REGISTRY_IMAGE``) and component inputs (``$[[ inputs.image ]]``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from imagecheck.scanning._ci_nodes import Found, Value, entries, get, image_field, items, text

__all__ = ["GITLAB", "GLOBAL_KEYWORDS", "images_in_gitlab"]

GITLAB = "gitlab-ci"
# Top-level keys that are not jobs: the global keywords, the old global defaults, and the
# header of a CI/CD component (spec:, in a document of its own).
GLOBAL_KEYWORDS = frozenset(
    {
        "after_script",
        "before_script",
        "cache",
        "default",
        "image",
        "include",
        "services",
        "spec",
        "stages",
        "types",
        "variables",
        "workflow",
    }
)
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def images_in_gitlab(root: Value, file: str) -> Iterator[Found]:
    jobs = [(name, job) for name, job in entries(root) if name not in GLOBAL_KEYWORDS]
    substitute = _substitution(root, [job for _, job in jobs])
    yield from _images(root, file, None, substitute)
    yield from _images(get(root, "default"), file, "default", substitute)
    for name, job in jobs:
        yield from _images(job, file, name, substitute)


def _images(
    job: Value | None, file: str, name: str | None, substitute: Callable[[str], str]
) -> Iterator[Found]:
    if job is None:
        return
    yield from image_field(get(job, "image"), file, GITLAB, name, substitute=substitute)
    for service in items(get(job, "services")):
        alias = text(get(service, "alias"))
        yield from image_field(service, file, GITLAB, name, alias, substitute=substitute)


def _substitution(root: Value, jobs: list[Value]) -> Callable[[str], str]:
    """Top-level variables with a literal value that no job sets again, substituted."""
    values: dict[str, str] = {}
    for name, value in entries(get(root, "variables")):
        literal = text(get(value, "value")) if get(value, "value") is not None else text(value)
        if name is not None and literal is not None:
            values[name] = literal
    for job in jobs:
        for name, _ in entries(get(job, "variables")):
            values.pop(name or "", None)

    def substitute(image: str) -> str:
        def one(match: re.Match[str]) -> str:
            return values.get(match.group(1) or match.group(2), match.group(0))

        return _VARIABLE.sub(one, image) if values else image

    return substitute
