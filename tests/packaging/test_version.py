"""One version: ``imagecheck/_version.py``'s ``__version__`` is its home.

``imagecheck --version`` prints it, pyproject.toml reads it (hatch's dynamic version; the
wheel's metadata is checked in test_wheel.py), and the two copies that cannot read a Python
file are held to it here: the image's ``org.opencontainers.image.version`` label (a Dockerfile
cannot import Python, and a build argument would let a build forget it) and the changelog's
newest version. The release workflow checks the tag against the same string.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import imagecheck
from tests.support.tools import ROOT

VERSION_HEADING = re.compile(r"^## \[(?P<version>[^\]]+)\](?: - (?P<date>\d{4}-\d{2}-\d{2}))?$")


def test_pyproject_reads_the_version_from_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "imagecheck/_version.py"


def test_the_installed_cli_prints_the_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "imagecheck", "--version"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, f"imagecheck, version {imagecheck.__version__}\n")


def test_the_image_label_is_the_version() -> None:
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    runtime = dockerfile.split("\nFROM ${RUNTIME_IMAGE}\n", 1)[1]  # the stage that ships
    labels = re.findall(r'org\.opencontainers\.image\.version="([^"]*)"', runtime)
    assert labels == [imagecheck.__version__]


def test_changelog_is_keep_a_changelog_and_not_ahead_of_the_version() -> None:
    """Unreleased on top; every released heading is dated; the newest released version is the
    package's (just released) or older (the package's version is the one being prepared)."""
    lines = (ROOT / "CHANGELOG.md").read_text().splitlines()
    assert lines[0] == "# Changelog"
    headings = [m for line in lines if (m := VERSION_HEADING.match(line))]
    assert headings[0]["version"] == "Unreleased"
    released = headings[1:]
    assert all(h["date"] for h in released)
    if released:
        newest = tuple(int(p) for p in released[0]["version"].split("."))
        assert newest <= tuple(int(p) for p in imagecheck.__version__.split("."))
