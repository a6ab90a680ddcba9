"""The entry points of the package: scan files (which ones, read how: ``_paths``), text by
format, and the kustomizations met on the way (``_kustomize``).

Every file may come from a hostile pull request (issue #10): ``_paths`` reads only regular
files, bounded, never through a link out of what is scanned; a file yields at most
:data:`MAX_PROBLEMS` problems.

Some files are skipped on purpose, each with a :class:`FileNote` rather than a problem: a Helm
chart's raw templates (``_charts``), a ``.json`` file that is not a manifest (``_json``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import PurePath
from typing import TextIO

from imagecheck.scanning._charts import ChartTemplates, chart_note
from imagecheck.scanning._dockerfile import images_in_dockerfile
from imagecheck.scanning._json import is_json_name, manifest_text
from imagecheck.scanning._kustfile import KUSTOMIZATION_NAMES
from imagecheck.scanning._kustomize import Root, rendered
from imagecheck.scanning._manifests import AliasBudget, Found, images_in_document
from imagecheck.scanning._model import FileNote, FileProblem, Occurrence, ScanReport
from imagecheck.scanning._paths import (
    MAX_FILE_BYTES,
    MAX_STDIN_BYTES,
    STDIN,
    cwd,
    decode,
    files_named,
    is_dockerfile_name,
    leaves_cwd,
    read_file,
    read_stream,
)
from imagecheck.scanning._yamltree import SyntaxProblem, documents

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_PROBLEMS",
    "MAX_STDIN_BYTES",
    "STDIN",
    "scan_files",
    "scan_paths",
    "scan_text",
]

FORMATS = ("yaml", "json", "dockerfile")
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
    A JSON text that is not read is neither: :func:`scan_files` returns its note.
    """
    occurrences, problems, _ = _scan_text(text, file, fmt)
    return occurrences, problems


def scan_paths(
    paths: Sequence[str], *, stdin: TextIO | None = None
) -> tuple[list[Occurrence], list[FileProblem]]:
    """:func:`scan_files`' occurrences and problems, without its notes."""
    report = scan_files(paths, stdin=stdin)
    return report.occurrences, report.problems


def scan_files(
    paths: Sequence[str],
    *,
    stdin: TextIO | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ScanReport:
    """Scan files, directories (recursively) and ``-`` (``stdin``, else ``sys.stdin``).

    Files come in the order given, a directory's files sorted by path; hidden files and
    directories (``.git``) and ``node_modules`` are not entered, symbolic links to
    directories not followed. A file reached twice is scanned once. A path that does not
    exist, a file that is not a regular file, is too large, is a link out of the directory
    scanned (or, for a relative PATH, out of the working directory), or cannot be read as
    UTF-8 text, is a :class:`FileProblem`; none of these is read. A Helm chart's templates
    are not read either: a :class:`FileNote` for each chart's ``templates`` directory says
    so. A kustomization's images come as kustomize renders them
    (:mod:`imagecheck.scanning._kustomize`). ``progress`` is called with (files done, files
    in all) after each file.
    """
    report = ScanReport([], [], [])
    listing = _listing(paths)
    total = sum(not isinstance(entry, FileProblem) for entry in listing)
    charts = ChartTemplates()
    # A chart's templates directory (absolute, however its files were named): files skipped.
    templates: dict[str, int] = {}
    notes: list[str | FileNote] = []  # in file order; a chart's directory at its first file
    kustomizations: list[Root] = []  # rendered last: their overlays and bases may come later
    done = 0
    for entry in listing:
        if isinstance(entry, FileProblem):
            report.problems.append(entry)
            continue
        file, root = entry
        done += 1
        directory = None if file == "-" else charts.directory(file)
        if directory is not None:
            key = os.path.abspath(directory)
            if key not in templates:
                notes.append(directory)
            templates[key] = templates.get(key, 0) + 1
        else:
            note = _scan_file(file, root, stdin or sys.stdin, report, kustomizations)
            if note is not None:
                notes.append(note)
        if progress is not None:
            progress(done, total)
    read = {os.path.realpath(e[0]) for e in listing if not isinstance(e, FileProblem)}
    report.occurrences[:], report.problems[:] = rendered(
        kustomizations, report.occurrences, report.problems, read
    )
    report.notes.extend(
        FileNote(note, chart_note(templates[os.path.abspath(note)]))
        if isinstance(note, str)
        else note
        for note in notes
    )
    return report


def _listing(paths: Sequence[str]) -> list[tuple[str, str | None] | FileProblem]:
    """Every file to read, once, with the directory it must stay in (None: anywhere), and
    the paths that cannot be, in the order met: listed first, so that progress has a total."""
    listing: list[tuple[str, str | None] | FileProblem] = []
    problems: list[FileProblem] = []
    seen: set[str] = set()
    for path in paths:
        for file, root in files_named(path, problems):
            listing.extend(problems)
            problems.clear()
            key = file if file == "-" else os.path.realpath(file)
            if key not in seen:
                seen.add(key)
                listing.append((file, root))
        listing.extend(problems)
        problems.clear()
    return listing


def _scan_file(
    file: str, root: str | None, stdin: TextIO, report: ScanReport, kustomizations: list[Root]
) -> FileNote | None:
    """Read and scan one file into ``report``; its note, if it was not read on purpose. A
    kustomization is also kept in ``kustomizations``, with where its results go."""
    name = STDIN if file == "-" else file
    text = read_stream(stdin) if file == "-" else read_file(file, root)
    if isinstance(text, bytes):
        text = decode(text, name)
    if isinstance(text, FileProblem):
        report.problems.append(text)
        return None
    if PurePath(name).name in KUSTOMIZATION_NAMES:
        where = (len(report.occurrences), len(report.problems))
        # A directory named by a relative path: its overlays' bases may be anywhere in the
        # working directory (`scan overlays/prod/` reads ../../base), as named files may.
        confined_to = cwd() if root is not None and not leaves_cwd(root) else root
        kustomizations.append(Root(name, text, confined_to, *where))
    found, problems, note = _scan_text(text, name, None)
    report.occurrences.extend(found)
    report.problems.extend(problems)
    return note


def _scan_text(
    text: str, file: str, fmt: str | None
) -> tuple[list[Occurrence], list[FileProblem], FileNote | None]:
    if fmt is None:
        fmt = "dockerfile" if is_dockerfile_name(file) else "json" if is_json_name(file) else "yaml"
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
    if fmt == "dockerfile":
        found = (((0, 0), result) for result in images_in_dockerfile(text, file))  # in order
    else:
        found = _yaml_results(text, file)
    kept = sorted(_bounded(found, file), key=lambda item: item[0])  # stable: by position
    occurrences, problems = _split([result for _, result in kept])
    return occurrences, problems, None


def _yaml_results(text: str, file: str) -> Iterator[Found]:
    budget = AliasBudget()
    for document in documents(text):
        if isinstance(document, SyntaxProblem):
            line = document.line
            yield (line or 0, 0), FileProblem(file, line, document.message)
            continue
        yield from images_in_document(document, file, budget)
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
    results: list[Occurrence | FileProblem],
) -> tuple[list[Occurrence], list[FileProblem]]:
    occurrences = [result for result in results if isinstance(result, Occurrence)]
    problems = [result for result in results if isinstance(result, FileProblem)]
    return occurrences, problems
