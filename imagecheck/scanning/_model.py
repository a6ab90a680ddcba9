"""The values a scan returns, and the one rule every format shares: template placeholders."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "BUILT_BY_KO",
    "KO_PREFIX",
    "MAX_IMAGE_LENGTH",
    "FileNote",
    "FileProblem",
    "Occurrence",
    "ScanReport",
    "as_checked",
    "placeholder_in",
]


# An image as written (or as a Dockerfile's ARGs make it) longer than this is a problem, not an
# occurrence: a valid reference is at most ~520 (a 255-character name, a 128-character tag, a
# digest), and every occurrence is printed.
MAX_IMAGE_LENGTH = 4096
# The skip reason for an image a compose service builds itself (--strict does not undo it).
BUILT_BY_COMPOSE = "built by compose"
# The skip reason prefix for template placeholders (--strict counts them as invalid).
PLACEHOLDER = "template placeholder"
# ko (https://ko.build) replaces ko://IMPORT-PATH with the image it builds and pushes: like a
# compose build, not a placeholder that --strict would count as invalid.
KO_PREFIX = "ko://"
BUILT_BY_KO = "built by ko"


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One image reference found in a file, as written there.

    ``image`` is not parsed: an invalid reference is still an occurrence (the checker reports
    it). ``skipped`` says why it is not to be checked, e.g. ``"template placeholder
    {{ .Values.image }}"``; whether a skipped image fails the run is the caller's decision.
    ``origin`` is set when the image is not the one written at ``file:line`` but one rendered
    from it (kustomize ``images:``): then ``file:line`` is the override and ``origin`` the
    resource's line it rewrites.
    """

    image: str
    file: str
    line: int
    kind: str
    name: str | None
    container: str | None
    skipped: str | None = None
    # Where the image as written is, when ``file`` and ``line`` are those of something that
    # changes it (a kustomization's ``images:`` override): "base/deploy.yaml:12".
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class FileProblem:
    """A file, or part of one, that could not be scanned; ``message`` is one line."""

    file: str
    line: int | None
    message: str


@dataclass(frozen=True, slots=True)
class FileNote:
    """Files deliberately not scanned, which is not a problem: a Helm chart's raw templates
    (``file`` is their ``templates`` directory), a ``.json`` file that is neither valid JSON
    nor a manifest. ``message`` is one line saying why."""

    file: str
    message: str


@dataclass(frozen=True, slots=True)
class ScanReport:
    """What a scan found (by file, then line), what could not be read, and what was not read
    on purpose."""

    occurrences: list[Occurrence]
    problems: list[FileProblem]
    notes: list[FileNote]


# Helm/Go templates, shell and compose interpolation (${IMAGE}, ${TAG:-1}), Tekton and
# Kubernetes-style $(TAG), bare $IMAGE; CI expressions: GitHub's and Azure's ${{ matrix.image }},
# Azure's runtime $[ variables.image ], GitLab's inputs $[[ inputs.image ]], CircleCI's
# << parameters.image >>. "$", "{", "[" and "<" are never part of a valid reference, so a match
# cannot hide a real image.
_PLACEHOLDER = re.compile(
    r"\{\{.*?(?:\}\}|$)|\$\{\{.*?(?:\}\}|$)|\$\{[^}]*\}?|\$\([^)]*\)?"
    r"|\$\[\[.*?(?:\]\]|$)|\$\[[^\]]*\]?|<<.*?(?:>>|$)|\$[A-Za-z_][A-Za-z0-9_]*",
    re.DOTALL,
)


def placeholder_in(text: str) -> str | None:
    """The first template placeholder in ``text``, as written, or None."""
    match = _PLACEHOLDER.search(text)
    return None if match is None else match.group(0)


# ${NAME:-default} and ${NAME-default} with a default that holds no other placeholder: shell,
# envsubst and compose (https://docs.docker.com/compose/how-tos/environment-variables/
# variable-interpolation/) all give the default when NAME is not set.
_DEFAULTED = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^${}]*)\}")


def as_checked(text: str) -> tuple[str, str | None]:
    """The image to check for an image field's ``text``, and why it is skipped (None: it is
    to be checked). ``${TAG:-1.2}`` is checked as its default (innermost first, so
    ``${A:-${B:-x}}`` is ``x``); any other placeholder skips the image, as does a ``ko://``
    import path."""
    if text.startswith(KO_PREFIX):
        return text, f"{BUILT_BY_KO} ({text})"
    image = text
    while "${" in image:
        image, count = _DEFAULTED.subn(r"\1", image)
        if not count:
            break
    placeholder = placeholder_in(image)
    if placeholder is not None:
        return text, f"{PLACEHOLDER} {placeholder_in(text)}"
    return image, None
