"""The entry points of the package: scan files (which ones, read how: ``_paths``), each by its
format (``_textscan``), and render the kustomizations met on the way (``_kustmerge``).

Every file may come from a hostile pull request: ``_paths`` reads only regular files, bounded,
never through a link out of what is scanned.

Some files are skipped on purpose, each with a :class:`FileNote` rather than a problem: a Helm
chart's raw templates (``_charts``), a ``.json`` file that is not a manifest (``_json``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import PurePath
from typing import TextIO

from imagecheck.scanning._builds import Fact, Follow, NamedContext, skip_built
from imagecheck.scanning._charts import ChartTemplates, chart_note
from imagecheck.scanning._kustfile import KUSTOMIZATION_NAMES
from imagecheck.scanning._kustmerge import Root, rendered
from imagecheck.scanning._model import FileNote, FileProblem, Occurrence, ScanReport
from imagecheck.scanning._paths import (
    STDIN,
    cwd,
    decode,
    files_named,
    is_within,
    leaves_cwd,
    read_file,
    read_stream,
)
from imagecheck.scanning._textscan import scan_text_noted

__all__ = ["scan_files", "scan_paths"]


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

    Files come in the order given, a directory's files sorted by path: hidden ones included,
    ``.git``, ``node_modules`` and what git ignores left out (:mod:`._walk`), symbolic links
    to directories not followed. A file reached twice is scanned once. A path that does not
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
    facts: list[Fact] = []  # named build contexts, files named by others (_builds)
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
            note = _scan_file(file, root, stdin or sys.stdin, report, kustomizations, facts)
            if note is not None:
                notes.append(note)
        if progress is not None:
            progress(done, total)
    read = {os.path.realpath(e[0]) for e in listing if not isinstance(e, FileProblem)}
    _follow(facts, read, report)
    report.occurrences[:], report.problems[:] = rendered(
        kustomizations, report.occurrences, report.problems, read
    )
    contexts = [fact for fact in facts if isinstance(fact, NamedContext)]
    report.occurrences[:] = skip_built(report.occurrences, contexts)
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
    file: str,
    root: str | None,
    stdin: TextIO,
    report: ScanReport,
    kustomizations: list[Root],
    facts: list[Fact],
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
    before = len(facts)
    found, problems, note = scan_text_noted(text, name, None, facts)
    report.occurrences.extend(found)
    report.problems.extend(problems)
    for index in range(before, len(facts)):
        fact = facts[index]
        if isinstance(fact, Follow):  # confined as the file that names it
            facts[index] = replace(fact, root=_confined(file, root))
    return note


def _confined(file: str, root: str | None) -> str:
    """Where a file that ``file`` names may be: inside ``root``, else (``file`` was named on
    the command line) inside its workspace, the directory that holds ``.devcontainer/``,
    else ``file``'s own directory."""
    if root is not None:
        return root
    directory = os.path.dirname(os.path.abspath(file))
    if os.path.basename(directory) == ".devcontainer":
        return os.path.dirname(directory)
    return directory


def _follow(facts: list[Fact], read: set[str], report: ScanReport) -> None:
    """Scan the files that scanned files name (a dev container's Dockerfile), each once, and
    only inside the tree its namer was confined to; the files they name are not followed."""
    for fact in facts:
        if not isinstance(fact, Follow) or fact.file == STDIN:
            continue
        path, root = fact.path, fact.root
        key = os.path.realpath(path)
        if key in read:
            continue
        read.add(key)
        data: bytes | FileProblem = FileProblem(path, None, f"not scanned: outside {root}")
        if is_within(key, os.path.realpath(root)):
            data = read_file(path, root)
        text = decode(data, path) if isinstance(data, bytes) else data
        if isinstance(text, FileProblem):
            where = f"{fact.file}:{fact.line}"
            report.problems.append(replace(text, message=f"{text.message} (named at {where})"))
            continue
        found, problems, _ = scan_text_noted(text, path, fact.fmt)
        report.occurrences.extend(found)
        report.problems.extend(problems)
