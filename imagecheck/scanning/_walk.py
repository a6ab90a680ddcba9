"""A directory's files, as a scan walks them: hidden files and directories included (CI lives
in ``.github/``, ``.gitlab-ci.yml``, ``.circleci/``), ``.git`` and what git ignores left out.

In a git work tree (a ``.git`` in the directory or one above it) the walk honours what
``git ls-files --others --exclude-standard`` does, without running git: the ``.gitignore`` of
each directory on the way (those above the directory scanned too) and ``.git/info/exclude``
(:mod:`imagecheck.scanning._gitignore`), matched while walking, so that an ignored directory
(``node_modules/``, ``vendor/``, ``dist/``) is never listed, let alone read. A repository
inside the walk (a submodule, a nested clone) is walked by its own rules.

What it does not do, by choice:

- ``core.excludesFile`` (``~/.config/git/ignore``) is not read: the same checkout would then
  scan differently on two machines, and a CI runner has none;
- git's index is not read, so a file that is tracked although a pattern ignores it (``git add
  -f``) is not found by the walk: name it, a file named is always read. So is a directory named,
  even an ignored one (``scan out/`` after rendering manifests there);
- ``node_modules`` is never entered, in a git work tree or not: a package's own files are not
  the repository's (a package's ``.github/`` would add its CI's images), and there are many.

A symbolic link to a directory is not entered (no cycle, no tree outside the directory); a
``.gitignore`` that is a link is not read, as git does not read it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path, PurePath

from imagecheck._files import read_regular_file
from imagecheck.errors import UsageError
from imagecheck.scanning._gitignore import (
    MAX_IGNORE_BYTES,
    MAX_PATTERNS,
    IgnoreFile,
    parse_ignore_file,
)
from imagecheck.scanning._model import FileProblem

__all__ = ["walk"]

_GIT = ".git"
_IGNORE = ".gitignore"
_NEVER_ENTERED = frozenset({"node_modules"})
# A .git file (a worktree, a submodule) names its git directory in a line or two.
_MAX_GIT_FILE = 4096
# Far more levels than any repository's path has: where to stop looking up for a .git.
_MAX_LEVELS = 256

# The ignore files in force in a directory, outermost first; None outside a git work tree.
_Rules = tuple[IgnoreFile, ...] | None


class _NotRead(UsageError):
    """Why an ignore file was not read, in one line (imagecheck._files words it)."""


def walk(top: str, wanted: Callable[[str], bool], problems: list[FileProblem]) -> list[str]:
    """The files under ``top`` whose name is ``wanted`` and that git would not ignore, sorted
    by path components (``a/b.yaml < a/c/d.yaml < a/e.yaml``); unreadable directories and
    ignore files are ``problems``."""
    found: list[str] = []
    relative, rules = _rules_above(top, problems)
    pending: list[tuple[str, str, _Rules]] = [(top, relative, rules)]
    while pending:
        directory, relative, rules = pending.pop()
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError as exc:
            problems.append(FileProblem(str(exc.filename), None, f"cannot read: {exc.strerror}"))
            continue
        names = {entry.name: entry for entry in entries}
        if _GIT in names:  # the root of a work tree: its rules alone
            relative, rules = "", _exclude_rules(directory, problems)
        ignore = names.get(_IGNORE)
        if rules is not None and ignore is not None and ignore.is_file(follow_symlinks=False):
            rules = _with_file(rules, ignore.path, relative, problems)
        for entry in entries:
            if entry.name == _GIT:
                continue
            path = relative + entry.name
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in _NEVER_ENTERED and not _ignored(rules, path, True):
                    pending.append((entry.path, path + "/", rules))
            elif (
                wanted(entry.name)
                and not _links_to_directory(entry)
                and not _ignored(rules, path, False)
            ):
                found.append(entry.path)
    return sorted(found, key=lambda file: PurePath(file).parts)


def _links_to_directory(entry: os.DirEntry[str]) -> bool:
    """A link to a directory is not entered. A link that cannot be followed (a loop, too many
    levels) is not one: it is kept, and reading it reports the problem on its own line."""
    try:
        return entry.is_symlink() and entry.is_dir()
    except OSError:
        return False


def _ignored(rules: _Rules, path: str, is_directory: bool) -> bool:
    """The deepest ignore file with a pattern for ``path`` decides."""
    for ignore in reversed(rules or ()):
        decision = ignore.decides(path, is_directory)
        if decision is not None:
            return decision
    return False


def _rules_above(top: str, problems: list[FileProblem]) -> tuple[str, _Rules]:
    """``top``'s path in its work tree (``"a/b/"``), and the rules of the directories above it
    in that tree; ``("", None)`` outside a work tree."""
    here = os.path.realpath(top)
    above: list[str] = []
    for _ in range(_MAX_LEVELS):
        if os.path.lexists(os.path.join(here, _GIT)):
            break
        parent = os.path.dirname(here)
        if parent == here:
            return "", None
        above.append(os.path.basename(here))
        here = parent
    else:
        return "", None
    rules = _exclude_rules(here, problems)
    relative = ""
    for name in reversed(above):
        ignore = os.path.join(here, _IGNORE)
        if os.path.isfile(ignore) and not os.path.islink(ignore):
            rules = _with_file(rules, ignore, relative, problems)
        here = os.path.join(here, name)
        relative += name + "/"
    return relative, rules


def _exclude_rules(root: str, problems: list[FileProblem]) -> tuple[IgnoreFile, ...]:
    """The rules of the work tree at ``root``: its git directory's ``info/exclude``."""
    git = os.path.join(root, _GIT)
    if not os.path.isdir(git):  # a worktree's or a submodule's: "gitdir: <path>"
        pointer = _text(git, _MAX_GIT_FILE)
        if pointer is None or not pointer.startswith("gitdir:"):
            return ()
        git = os.path.join(root, pointer.removeprefix("gitdir:").strip())
        common = _text(os.path.join(git, "commondir"), _MAX_GIT_FILE)
        if common is not None:
            git = os.path.join(git, common.strip())
    exclude = os.path.join(git, "info", "exclude")
    return _with_file((), exclude, "", problems) if os.path.isfile(exclude) else ()


def _with_file(
    rules: tuple[IgnoreFile, ...], file: str, relative: str, problems: list[FileProblem]
) -> tuple[IgnoreFile, ...]:
    try:
        data = read_regular_file(Path(file), limit=MAX_IGNORE_BYTES, what="file", error=_NotRead)
    except _NotRead as exc:
        problems.append(FileProblem(file, None, f"ignore rules not applied: {exc}"))
        return rules
    parsed = parse_ignore_file(data.decode("utf-8", "surrogateescape"), relative)
    if isinstance(parsed, int):
        message = f"ignore rules not applied: more than {MAX_PATTERNS} patterns"
        problems.append(FileProblem(file, parsed, message))
        return rules
    return (*rules, parsed)


def _text(file: str, limit: int) -> str | None:
    try:
        data = read_regular_file(Path(file), limit=limit, what="file", error=_NotRead)
    except _NotRead:
        return None
    return data.decode("utf-8", "surrogateescape")
