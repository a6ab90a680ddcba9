"""The GitHub Action (action.yml), its steps run as a runner runs a composite action (issue #16).

Each ``run:`` step is written to a file and run with ``bash --noprofile --norc -eo pipefail``
(the runner's ``shell: bash``), in a temporary git repository as GITHUB_WORKSPACE, with the
variables a runner sets (GITHUB_ACTION_PATH: this checkout; GITHUB_OUTPUT and
GITHUB_STEP_SUMMARY: a file per step; RUNNER_TEMP) and the step's ``env:`` with its ``${{ }}``
expressions evaluated as the runner does (inputs with their defaults, the pull request's base
commit, earlier steps' outputs). The install step really installs this checkout into a virtual
environment; the scan step checks a real registry (htpasswd over TLS) with the credentials a
``docker login`` leaves in ~/.docker/config.json.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.endpoint import RegistryEndpoint
from tests.support.tools import ROOT, system_tool

EXPRESSION = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")
INSTALL_TIMEOUT = 300.0


def _action() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text())
    return loaded


def _evaluate(value: str, context: dict[str, str]) -> str:
    """A ``${{ name }}`` the runner would substitute; an expression this test does not know
    fails the test rather than becoming an empty string."""
    return EXPRESSION.sub(lambda m: context[m.group(1)], value)


@dataclass
class StepRun:
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str


class Runner:
    """Runs action.yml's steps in ``workspace`` as a runner would."""

    def __init__(self, workspace: Path, temp: Path, home: Path) -> None:
        self.workspace, self.temp, self.home = workspace, temp, home
        self.outputs: dict[str, dict[str, str]] = {}

    def context(self, inputs: dict[str, str], base_sha: str) -> dict[str, str]:
        ctx = {"github.event.pull_request.base.sha": base_sha}
        for name, spec in _action()["inputs"].items():
            default = _evaluate(str(spec.get("default", "")), ctx)
            ctx[f"inputs.{name}"] = inputs.get(name, default)
        for step_id, outputs in self.outputs.items():
            ctx.update({f"steps.{step_id}.outputs.{k}": v for k, v in outputs.items()})
        return ctx

    def run(self, step: dict[str, Any], inputs: dict[str, str], base_sha: str = "") -> StepRun:
        number = len(list(self.temp.glob("step-*"))) + 1
        files = self.temp / f"step-{number}"
        files.mkdir()
        (files / "output").touch()
        (files / "summary").touch()
        (files / "script.sh").write_text(step["run"])
        ctx = self.context(inputs, base_sha)
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_ACTION_PATH": str(ROOT),
            "GITHUB_OUTPUT": str(files / "output"),
            "GITHUB_STEP_SUMMARY": str(files / "summary"),
            "RUNNER_TEMP": str(self.temp),
            **{k: _evaluate(str(v), ctx) for k, v in step.get("env", {}).items()},
        }
        assert step["shell"] == "bash"
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(files / "script.sh")],
            cwd=self.workspace, env=env, capture_output=True, text=True,
            timeout=INSTALL_TIMEOUT, check=False,
        )  # fmt: skip
        lines = (files / "output").read_text().splitlines()
        outputs = dict(line.split("=", 1) for line in lines)
        self.outputs[step["id"]] = outputs
        summary = (files / "summary").read_text()
        return StepRun(done.returncode, done.stdout, done.stderr, outputs, summary)


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _pod(image: str) -> str:
    return f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n    - name: a\n      image: {image}\n"  # noqa: E501


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The install step, run once: RUNNER_TEMP (holding the virtual environment) and its
    outputs."""
    system_tool("git")
    temp = tmp_path_factory.mktemp("runner-temp")
    runner = Runner(temp, temp, temp)
    [install, _] = _action()["runs"]["steps"]
    done = runner.run(install, {"python": sys.executable})
    assert done.code == 0, done.stderr[-2000:]
    assert done.outputs == {"bin": f"{temp}/imagecheck-action/bin"}
    return temp, done.outputs


@pytest.fixture
def pull_request(
    tmp_path: Path, registry_basic: RegistryEndpoint, installed: tuple[Path, dict[str, str]]
) -> tuple[Runner, str]:
    """A workspace with a base commit (an old manifest naming a missing image) and a pull
    request's commit on it; HOME holds the config.json a registry login writes."""
    repo = tmp_path / "workspace"
    (repo / "deploy").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "ci@example.com")
    _git(repo, "config", "user.name", "CI")
    (repo / "deploy/old.yaml").write_text(_pod(registry_basic.ref("sample/old:gone")))
    (repo / "README.md").write_text("base\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD")
    home = tmp_path / "home"
    (home / ".docker").mkdir(parents=True)
    user_pass = f"{registry_basic.username}:{registry_basic.password}".encode()
    auths = {registry_basic.host: {"auth": base64.b64encode(user_pass).decode()}}
    (home / ".docker/config.json").write_text(json.dumps({"auths": auths}))
    _, outputs = installed
    runner = Runner(repo, tmp_path / "temp", home)
    runner.temp.mkdir()
    runner.outputs["install"] = outputs
    return runner, base


