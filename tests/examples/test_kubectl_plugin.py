"""``kubectl imagecheck``: kubectl runs any ``kubectl-NAME`` on PATH as ``kubectl NAME``
(issue #16). The wheel installs ``kubectl-imagecheck`` beside ``imagecheck`` (test_wheel.py);
here the kubectl of the test extra finds it on PATH and runs it as the same CLI."""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

import imagecheck


def _kubectl(kubectl: str, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    scripts = sysconfig.get_path("scripts")
    # PATH: the venv's bin only (and the system's, for nothing kubectl needs): no other plugin.
    env = {"PATH": f"{scripts}{os.pathsep}/usr/bin:/bin", "HOME": str(home)}
    return subprocess.run(
        [kubectl, *args], input="", capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_kubectl_lists_the_plugin(kubectl: str, tmp_path: Path) -> None:
    done = _kubectl(kubectl, "plugin", "list", "--name-only", home=tmp_path)
    assert "kubectl-imagecheck" in done.stdout.split(), done.stdout + done.stderr


def test_kubectl_imagecheck_is_the_cli(kubectl: str, tmp_path: Path) -> None:
    done = _kubectl(kubectl, "imagecheck", "--version", home=tmp_path)
    assert (done.returncode, done.stdout) == (0, f"imagecheck, version {imagecheck.__version__}\n")
    listed = _kubectl(kubectl, "imagecheck", "scan", "--list", "-o", "json", "-", home=tmp_path)
    assert listed.returncode == 0, listed.stderr
