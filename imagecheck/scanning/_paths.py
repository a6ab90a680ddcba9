"""Which files a scan reads, and how: paths to files, directory walks, confinement, bounded
reads.

Every file may come from a hostile pull request: only regular files are read, at most
:data:`MAX_FILE_BYTES` of each (:func:`imagecheck._files.read_regular_file`); a link found in a
directory is followed only to a file inside that directory, and a relative PATH (``imagecheck
scan $(git diff --name-only)``) only to one inside the working directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import TextIO

from imagecheck._files import read_regular_file, size_text
from imagecheck.errors import UsageError
from imagecheck.scanning._formats import named_format
from imagecheck.scanning._kustfile import KUSTOMIZATION_NAMES
from imagecheck.scanning._model import FileProblem
from imagecheck.scanning._walk import walk

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_STDIN_BYTES",
    "STDIN",
    "cwd",
    "decode",
    "files_named",
    "is_dockerfile_name",
    "is_within",
    "leaves_cwd",
    "read_file",
    "read_stream",
]

STDIN = "<stdin>"
# A manifest or Dockerfile written by hand is a few KiB. The worst 4 MiB of YAML (a million
# scalars in one flow sequence, up to _yamltree.MAX_NODES) takes ~200 MB and 5-10 s.
MAX_FILE_BYTES = 4 * 1024 * 1024
# stdin carries a whole rendered chart (helm template --include-crds: several MiB of CRDs);
# a document's size is bounded on its own (_yamltree.MAX_NODES).
MAX_STDIN_BYTES = 32 * 1024 * 1024
_CHUNK = 64 * 1024
# Found in a directory walk: YAML and JSON files, Dockerfiles, kustomizations.
_SUFFIXES = (".yaml", ".yml", ".json")


# Dockerfile, Dockerfile.dev, Dockerfile-dev, Dockerfile_dev, dev.Dockerfile, Containerfile...
_DOCKERFILE = re.compile(
    r"(?:dockerfile|containerfile)(?:[._-].+)?|.+\.(?:dockerfile|containerfile)"
)
# ...but not the files named after one that are something else: its documentation, its
# BuildKit ignore file (Dockerfile.dockerignore), a script or data that builds or tests it.
_NOT_DOCKERFILES = frozenset(
    {
        "adoc", "bak", "bzl", "diff", "dockerignore", "go", "html", "js", "json", "lock", "md",
        "orig", "patch", "py", "rej", "rst", "sh", "swp", "toml", "ts", "txt", "yaml", "yml",
    }
)  # fmt: skip


def is_dockerfile_name(file: str) -> bool:
    name = PurePath(file).name.lower()
    if _DOCKERFILE.fullmatch(name) is None:
        return False
    _, dot, suffix = name.rpartition(".")
    return not dot or suffix not in _NOT_DOCKERFILES


def files_named(path: str, problems: list[FileProblem]) -> Iterator[tuple[str, str | None]]:
    """The files ``path`` names, each with the directory it must stay in (None: anywhere)."""
    if path == "-":
        yield path, None
        return
    # `imagecheck scan $(git diff --name-only)`: the pull request, not the user, chose these
    # names, and a committed link may lead anywhere. A path written with .. or from / was.
    confined_to = None if leaves_cwd(path) else cwd()
    if os.path.isdir(path):
        if confined_to is not None and not is_within(os.path.realpath(path), confined_to):
            problems.append(FileProblem(path, None, f"not scanned: {_outside(confined_to)}"))
            return
        yield from ((file, path) for file in walk(path, _scanned_in_directories, problems))
    elif os.path.exists(path):
        # Named files that are neither YAML, JSON nor Dockerfiles hold no images we read: skip them,
        # so that `imagecheck scan $(git diff --name-only)` works on any change.
        if _scanned_in_directories(os.path.basename(path)):
            yield path, confined_to
    else:
        problems.append(FileProblem(path, None, "no such file or directory"))


def leaves_cwd(path: str) -> bool:
    """Whether ``path`` is absolute or climbs out of the working directory, as written."""
    return os.path.isabs(path) or PurePath(os.path.normpath(path)).parts[:1] == (os.pardir,)


def cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # deleted: then no relative path opens anything either
        return None


def _outside(directory: str) -> str:
    return f"a symbolic link to outside {directory}"


def is_within(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or under it; both absolute and already resolved."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


class _NotRead(UsageError):
    """Why a file was not read, in one line (imagecheck._files words it)."""


def read_file(file: str, root: str | None) -> bytes | FileProblem:
    """The file's bytes; with ``root``, only if its real path is inside ``root``'s.

    What is checked is opened (a link swapped in between is followed: that takes someone
    running code on the machine during the scan, which a checkout of a pull request is not).
    """
    if root is not None and not is_within(os.path.realpath(file), os.path.realpath(root)):
        return FileProblem(file, None, f"not scanned: {_outside(root)}")
    try:
        return read_regular_file(Path(file), limit=MAX_FILE_BYTES, what="file", error=_NotRead)
    except _NotRead as exc:
        return FileProblem(file, None, str(exc))


def read_stream(stream: TextIO) -> bytes | str | FileProblem:
    """At most :data:`MAX_STDIN_BYTES` of ``stream``: its bytes (text if it has no buffer)."""
    too_large = FileProblem(STDIN, None, f"not scanned: larger than {size_text(MAX_STDIN_BYTES)}")
    buffer = getattr(stream, "buffer", None)  # sys.stdin has one; io.StringIO does not
    if buffer is None:
        text = stream.read(MAX_STDIN_BYTES + 1)  # characters: never more than their bytes
        return too_large if len(text) > MAX_STDIN_BYTES else text
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_STDIN_BYTES:
        chunk = buffer.read(_CHUNK)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return too_large if size > MAX_STDIN_BYTES else b"".join(chunks)


def decode(data: bytes, file: str) -> str | FileProblem:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return FileProblem(file, line, f"not UTF-8 text: byte {data[exc.start]:#04x}")


def _scanned_in_directories(name: str) -> bool:
    return (
        name.lower().endswith(_SUFFIXES)
        or is_dockerfile_name(name)
        or name in KUSTOMIZATION_NAMES
        or named_format(name) is not None  # dev environments, build tools (_formats)
    )
