"""Reading a local file that someone else wrote: regular files only, never past a cap.

A pull request can commit a symbolic link to ``/dev/zero`` (endless), to a FIFO (opening it
blocks until a writer comes), or to ``/etc/shadow`` and ``/proc/self/environ`` (secrets);
a credential file or pull secret can be any of these too. :func:`read_regular_file` reads
a path only when it is a regular file, at most ``limit`` bytes of it, and, given a ``root``,
only when it resolves to a file inside that directory::

    data = read_regular_file("k8s/app.yaml", 4 * MIB, root="k8s")

How: the path is resolved (``os.path.realpath``) and, with ``root``, refused unless the real
path is inside the real root; it is ``stat``-ed and refused unless regular, before any
``open`` (opening some devices has effects); it is opened with ``O_NONBLOCK`` (a FIFO swapped
in meanwhile does not block the open) and, with ``root``, ``O_NOFOLLOW`` on the resolved path
(a link swapped in meanwhile is not followed); the open descriptor is checked again
(``fstat``); then at most ``limit + 1`` bytes are read, so ``/proc`` files, which say they are
empty, are capped too. A directory along the path swapped for a link *between* the check and
the open is not defended against: that needs someone running code on the machine during the
read, which the callers here do not guard against.
"""

from __future__ import annotations

import os
import stat

from imagecheck.errors import UsageError

__all__ = [
    "MIB",
    "FileTooLarge",
    "LocalFileError",
    "describe_size",
    "is_within",
    "read_regular_file",
]

MIB = 1024 * 1024
_CHUNK = 64 * 1024
# Absent on Windows: there, FIFOs and links are not what a checkout holds.
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)


class LocalFileError(UsageError):
    """A local file that was not read. ``reason`` is one line and never holds its content:
    ``"not a regular file (FIFO)"``, ``"a symbolic link to outside k8s"``,
    ``"larger than 4 MiB"`` (:class:`FileTooLarge`), or, with ``errno`` set, the operating
    system's text (``"No such file or directory"``, ``errno.ENOENT``): a caller for which an
    absent file is no error tests ``errno``."""

    def __init__(self, path: str, reason: str, *, errno: int | None = None) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.errno = errno


class FileTooLarge(LocalFileError):
    """A regular file over the caller's limit; nothing past the limit was read."""

    def __init__(self, path: str, limit: int) -> None:
        super().__init__(path, f"larger than {describe_size(limit)}")
        self.limit = limit


def read_regular_file(
    path: str | os.PathLike[str], limit: int, *, root: str | None = None
) -> bytes:
    """The content of ``path`` if it is a regular file of at most ``limit`` bytes.

    Symbolic links are followed; with ``root`` (a directory) only while they lead to a file
    inside it (``root`` itself may be reached through links). Raises :class:`LocalFileError`
    (:class:`FileTooLarge` for a file over ``limit``); never blocks on a FIFO or reads a
    device.
    """
    name = os.fspath(path)
    target, flags = name, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY
    if root is not None:
        target = os.path.realpath(name)
        if not is_within(target, os.path.realpath(root)):
            raise LocalFileError(name, f"a symbolic link to outside {root}")
        flags |= _O_NOFOLLOW
    try:
        _check_regular(name, os.stat(target).st_mode)
        fd = os.open(target, flags)
    except OSError as exc:
        raise _os_error(name, exc) from None
    try:
        _check_regular(name, os.fstat(fd).st_mode)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _os_error(name, exc) from None
    finally:
        os.close(fd)
    if size > limit:
        raise FileTooLarge(name, limit)
    return b"".join(chunks)


def is_within(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or under it; both absolute and already resolved."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def describe_size(size: int) -> str:
    """``4 MiB``, ``1536 bytes``: how the limits are named in messages."""
    return f"{size // MIB} MiB" if size % MIB == 0 else f"{size} bytes"


_KINDS = (
    (stat.S_ISDIR, "directory"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
)


def _os_error(name: str, exc: OSError) -> LocalFileError:
    return LocalFileError(name, exc.strerror or str(exc), errno=exc.errno)


def _check_regular(name: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((kind for test, kind in _KINDS if test(mode)), "special file")
        raise LocalFileError(name, f"not a regular file ({kind})")
