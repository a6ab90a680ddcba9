"""docker/arm64debs.py: a package version gone from the mirror is told apart from any other apt
failure (exit 3), so scripts/image-build-multiarch.sh makes its build base again (issue #16)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("arm64debs", ROOT / "docker" / "arm64debs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


arm64debs = load()


def test_apts_own_words_for_a_version_it_cannot_find() -> None:
    apt = shutil.which("apt-get")
    assert apt is not None, "apt-get: the build scripts need it"
    done = subprocess.run(
        [apt, "-qq", "download", "bash=0.0-imagecheck", "coreutils=0.0-imagecheck"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode != 0
    gone = arm64debs.versions_gone(done.stderr)
    assert sorted(gone) == ["bash=0.0-imagecheck", "coreutils=0.0-imagecheck"]


def test_other_apt_errors_are_not_a_version_gone() -> None:
    assert arm64debs.versions_gone("E: Unable to locate package nosuch\n") == []
    assert arm64debs.versions_gone("E: Failed to fetch http://deb.debian.org/...  404\n") == []


def fake_apt(tmp_path: Path, download_stderr: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "said").write_text(download_stderr)
    script = bin_dir / "apt-get"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do [ "$a" = download ] && '
        f"{{ cat '{tmp_path / 'said'}' >&2; exit 100; }}; done\nexit 0\n"
    )
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize(
    ("stderr", "code"),
    [("E: Version '3.0.1' for 'libssl3:arm64' was not found\n", 3),
     ("E: Failed to fetch http://mirror/x.deb  503\n", 1)],
    ids=["version-gone", "mirror-down"],
)  # fmt: skip
def test_fetch_debs_exit_status(tmp_path: Path, stderr: str, code: int) -> None:
    program = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
        "from arm64debs import fetch_debs; "
        "fetch_debs({'libssl3': '3.0.1'}, 'arm64', Path(sys.argv[2]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, str(ROOT / "docker"), str(tmp_path / "debs")],
        capture_output=True, text=True, check=False, env=fake_apt(tmp_path, stderr),
    )  # fmt: skip
    assert done.returncode == code, done.stderr
    if code == 3:
        assert done.stderr.strip() == (
            "arm64debs: no longer on the mirror: libssl3:arm64=3.0.1 (the amd64 build base "
            "is older than the mirror: rebuild it)"
        )
    else:
        assert "apt-get download failed" in done.stderr and "503" in done.stderr
    assert "Traceback" not in done.stderr
