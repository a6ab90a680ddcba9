"""Which files are scanned, and how each is read: the entry points of the package."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import PurePath
from typing import TextIO

from imagecheck.scanning._dockerfile import images_in_dockerfile
from imagecheck.scanning._manifests import Found, images_in_document
from imagecheck.scanning._model import FileProblem, Occurrence
from imagecheck.scanning._yamltree import SyntaxProblem, documents

__all__ = ["STDIN", "scan_paths", "scan_text"]

STDIN = "<stdin>"
FORMATS = ("yaml", "dockerfile")
# Found in a directory walk: YAML files and Dockerfiles. A file named explicitly is scanned
# whatever its name (a .json manifest is YAML too).
_YAML_SUFFIXES = (".yaml", ".yml")
_SKIPPED_DIRECTORIES = frozenset({"node_modules"})


def scan_text(
    text: str, file: str, *, fmt: str | None = None
) -> tuple[list[Occurrence], list[FileProblem]]:
    """The images in one file's text, by line, and what could not be read.

    ``fmt`` is ``"yaml"`` (Kubernetes manifests, Compose files) or ``"dockerfile"``; None
    guesses from ``file``'s name (``Dockerfile``, ``Dockerfile.*``, ``*.Dockerfile``,
    ``Containerfile``...), else YAML. ``file`` is only used to name the file in results.
    """
    if fmt is None:
        fmt = "dockerfile" if is_dockerfile_name(file) else "yaml"
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    text = text.removeprefix("\ufeff")
    if fmt == "dockerfile":
        results = list(images_in_dockerfile(text, file))
        return _split(results)
    found = sorted(_yaml_results(text, file), key=lambda item: item[0])  # stable: by position
    return _split([result for _, result in found])


def scan_paths(
    paths: Sequence[str], *, stdin: TextIO | None = None
) -> tuple[list[Occurrence], list[FileProblem]]:
    """Scan files, directories (recursively) and ``-`` (``stdin``, else ``sys.stdin``).

    Files come in the order given, a directory's files sorted by path; hidden files and
    directories (``.git``) and ``node_modules`` are not entered, symbolic links to
    directories not followed. A file reached twice is scanned once. A path that does not
    exist, or a file that cannot be read as UTF-8 text, is a :class:`FileProblem`.
    """
    occurrences: list[Occurrence] = []
    problems: list[FileProblem] = []
    seen: set[str] = set()
    for path in paths:
        for file in _files(path, problems):
            key = file if file == "-" else os.path.realpath(file)
            if key in seen:
                continue
            seen.add(key)
            if file == "-":
                text, name = (stdin or sys.stdin).read(), STDIN
            else:
                text_or_problem = _read(file)
                if isinstance(text_or_problem, FileProblem):
                    problems.append(text_or_problem)
                    continue
                text, name = text_or_problem, file
            found, file_problems = scan_text(text, name)
            occurrences.extend(found)
            problems.extend(file_problems)
    return occurrences, problems


def is_dockerfile_name(file: str) -> bool:
    name = PurePath(file).name.lower()
    return any(
        name == base or name.startswith(f"{base}.") or name.endswith(f".{base}")
        for base in ("dockerfile", "containerfile")
    )


def _yaml_results(text: str, file: str) -> Iterator[Found]:
    for document in documents(text):
        if isinstance(document, SyntaxProblem):
            line = document.line
            yield (line or 0, 0), FileProblem(file, line, document.message)
        else:
            yield from images_in_document(document, file)


def _split(
    results: list[Occurrence | FileProblem],
) -> tuple[list[Occurrence], list[FileProblem]]:
    occurrences = [result for result in results if isinstance(result, Occurrence)]
    problems = [result for result in results if isinstance(result, FileProblem)]
    return occurrences, problems


def _files(path: str, problems: list[FileProblem]) -> Iterator[str]:
    if path == "-":
        yield path
    elif os.path.isdir(path):
        yield from _walk(path, problems)
    elif os.path.exists(path):
        # Named files that are neither YAML nor Dockerfiles hold no images we read: skip them,
        # so that `imagecheck scan $(git diff --name-only)` works on any change.
        if _scanned_in_directories(os.path.basename(path)):
            yield path
    else:
        problems.append(FileProblem(path, None, "no such file or directory"))


def _walk(top: str, problems: list[FileProblem]) -> Iterator[str]:
    def unreadable(exc: OSError) -> None:
        problems.append(FileProblem(str(exc.filename), None, f"cannot read: {exc.strerror}"))

    found: list[str] = []
    for directory, subdirectories, files in os.walk(top, onerror=unreadable):
        subdirectories[:] = [d for d in subdirectories if not _skipped(d)]
        found.extend(
            os.path.join(directory, name)
            for name in files
            if not _skipped(name) and _scanned_in_directories(name)
        )
    # By path components, so that a/b.yaml < a/c/d.yaml < a/e.yaml whatever the separator.
    yield from sorted(found, key=lambda file: PurePath(file).parts)


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in _SKIPPED_DIRECTORIES


def _read(file: str) -> str | FileProblem:
    try:
        with open(file, "rb") as stream:
            data = stream.read()
    except OSError as exc:
        return FileProblem(file, None, f"cannot read: {exc.strerror or exc}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return FileProblem(file, line, f"not UTF-8 text: byte {data[exc.start]:#04x}")


def _scanned_in_directories(name: str) -> bool:
    return name.lower().endswith(_YAML_SUFFIXES) or is_dockerfile_name(name)
