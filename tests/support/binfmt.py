"""arm64 programs on this amd64 machine through binfmt_misc, as a node with qemu-user would run
an arm64 image: the kernel hands every aarch64 ELF to qemu-aarch64.

Registered from the rule Debian's qemu-user-static ships (``/usr/lib/binfmt.d``), whose flags
include ``F`` (fix binary): the kernel opens the emulator when the rule is registered, so it
also runs inside a container's root, which has no emulator in it. Idempotent: an entry that is
already there with the ``F`` flag is kept; one without it is replaced.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.tools import skip_or_fail, system_tool

BINFMT = Path("/proc/sys/fs/binfmt_misc")
RULE = Path("/usr/lib/binfmt.d/qemu-aarch64.conf")
NAME = "qemu-aarch64"


def _mount() -> None:
    if (BINFMT / "register").exists():
        return
    done = subprocess.run(
        ["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        skip_or_fail(f"cannot mount binfmt_misc at {BINFMT}: {done.stderr.strip()}")


def _registered_with_fix_binary() -> bool:
    entry = BINFMT / NAME
    if not entry.exists():
        return False
    lines = entry.read_text().splitlines()
    if "enabled" in lines and any(
        line.startswith("flags:") and "F" in line.split(":", 1)[1] for line in lines
    ):
        return True
    entry.write_text("-1")  # registered without F: remove it, to register it again
    return False


def ensure_qemu_aarch64() -> None:
    """aarch64 ELF files run under qemu-aarch64, inside containers too."""
    system_tool("qemu-aarch64-static")  # the package that ships the rule
    if not RULE.is_file():
        skip_or_fail(f"{RULE} is missing (Debian's qemu-user-static ships it)")
    _mount()
    if _registered_with_fix_binary():
        return
    [rule] = [line for line in RULE.read_text().splitlines() if line.startswith(f":{NAME}:")]
    (BINFMT / "register").write_text(rule)
    if not _registered_with_fix_binary():
        skip_or_fail(f"binfmt_misc did not take {NAME} with the F flag")
