"""The ``imagecheck check`` sessions that README.md and docs/ show, run: each ``console`` block
whose commands are ``imagecheck check`` of the example repository and ``echo $?`` is run
against the real registry (the example repository replaced by the test registry's, its
digest by the registry's), and must print what the page shows and exit as it says.

The other blocks are validated without a registry: tests/examples/test_docs_blocks.py.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.support.clirun import run_cli
from tests.support.endpoint import RegistryEndpoint
from tests.support.tools import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
CONSOLE = re.compile(r"^```console\n(.*?)^```", re.MULTILINE | re.DOTALL)
# What the pages name, and what the test registry holds in its place.
EXAMPLE_REPOSITORY = "registry.example.com/team/train"
SAMPLE_REPOSITORY = "sample/app"
SAMPLE_FOUND = "sample/app:1.0.0"


def sessions() -> list[tuple[str, str]]:
    """(page:line, block) for each console block that checks the example repository."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in CONSOLE.finditer(text):
            if f"$ imagecheck check {EXAMPLE_REPOSITORY}" in m.group(1):
                line = text.count("\n", 0, m.start()) + 1
                found.append((f"{page.relative_to(ROOT)}:{line}", m.group(1)))
    return found


SESSIONS = sessions()


def test_the_front_pages_show_a_session() -> None:
    shown = {label.split(":")[0] for label, _ in SESSIONS}
    assert {"README.md", "docs/index.md", "docs/getting-started.md"} <= shown


def words(text: str) -> list[list[str]]:
    """Lines as words: the columns are padded to the longest reference, which the test
    registry's name changes."""
    return [line.split() for line in text.splitlines()]


@pytest.mark.parametrize(("label", "block"), SESSIONS, ids=[s[0] for s in SESSIONS])
def test_the_session_runs_as_shown(
    label: str, block: str, registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    command, rest = block.split("\n", 1)
    shown, status = rest.split("$ echo $?\n", 1)
    repository = registry_plain.ref(SAMPLE_REPOSITORY)
    args = shlex.split(command.removeprefix("$ ").replace(EXAMPLE_REPOSITORY, repository))
    assert args[:2] == ["imagecheck", "check"], label
    done = run_cli(args[1:], tmp_path)
    [digest] = set(re.findall(r"sha256:[0-9a-f]{64}", shown))
    expected = shown.replace(EXAMPLE_REPOSITORY, repository)
    expected = expected.replace(digest, registry_plain.images[SAMPLE_FOUND].digest)
    assert words(done.stdout) == words(expected), f"{label}: {done.stdout}{done.stderr}"
    assert done.code == int(status.strip()), label
