"""A scan of a small tree of files written for a test, from inside the tree (relative names)."""

from __future__ import annotations

import os
from pathlib import Path

from imagecheck.scanning import ScanReport, scan_files


def scan_tree(root: Path, files: dict[str, str], paths: tuple[str, ...] = (".",)) -> ScanReport:
    """Write ``files`` (relative name: text) under ``root``, then scan ``paths`` from there."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return scan_files(list(paths))
    finally:
        os.chdir(cwd)
