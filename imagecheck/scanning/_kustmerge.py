"""A scan's kustomizations, rendered (``_kustomize``), put among the scan's results: each root's
problems and images where the root stands in them, and the images as written that every root
including them overrides taken out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from imagecheck.scanning._kustomize import Built, Session
from imagecheck.scanning._model import FileProblem, Occurrence

__all__ = ["Root", "rendered"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Root:
    """A kustomization that scan_paths read, and where its results go among the scan's."""

    file: str
    text: str
    confined_to: str | None
    occurrences_at: int
    problems_at: int


def rendered(
    roots: list[Root], occurrences: list[Occurrence], problems: list[FileProblem], scanned: set[str]
) -> tuple[list[Occurrence], list[FileProblem]]:
    """The scan's results with its kustomizations rendered; ``scanned``: the real paths read.

    What a root adds goes where the root is in the scan's results: its notes, then its
    rendered images by file and line, then the images of its resources that it leaves as written and
    that the scan did not read. An image as written that every root including it overrides is
    not reported.
    """
    if not roots:
        return occurrences, problems
    session = Session(scanned)
    for o in occurrences:  # a resource the scan read is named as the scan names it
        session.names.setdefault(session.real(o.file), o.file)
    results = []
    for root in roots:
        problems_before, notes_before = len(session.problems), len(session.notes)
        built = session.root(root.file, root.text, root.confined_to)
        results.append(
            (root, built, session.problems[problems_before:], session.notes[notes_before:])
        )
    added, added_problems, dropped = _contributions(session, results)
    written = {session.key(o) for o in occurrences}
    for at, found in added.items():
        added[at] = [o for o in found if session.key(o) not in written]
    return (
        _merged(occurrences, added, lambda o: session.key(o) not in dropped),
        _merged(problems, added_problems, lambda _: True),
    )


def _contributions(
    session: Session, results: list[_RootResult]
) -> tuple[dict[int, list[Occurrence]], dict[int, list[FileProblem]], set[tuple[object, ...]]]:
    """What each root adds to the scan's occurrences and problems, by where the root is in
    them, and the images as written that every root including them overrides."""
    bases = set().union(*(built.reached for _, built, _, _ in results if built is not None))
    added: dict[int, list[Occurrence]] = {}
    added_problems: dict[int, list[FileProblem]] = {}
    overridden: set[tuple[object, ...]] = set()
    kept: set[tuple[object, ...]] = set()
    for root, built, new_problems, notes in results:
        added_problems.setdefault(root.problems_at, []).extend(new_problems)
        found = list(notes)
        if built is not None and session.real_dir(root.file) not in bases:
            found.extend(sorted((i.occurrence() for i in built.images if i.override), key=_where))
            found.extend(i.written for i in built.images if i.override is None)
            overridden.update(session.key(i.written) for i in built.images if i.override)
            kept.update(session.key(i.written) for i in built.images if i.override is None)
        added.setdefault(root.occurrences_at, []).extend(found)
    return added, added_problems, overridden - kept


def _merged(original: list[_T], added: dict[int, list[_T]], keep: Callable[[_T], bool]) -> list[_T]:
    """``original`` (what ``keep`` keeps) with ``added[i]`` before its item ``i``, once each."""
    merged: list[_T] = []
    seen: set[_T] = set()
    for at in range(len(original) + 1):
        for item in added.get(at, ()):
            if item not in seen:
                seen.add(item)
                merged.append(item)
        if at < len(original) and keep(original[at]):
            merged.append(original[at])
    return merged


_RootResult = tuple[Root, "Built | None", list[FileProblem], list[Occurrence]]


def _where(occurrence: Occurrence) -> tuple[str, int]:
    return occurrence.file, occurrence.line
