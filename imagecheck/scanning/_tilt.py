"""Tiltfiles: the images Tilt builds (``docker_build``, ``custom_build``).

A Tiltfile is Starlark, a program: what can be read without running it is a call whose image
is a string literal, ``docker_build('name', ...)`` or ``docker_build(ref="name", ...)`` (and
``custom_build``, and the ``restart_process`` extension's ``docker_build_with_restart``).
Tilt builds that image and replaces it, by repository, in the manifests it deploys: each is
reported skipped (:data:`~imagecheck.scanning._builds.BUILT_BY_TILT`), and the scan skips the
same repository elsewhere. A call on a commented line is not one. One regular expression
without nested repetition: linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from imagecheck.scanning._builds import BUILT_BY_TILT
from imagecheck.scanning._manifests import Found
from imagecheck.scanning._model import MAX_IMAGE_LENGTH, Occurrence

__all__ = ["images_in_tiltfile"]

_CALL = re.compile(
    r"\b(docker_build_with_restart|docker_build|custom_build)\s*\(\s*(?:ref\s*=\s*)?"
    r"""(?:'([^'\\\n]*)'|"([^"\\\n]*)")(?=\s*[,)])"""
)


def images_in_tiltfile(text: str, file: str) -> Iterator[Found]:
    # Lines and comments found incrementally: each character is looked at a bounded number
    # of times however many calls share a line.
    line, counted, line_start, comment = 1, 0, 0, -1
    for match in _CALL.finditer(text):
        start = match.start()
        newline = text.rfind("\n", counted, start)
        if newline >= 0:
            line += text.count("\n", counted, start)
            line_start, comment = newline + 1, -1
        if comment < 0:
            found = text.find("#", max(counted, line_start), start)
            comment = found if found >= 0 else -1
        counted = start
        if comment >= 0:
            continue  # on a commented line (a string holding # before a call: not worth it)
        group = 2 if match.group(2) is not None else 3
        image = match.group(group)
        if not image or len(image) > MAX_IMAGE_LENGTH:
            continue
        at = line + text.count("\n", start, match.start(group))
        occurrence = Occurrence(image, file, at, "tilt", None, match.group(1), BUILT_BY_TILT)
        yield (at, 0), occurrence
