"""Only the command line knows its flags: no library message outside ``imagecheck/cli/`` names
one. A library error names the setting in its own terms (``UsageError.setting``, a ``Hint``);
``render`` words it as the option, so ``check(platform="x")`` from Python does not tell its
caller to pass ``--platform``.

The scan reads every string constant (f-string parts too) but docstrings, which document the
command that uses the code. What it may not fix is listed below, each with its reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from imagecheck import render
from imagecheck.errors import UsageError
from imagecheck.kube._incluster import SETTING, InCluster
from imagecheck.registry import parse_platform

PACKAGE = Path(__file__).resolve().parents[2] / "imagecheck"
FLAG = re.compile(r"(?<![\w-])--[a-z]")

# (module, the string's text): why it may name a flag.
ALLOWED = {
    # The front ends' one table of option words: where a setting becomes a flag.
    ("render.py", "--platform"): "render.OPTION_TEXT: the option a setting is worded as",
    ("render.py", "--from-pod"): "render.OPTION_TEXT: the option a setting is worded as",
    ("render.py", "--on-error pass"): "render.OPTION_TEXT: the option a setting is worded as",
    ("render.py", "pass --ca-file with the CA that signed it"): "render.hint_text: a Hint worded",
    ("render.py", "add --insecure-registry "): "render.hint_text: a Hint worded",
    # Dockerfile syntax that scan reads, not imagecheck's flags.
    ("scanning/_dockerfile.py", "--from"): "a Dockerfile's COPY flag, parsed",
    ("scanning/_dockerfile.py", "COPY --from"): "a Dockerfile's instruction, named",
    ("scanning/_dockerfile.py", "--mount"): "a Dockerfile's RUN flag, parsed",
    ("scanning/_dockerfile.py", "RUN --mount from"): "a Dockerfile's instruction, named",
    ("scanning/_dockerfile.py", "RUN --mount: invalid CSV: "): "a Dockerfile's flag, named",
    # Metric HELP text: what a series counts, for whoever reads the /metrics of the command
    # that set the option; not a message about a run.
    ("webhook/_telemetry.py", "Client connections the server closed: refused or evicted at "
     "--max-connections, headers or body not received within --read-timeout."):
        "a metric's HELP text",
    ("webhook/_telemetry.py", "Images refused unchecked: over --max-images-per-review, or "
     "queued past the deadline."): "a metric's HELP text",
    ("cluster/_exporter.py", "Availability series the last good audit left out, over "
     "--max-series."): "a metric's HELP text",
    # audit's and reap's engines (cluster/) word their own command's options: each is the
    # library half of one command, which no other front end calls. Left as they are.
    ("cluster/_exporter.py", "metrics: %d of %d workload containers left out (%d series over "
     "--max-series %d), found images first"): "audit --serve's log line",
    ("cluster/_reap_pass.py", "a bare pod: only with --include-pods"): "reap's outcome",
    ("cluster/_reap_pass.py", "s, within --grace "): "reap's outcome",
    ("cluster/_audit.py", "--kind "): "audit's --kind parser",
}  # fmt: skip


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes: the first statement of a module, class or function."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def flag_strings() -> list[tuple[str, str]]:
    """Every (module, string) outside cli/ whose text names a ``--flag``, docstrings aside."""
    found: list[tuple[str, str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module.startswith("cli/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and FLAG.search(node.value)
            ):
                found.append((module, node.value))
    return found


def test_no_library_message_names_a_flag() -> None:
    named = [found for found in flag_strings() if found not in ALLOWED]
    assert named == [], "word a setting in the library's terms; render.OPTION_TEXT words it"


def test_every_allowance_is_still_needed() -> None:
    assert set(ALLOWED) - set(flag_strings()) == set()


@pytest.mark.parametrize(
    ("error", "library", "command_line"),
    [
        pytest.param(
            lambda: parse_platform("linux"),
            "platform 'linux': expected OS/ARCH[/VARIANT], e.g. linux/arm64",
            "--platform 'linux': expected OS/ARCH[/VARIANT], e.g. linux/arm64",
            id="platform",
        ),
        pytest.param(
            lambda: InCluster.from_env({}),
            f"{SETTING} works inside a pod: KUBERNETES_SERVICE_HOST/PORT are not set",
            "--from-pod works inside a pod: KUBERNETES_SERVICE_HOST/PORT are not set",
            id="in-cluster",
        ),
    ],
)
def test_the_command_line_words_the_setting_as_its_option(
    error: object, library: str, command_line: str
) -> None:
    assert callable(error)
    with pytest.raises(UsageError) as caught:
        error()
    assert str(caught.value) == library
    assert render.error_text(caught.value) == command_line


def test_every_setting_named_by_the_library_has_its_option() -> None:
    assert render.option_text(SETTING) == "--from-pod"
    assert render.option_text("platform") == "--platform"