def _scan(runner: Runner, base: str, **inputs: str) -> StepRun:
    scan = _action()["runs"]["steps"][1]
    return runner.run(scan, inputs, base)


def test_pull_request_annotates_the_missing_image_on_its_changed_line(
    pull_request: tuple[Runner, str], registry_basic: RegistryEndpoint
) -> None:
    runner, base = pull_request
    repo = runner.workspace
    found, missing = registry_basic.ref("sample/app:1.0.0"), registry_basic.ref("sample/app:9.9")
    (repo / "deploy/app.yaml").write_text(_pod(found) + "---\n" + _pod(missing))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "pr")
    assert registry_basic.ca_file is not None
    done = _scan(runner, base, **{"ca-file": str(registry_basic.ca_file)})
    assert done.code == 1, done.stderr
    assert done.outputs == {"exit-code": "1"}
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 1, done.stdout
    assert errors[0].startswith("::error file=deploy/app.yaml,line=15,title=image missing::")
    assert "old.yaml" not in done.stdout  # not changed by the pull request: not scanned
    assert "exit 1" in done.summary
    assert registry_basic.password is not None
    assert registry_basic.password not in done.stdout + done.stderr + done.summary


def test_without_the_login_the_registry_denies(
    pull_request: tuple[Runner, str], registry_basic: RegistryEndpoint
) -> None:
    runner, base = pull_request
    (runner.workspace / "app.yaml").write_text(_pod(registry_basic.ref("sample/app:1.0.0")))
    _git(runner.workspace, "add", "-A")
    _git(runner.workspace, "commit", "-q", "-m", "pr")
    (runner.home / ".docker/config.json").unlink()
    assert registry_basic.ca_file is not None
    done = _scan(runner, base, **{"ca-file": str(registry_basic.ca_file)})
    assert (done.code, done.outputs) == (3, {"exit-code": "3"}), done.stdout + done.stderr


def test_pull_request_without_a_changed_manifest_checks_nothing(
    pull_request: tuple[Runner, str],
) -> None:
    runner, base = pull_request
    (runner.workspace / "README.md").write_text("changed\n")
    _git(runner.workspace, "commit", "-q", "-am", "docs")
    done = _scan(runner, base)
    assert (done.code, done.outputs) == (0, {"exit-code": "0"})
    assert "nothing to check" in done.stdout
    assert "::error" not in done.stdout


def test_outside_a_pull_request_every_path_is_scanned(
    pull_request: tuple[Runner, str], registry_basic: RegistryEndpoint
) -> None:
    runner, _ = pull_request
    assert registry_basic.ca_file is not None
    done = _scan(runner, "", paths="deploy\n", **{"ca-file": str(registry_basic.ca_file)})
    assert (done.code, done.outputs) == (1, {"exit-code": "1"}), done.stderr
    assert "::error file=deploy/old.yaml,line=7,title=image missing::" in done.stdout
