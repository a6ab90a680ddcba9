"""Helm charts' raw templates: files a scan skips with a note rather than call invalid.

A chart is a directory holding ``Chart.yaml``; its ``templates/`` (at any depth below it) are
Go templates that only ``helm template`` turns into YAML, so read as YAML they are errors, or
worse, images that are half placeholders. A subchart (``charts/<name>/``) is a chart too. The
chart's other files (``values.yaml``, ``crds/``) are plain YAML, scanned as such.
"""

from __future__ import annotations

import os
from pathlib import PurePath

__all__ = ["ChartTemplates", "chart_note"]

_TEMPLATES = "templates"
_CHART_FILE = "Chart.yaml"


class ChartTemplates:
    """Which files are a chart's templates; remembers each directory asked about (a scan's
    directories are already bounded by its files)."""

    def __init__(self) -> None:
        self._is_chart: dict[str, bool] = {}

    def directory(self, file: str) -> str | None:
        """The ``templates`` directory of the chart that ``file`` is a template of, or None.

        Named as in ``file`` when ``file`` names it (``chart/templates``), else absolute: a
        relative path is resolved against the working directory, so that ``templates/a.yaml``
        inside a chart, or ``a.yaml`` inside its ``templates``, is recognised too.
        """
        written = PurePath(os.path.normpath(file)).parts
        # Never without a working directory: a relative path does not exist then.
        absolute = PurePath(os.path.abspath(file)).parts
        for index in range(len(absolute) - 2, 0, -1):  # the nearest chart first
            if absolute[index] == _TEMPLATES and self._chart(os.path.join(*absolute[:index])):
                kept = len(written) - (len(absolute) - index)
                if kept >= 0 and written[kept:] == absolute[index:]:
                    return os.path.join(*written[: kept + 1])
                return os.path.join(*absolute[: index + 1])
        return None

    def _chart(self, directory: str) -> bool:
        known = self._is_chart.get(directory)
        if known is None:  # a stat, never a read: the file's content does not matter
            known = self._is_chart[directory] = os.path.isfile(os.path.join(directory, _CHART_FILE))
        return known


def chart_note(files: int) -> str:
    """The note for a chart's ``templates`` directory, of which ``files`` were skipped."""
    count = "1 file" if files == 1 else f"{files} files"
    return (
        f"Helm chart templates not scanned ({count}): scan the rendered chart instead "
        "(helm template CHART | imagecheck scan -)"
    )
