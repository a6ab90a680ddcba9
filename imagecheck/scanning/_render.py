"""``imagecheck scan``'s output: its findings and their answers as text, JSON, or GitHub
workflow commands that annotate a pull request's files."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from imagecheck._text import printable
from imagecheck.render import as_written, shown, status_groups
from imagecheck.render import github_escape as _github_escape
from imagecheck.render import printable_line as _line
from imagecheck.result import CheckResult, Status
from imagecheck.scanning._model import FileNote, FileProblem, Occurrence


def _where(occurrence: Occurrence) -> str:
    parts = [p for p in (occurrence.kind, occurrence.name) if p]
    what = "/".join(parts)
    if occurrence.container and occurrence.container != occurrence.name:
        what += f", container {occurrence.container}"
    if occurrence.origin:
        what += f"{', ' if what else ''}rewrites {occurrence.origin}"
    return _line(f"{occurrence.file}:{occurrence.line}" + (f" ({what})" if what else ""))


def _file_lines(problems: Sequence[FileProblem], notes: Sequence[FileNote]) -> list[str]:
    """``error`` for each file that could not be read, ``note`` for each skipped on purpose."""
    lines = [
        f"error    {_line(p.file)}{f':{p.line}' if p.line else ''}  {_line(p.message)}"
        for p in problems
    ]
    lines.extend(f"note     {_line(n.file)}  {_line(n.message)}" for n in notes)
    return lines


def render_scan_text(
    occurrences: Sequence[Occurrence],
    results: Mapping[str, CheckResult],
    problems: Sequence[FileProblem],
    notes: Sequence[FileNote] = (),
) -> str:
    """Grouped by status, worst first; each image once, with every place it is used."""
    lines = _file_lines(problems, notes)
    places: dict[str, list[Occurrence]] = {}
    for o in occurrences:
        if not o.skipped:
            places.setdefault(o.image, []).append(o)
    lines.extend(status_groups(places, results, _where))
    skipped = [o for o in occurrences if o.skipped]
    if skipped:
        lines.append(f"skipped ({len(skipped)})")
        lines.extend(
            f"  {_line(o.image)}  {_line(o.skipped or '')}\n    {_where(o)}" for o in skipped
        )
    return "\n".join(lines)


def _occurrence_dict(o: Occurrence) -> dict[str, Any]:
    return {
        "file": o.file,
        "line": o.line,
        "kind": o.kind,
        "name": o.name,
        "container": o.container,
        "image": o.image,
        "skipped": o.skipped,
        "origin": o.origin,
    }


def _scan_json(
    occurrences: list[dict[str, Any]], problems: Sequence[FileProblem], notes: Sequence[FileNote]
) -> str:
    return json.dumps(
        {
            "occurrences": occurrences,
            "problems": [{"file": p.file, "line": p.line, "message": p.message} for p in problems],
            "notes": [{"file": n.file, "message": n.message} for n in notes],
        },
        indent=2,
    )


def render_scan_json(
    occurrences: Sequence[Occurrence],
    results: Mapping[str, CheckResult],
    problems: Sequence[FileProblem],
    notes: Sequence[FileNote] = (),
) -> str:
    """Every occurrence with its ``result`` (``check --output json``'s object; null when
    skipped), the problems and the notes."""
    found = [
        {**_occurrence_dict(o), "result": None if o.skipped else results[o.image].to_dict()}
        for o in occurrences
    ]
    return _scan_json(found, problems, notes)


def render_scan_list_text(
    occurrences: Sequence[Occurrence],
    invalid: Mapping[str, CheckResult],
    problems: Sequence[FileProblem],
    notes: Sequence[FileNote] = (),
) -> str:
    """``scan --list``: a table of every occurrence in file order (a skipped one with its
    reason, an ``invalid`` reference with why, a rewritten one with where it was written),
    then the files with problems and the notes."""
    rows = [("FILE:LINE", "KIND/NAME", "CONTAINER", "IMAGE")] if occurrences else []
    for o in occurrences:
        what = "/".join(p for p in (o.kind, o.name) if p) or "-"
        image = (o.image if o.skipped else as_written(o.image)) + _remark(o, invalid)
        rows.append((f"{o.file}:{o.line}", what, o.container or "-", image))
    cells = [[_line(cell) for cell in row] for row in rows]
    widths = [max((len(row[i]) for row in cells), default=0) for i in range(3)]
    lines = ["  ".join([*(row[i].ljust(widths[i]) for i in range(3)), row[3]]) for row in cells]
    return "\n".join(lines + _file_lines(problems, notes))


def _remark(o: Occurrence, invalid: Mapping[str, CheckResult]) -> str:
    """Why ``--list`` would not check ``o`` as written, in parentheses; or nothing."""
    said = [f"skipped: {o.skipped}"] if o.skipped else []
    if not o.skipped and o.image in invalid:
        said.append(f"invalid: {invalid[o.image].message}")
    if o.origin:
        said.append(f"rewrites {o.origin}")
    return f"  ({'; '.join(said)})" if said else ""


def render_scan_list_json(
    occurrences: Sequence[Occurrence],
    invalid: Mapping[str, CheckResult],
    problems: Sequence[FileProblem],
    notes: Sequence[FileNote] = (),
) -> str:
    """``scan --list --output json``: as ``render_scan_json``, each occurrence with
    ``invalid`` (why its reference is invalid, or null) instead of ``result``."""
    found = [
        {
            **_occurrence_dict(o),
            "invalid": None if o.skipped or o.image not in invalid else invalid[o.image].message,
        }
        for o in occurrences
    ]
    return _scan_json(found, problems, notes)


def _skip_line(o: Occurrence) -> str:
    """A skipped image and why, on one line: both come from the file (a compose service's name
    may hold a tab)."""
    return printable(f"{o.image}: {o.skipped}", sys.maxsize)


def render_scan_github(
    occurrences: Sequence[Occurrence],
    results: Mapping[str, CheckResult],
    problems: Sequence[FileProblem],
    notes: Sequence[FileNote] = (),
) -> str:
    """``::error file=...,line=...::...`` workflow commands: GitHub Actions annotates the pull
    request's files with them. Found images say nothing; skipped ones and notes are notices."""
    lines = []
    for p in problems:
        props = f"file={_github_escape(p.file, property_value=True)}"
        if p.line:
            props += f",line={p.line}"
        lines.append(f"::error {props},title=imagecheck::{_github_escape(p.message)}")
    for n in notes:
        props = f"file={_github_escape(n.file, property_value=True)}"
        lines.append(f"::notice {props},title=imagecheck::{_github_escape(n.message)}")
    for o in occurrences:
        props = f"file={_github_escape(o.file, property_value=True)},line={o.line}"
        if o.skipped:
            lines.append(f"::notice {props},title=imagecheck::{_github_escape(_skip_line(o))}")
            continue
        r = results[o.image]
        if r.status is Status.FOUND:
            continue
        message = _github_escape(f"{r.status.value}: {shown(r)}: {_line(r.message)}")
        lines.append(f"::error {props},title=image {r.status.value}::{message}")
    return "\n".join(lines)
