"""Local files that users and pods name (config.json, auth.json, pull secrets, CA files, the
service-account token, the termination log), read and written without surprises.

A path is someone's word for a file, not a promise of one: ``--docker-config /dev/zero``
would read gigabytes, and a FIFO named as a pull secret would block the run forever on
``open``. So every such file is

* opened with ``O_NONBLOCK`` (opening a FIFO returns at once instead of waiting for a writer)
  and checked with ``fstat`` on the open descriptor: regular files only;
* read up to a cap, never whole.

Symlinks are followed: Kubernetes mounts secrets and ConfigMaps as ``..data/`` symlinks, and
the check that matters is on what the descriptor finally points at.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from imagecheck.errors import ImagecheckError

# A config.json, auth.json or pull secret is a few KiB; a thousand registries fit in 1 MiB.
MAX_CONFIG_FILE = 1024 * 1024
# A CA bundle: the whole Mozilla store is about 220 KiB in PEM.
MAX_CA_FILE = 4 * 1024 * 1024

_OPEN_FLAGS = os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


def size_text(limit: int) -> str:
    """``1 MiB``, ``64 KiB`` or ``100 bytes``: a limit as people read it."""
    for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if limit >= size and limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit} bytes"


def read_regular_file(path: Path, *, limit: int, what: str, error: type[ImagecheckError]) -> bytes:
    """The content of the regular file at ``path`` (symlinks followed), at most ``limit``
    bytes, or ``error`` with one line naming ``what`` and ``path``: it is missing, cannot be
    read, is not a regular file (a FIFO, a device, a directory), or is larger than ``limit``.
    Never blocks on a FIFO, never reads past ``limit + 1`` bytes.
    """
    fd = _open_regular(path, os.O_RDONLY, what, error, "read")
    try:
        info = os.fstat(fd)
        if info.st_size > limit:
            raise error(f"cannot use {what} {path}: larger than {size_text(limit)}")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:  # a file can grow after fstat, and /proc files say size 0
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise error(f"cannot use {what} {path}: larger than {size_text(limit)}")
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def write_regular_file(path: Path, data: bytes, *, what: str, error: type[ImagecheckError]) -> None:
    """Replace the content of the *existing* regular file at ``path`` with ``data``.

    Refuses (``error``, one line) anything else: a FIFO would block the writer until someone
    reads it, a device is not where a message belongs. The file is never created.
    """
    fd = _open_regular(path, os.O_WRONLY, what, error, "write")
    try:
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise error(f"cannot write {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _open_regular(path: Path, mode: int, what: str, error: type[ImagecheckError], verb: str) -> int:
    """A descriptor on the regular file at ``path``. ``stat`` first, so that a device is not
    even opened; ``fstat`` after, on what was opened, so that a swap in between is caught."""
    try:
        _require_regular(os.stat(path).st_mode, path, what, error)
        fd = os.open(path, mode | _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise error(f"{what} {path} does not exist") from None
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO opened for writing with no reader
            raise error(f"cannot use {what} {path}: not a regular file") from None
        raise error(f"cannot {verb} {what} {path}: {exc.strerror or exc}") from None
    try:
        _require_regular(os.fstat(fd).st_mode, path, what, error)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _require_regular(mode: int, path: Path, what: str, error: type[ImagecheckError]) -> None:
    if not stat.S_ISREG(mode):
        raise error(f"cannot use {what} {path}: {_kind(mode)}, not a regular file")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"
