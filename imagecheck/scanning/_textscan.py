"""One file's text, by format: the images in it, by line, and what could not be read.

Both the scan of named files (``_files``) and the kustomizations it renders (``_kustomize``),
which read their resources themselves, scan text here; a file yields at most
:data:`MAX_PROBLEMS` problems.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator

from imagecheck.scanning._builds import Fact
from imagecheck.scanning._ci import ci_format_named, images_in_ci
from imagecheck.scanning._dockerfile import images_in_dockerfile
from imagecheck.scanning._formats import BUILD_FORMATS, named_format
from imagecheck.scanning._json import is_json_name, manifest_text
from imagecheck.scanning._manifests import AliasBudget, Found, images_in_document
from imagecheck.scanning._model import FileNote, FileProblem, Occurrence
from imagecheck.scanning._paths import is_dockerfile_name
from imagecheck.scanning._yamltree import SyntaxProblem, documents

__all__ = ["FORMATS", "MAX_PROBLEMS", "scan_text", "scan_text_noted"]

FORMATS = ("yaml", "json", "dockerfile", *BUILD_FORMATS)
# After this many, a file's problems are one more line, and the rest of the file is not read:
# every YAML syntax error re-parses the rest of the file, and the output stays short.
MAX_PROBLEMS = 100


def scan_text(
    text: str, file: str, *, fmt: str | None = None
) -> tuple[list[Occurrence], list[FileProblem]]:
    """The images in one file's text, by line, and what could not be read.

    ``fmt`` is ``"yaml"`` (Kubernetes manifests, Compose files), ``"json"`` (the same, in
    JSON: see ``_json`` for which JSON files hold images) or ``"dockerfile"``; None guesses
    from ``file``'s name (``Dockerfile``, ``Dockerfile.*``, ``*.Dockerfile``,
    ``Containerfile``...; ``*.json``), else YAML. ``file`` is only used to name the file in
    results. After :data:`MAX_PROBLEMS` problems, one more says that the rest is not scanned.
    A JSON text that is not read is neither: :func:`~imagecheck.scanning.scan_files` returns
    its note.
    """
    occurrences, problems, _ = scan_text_noted(text, file, fmt)
    return occurrences, problems


def scan_text_noted(
    text: str, file: str, fmt: str | None, facts: list[Fact] | None = None
) -> tuple[list[Occurrence], list[FileProblem], FileNote | None]:
    """:func:`scan_text`, with the note of a text not read on purpose (a ``.json`` file that is
    not a manifest); what the text says about the rest of the scan (named build contexts,
    files to read) is added to ``facts``."""
    if fmt is None:
        fmt = named_format(file) or (
            "dockerfile" if is_dockerfile_name(file) else "json" if is_json_name(file) else "yaml"
        )
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    text = text.removeprefix("\ufeff")
    if fmt == "json":
        manifest = manifest_text(text, file)
        if manifest is None or isinstance(manifest, FileNote):
            return [], [], manifest
        if isinstance(manifest, FileProblem):
            return [], [manifest], None
        text, fmt = manifest, "yaml"
    found: Iterable[Found]
    if fmt in BUILD_FORMATS:
        found = BUILD_FORMATS[fmt](text, file)
    elif fmt == "dockerfile":
        found = (((0, 0), result) for result in images_in_dockerfile(text, file))  # in order
    else:
        found = _yaml_results(text, file)
    kept = sorted(_bounded(found, file), key=lambda item: item[0])  # stable: by position
    occurrences, problems = _split([result for _, result in kept])
    if facts is not None:
        facts.extend(result for _, result in kept if isinstance(result, Fact))
    return occurrences, problems, None


def _yaml_results(text: str, file: str) -> Iterator[Found]:
    budget = AliasBudget()
    named = ci_format_named(file)  # CI files by path; others by shape, document by document
    for document in documents(text):
        if isinstance(document, SyntaxProblem):
            line = document.line
            yield (line or 0, 0), FileProblem(file, line, document.message)
            continue
        ci = images_in_ci(document, file, budget, named)
        yield from images_in_document(document, file, budget) if ci is None else ci
        if budget.exhausted:
            return  # reported once, where it ran out; the rest would end the same way


def _bounded(found: Iterable[Found], file: str) -> list[Found]:
    """The results until the file's :data:`MAX_PROBLEMS` + 1st problem, which ends them."""
    kept: list[Found] = []
    problems = 0
    for item in found:
        if isinstance(item[1], FileProblem):
            if problems == MAX_PROBLEMS:
                message = f"more than {MAX_PROBLEMS} problems: the rest is not scanned"
                kept.append(((sys.maxsize, 0), FileProblem(file, None, message)))
                break
            problems += 1
        kept.append(item)
    return kept


def _split(
    results: list[Occurrence | FileProblem | Fact],
) -> tuple[list[Occurrence], list[FileProblem]]:
    occurrences = [result for result in results if isinstance(result, Occurrence)]
    problems = [result for result in results if isinstance(result, FileProblem)]
    return occurrences, problems
