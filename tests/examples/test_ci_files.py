"""The CI examples and the pre-commit hooks: valid YAML, the structure their hosts need, every
``imagecheck`` command line accepted by the real CLI, and the changed-files scripts doing what
their comments say when run on a real git history.

* ``examples/github-actions.yml``: ``on.pull_request``; a job whose script scans the files
  ``git diff`` names, with ``--output github``; a job piping ``helm template`` into
  ``imagecheck scan -``.
* ``examples/gitlab-ci.yml``: a job with the merge-request rule that scans what
  ``git diff $CI_MERGE_REQUEST_DIFF_BASE_SHA`` names.
* ``.pre-commit-hooks.yaml``: the keys pre-commit requires, and a ``files`` regex that picks
  Kubernetes YAML, Compose files and Dockerfiles.

Command lines are parsed with ``click``'s ``make_context`` on the real ``scan`` command, shell
variables replaced by dummy values, so a misspelt flag fails here. The scripts are run with
bash in a temporary git repository, ``imagecheck`` replaced by a stub that records its
arguments.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from imagecheck.cli import scan as scan_command
from imagecheck.scanning._paths import _scanned_in_directories as scanned_in_directories
from tests.support.tools import system_tool

REPO = Path(__file__).resolve().parents[2]
GITHUB = REPO / "examples" / "github-actions.yml"
GITLAB = REPO / "examples" / "gitlab-ci.yml"
PRE_COMMIT = REPO / ".pre-commit-hooks.yaml"
ALL_FILES = (GITHUB, GITLAB, PRE_COMMIT)

MR_RULE = '$CI_PIPELINE_SOURCE == "merge_request_event"'
PRE_COMMIT_REQUIRED = ("id", "name", "entry", "language")
# What a shell separates commands with: a command word comes first or after one of these.
_OPERATORS = frozenset({"|", "||", "&&", ";", "&", "(", ")", "$(", "`"})
_REDIRECTIONS = frozenset({">", ">>", "<", ">&", "<&", "&>", "&>>", ">|"})
_ARRAY = re.compile(r"^\$(\{[A-Za-z_][A-Za-z0-9_]*\[@\]\}|@)$")  # ${files[@]}, $@
DUMMY_PATH = "deploy/app.yaml"
DUMMY_VALUE = "dummy"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def workflow_on(workflow: dict[Any, Any]) -> Any:
    """The ``on:`` key, which YAML 1.1 (PyYAML) reads as the boolean ``True``."""
    return workflow["on"] if "on" in workflow else workflow.get(True)


def github_steps(workflow: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, job in workflow["jobs"].items():
        for step in job.get("steps") or []:
            yield name, step


def gitlab_jobs(pipeline: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Jobs: top-level mappings with a ``script`` (not ``variables``, ``default``...)."""
    return {k: v for k, v in pipeline.items() if isinstance(v, dict) and "script" in v}


def gitlab_script(job: dict[str, Any]) -> str:
    script = job["script"]
    return "\n".join(script) if isinstance(script, list) else str(script)


# --- imagecheck command lines ------------------------------------------------------------------


def imagecheck_commands(script: str) -> list[list[str]]:
    """The words after ``imagecheck`` of each ``imagecheck`` command in a shell script,
    without redirections."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        if "imagecheck" not in line:
            continue
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
        for i, word in enumerate(words):
            if Path(word).name == "imagecheck" and (i == 0 or words[i - 1] in _OPERATORS):
                commands.append(_arguments(words[i + 1 :]))
    return commands


def _arguments(words: list[str]) -> list[str]:
    """Up to the end of the command, leaving out ``> file``, ``< file``, ``2>&1``."""
    arguments: list[str] = []
    redirect = False
    for word in words:
        if word in _OPERATORS:
            break
        if redirect:
            redirect = False
        elif word in _REDIRECTIONS:
            redirect = True
        else:
            arguments.append(word)
    return arguments


def with_dummy_values(words: list[str]) -> list[str]:
    """Shell variables as a shell would expand them, give or take the values."""
    return [DUMMY_PATH if _ARRAY.match(w) else (DUMMY_VALUE if "$" in w else w) for w in words]


def parse_scan(words: list[str]) -> click.Context:
    """``imagecheck scan WORDS...`` through the real CLI's parser; raises on a bad flag."""
    assert words[:1] == ["scan"], f"not an `imagecheck scan` command: imagecheck {words}"
    return scan_command.make_context("scan", with_dummy_values(words[1:]))


def all_commands() -> list[tuple[str, list[str]]]:
    """Every imagecheck command line in the three files, labelled for the test id."""
    found: list[tuple[str, list[str]]] = []
    for job_name, step in github_steps(load(GITHUB)):
        for words in imagecheck_commands(str(step.get("run", ""))):
            found.append((f"github-actions.yml:{job_name}", words))
    for name, job in gitlab_jobs(load(GITLAB)).items():
        for key in ("before_script", "script", "after_script"):
            lines = job.get(key) or []
            for line in lines if isinstance(lines, list) else [lines]:
                for words in imagecheck_commands(str(line)):
                    found.append((f"gitlab-ci.yml:{name}", words))
    for hook in load(PRE_COMMIT):
        entry = shlex.split(hook["entry"])
        assert Path(entry[0]).name == "imagecheck", hook["entry"]
        words = [*entry[1:], *hook.get("args", []), DUMMY_PATH]
        found.append((f".pre-commit-hooks.yaml:{hook['id']}", words))
    return found


COMMANDS = all_commands()


# --- YAML and structure ------------------------------------------------------------------------


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_parses_as_yaml_without_duplicate_keys(path: Path) -> None:
    loader = yaml.SafeLoader(path.read_text(encoding="utf-8"))
    try:
        node = loader.get_single_node()
    finally:
        loader.dispose()
    assert node is not None, "empty file"
    assert list(_duplicate_keys(node)) == []


def _duplicate_keys(node: yaml.Node) -> Iterator[str]:
    if isinstance(node, yaml.MappingNode):
        keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
        yield from sorted({k for k in keys if keys.count(k) > 1})
        for _, value in node.value:
            yield from _duplicate_keys(value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _duplicate_keys(item)


def test_github_workflow_runs_on_pull_requests() -> None:
    workflow = load(GITHUB)
    assert "pull_request" in workflow_on(workflow)
    assert workflow.get("permissions") == {"contents": "read"}


def test_github_changed_files_job_scans_the_diff_with_annotations() -> None:
    workflow = load(GITHUB)
    scanning = [
        (job, step)
        for job, step in github_steps(workflow)
        if "git diff" in str(step.get("run", "")) and "imagecheck scan" in step["run"]
    ]
    assert len(scanning) == 1
    job, step = scanning[0]
    assert imagecheck_commands(step["run"])[0][1:3] == ["--output", "github"]
    assert step.get("shell") == "bash"  # [[ =~ ]], arrays, and -o pipefail
    assert step["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    assert step["env"]["DOCKER_AUTH_CONFIG"] == "${{ secrets.DOCKER_AUTH_CONFIG }}"
    checkout = next(s for j, s in github_steps(workflow) if j == job and "uses" in s)
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"]["fetch-depth"] == 0, "git diff needs the base commit"


def test_github_helm_job_pipes_the_rendered_chart_into_scan() -> None:
    runs = [str(step.get("run", "")) for _, step in github_steps(load(GITHUB))]
    helm = [run for run in runs if "helm template" in run]
    assert len(helm) == 1
    assert imagecheck_commands(helm[0]) == [["scan", "--output", "github", "-"]]
    assert re.search(r"helm template[^|]*\|\s*imagecheck scan", helm[0].replace("\\\n", " "))


def test_gitlab_job_runs_on_merge_requests_and_scans_the_diff() -> None:
    jobs = gitlab_jobs(load(GITLAB))
    assert list(jobs) == ["imagecheck"]
    job = jobs["imagecheck"]
    assert {"if": MR_RULE} in job["rules"]
    script = gitlab_script(job)
    assert 'git diff -z --name-only --diff-filter=ACMR "$CI_MERGE_REQUEST_DIFF_BASE_SHA"' in script
    assert [words[0] for words in imagecheck_commands(script)] == ["scan"]
    assert str(job["variables"]["GIT_DEPTH"]) == "0", "git diff needs the base commit"


def test_pre_commit_hooks_have_the_required_keys() -> None:
    hooks = load(PRE_COMMIT)
    assert isinstance(hooks, list)
    assert [h["id"] for h in hooks] == ["imagecheck-scan", "imagecheck-scan-strict"]
    for hook in hooks:
        assert all(isinstance(hook.get(key), str) and hook[key] for key in PRE_COMMIT_REQUIRED)
        assert hook["language"] == "python"
        assert hook["entry"].startswith("imagecheck scan")
        assert hook["pass_filenames"] is True
    assert "--strict" in shlex.split(hooks[1]["entry"])


@pytest.mark.parametrize(
    ("path", "scanned"),
    [
        ("deploy/app.yaml", True),
        ("docker-compose.yml", True),
        ("compose.yaml", True),
        ("Dockerfile", True),
        ("build/Dockerfile.prod", True),
        ("services/api.Dockerfile", True),
        ("Containerfile", True),
        ("k8s/Job.YML", True),
        (".github/workflows/ci.yml", True),
        (".gitlab-ci.yml", True),
        (".devcontainer/devcontainer.json", True),
        ("docker/Dockerfile-dev", True),
        ("docker-bake.hcl", True),
        ("Tiltfile", True),
        ("quadlet/web.container", True),
        ("overlays/prod/Kustomization", True),
        ("README.md", False),
        ("src/app.py", False),
        ("yaml/notes.txt", False),
    ],
)
def test_pre_commit_files_regex(path: str, scanned: bool) -> None:
    for hook in load(PRE_COMMIT):
        assert bool(re.search(hook["files"], path)) is scanned
        assert not re.search(hook["exclude"], path)


@pytest.mark.parametrize(
    "path",
    [
        "a.yaml", "b.yml", "c.json", ".drone.yml", "devcontainer.json", ".devcontainer.json",
        "Dockerfile", "Dockerfile.prod", "Dockerfile-dev", "Dockerfile_ci", "api.Dockerfile",
        "Containerfile", "Containerfile.arm64", "web.container", "base.image", "Tiltfile",
        "docker-bake.hcl", "docker-bake.override.json", "kustomization.yaml", "Kustomization",
    ],
)  # fmt: skip
def test_the_hooks_pass_every_file_a_directory_scan_reads(path: str) -> None:
    """The filter is a superset of what scan reads in a directory (scan passes over the rest
    of what it is named), so no file a scan of the tree would read escapes the hook."""
    assert scanned_in_directories(path), path  # the table holds only names scan reads
    for hook in load(PRE_COMMIT):
        assert re.search(hook["files"], path)


def test_pre_commit_excludes_helm_templates() -> None:
    for hook in load(PRE_COMMIT):
        assert re.search(hook["exclude"], "charts/app/templates/deployment.yaml")


def test_ci_examples_filter_files_as_the_hooks_do() -> None:
    """One definition of "a manifest" across the three files (the hooks' adds ``(?i)``, the
    scripts use bash's ``nocasematch``)."""
    hook = load(PRE_COMMIT)[0]
    github = load(GITHUB)["env"]
    gitlab = load(GITLAB)["imagecheck"]["variables"]
    assert hook["files"] == "(?i)" + github["MANIFESTS"] == "(?i)" + gitlab["MANIFESTS"]
    assert hook["exclude"] == github["NOT_MANIFESTS"] == gitlab["NOT_MANIFESTS"]


# --- Every imagecheck command line parses ------------------------------------------------------


def test_every_file_has_its_commands() -> None:
    where = [label.split(":")[0] for label, _ in COMMANDS]
    assert where.count("github-actions.yml") == 2
    assert where.count("gitlab-ci.yml") == 1
    assert where.count(".pre-commit-hooks.yaml") == 2


@pytest.mark.parametrize(
    "words", [pytest.param(words, id=f"{label} {' '.join(words)}") for label, words in COMMANDS]
)
def test_command_line_parses_with_the_real_cli(words: list[str]) -> None:
    context = parse_scan(words)
    assert context.params["paths"]


@pytest.mark.parametrize(
    "words",
    [
        pytest.param(["scan", "--ouptut", "github", "x.yaml"], id="misspelt flag"),
        pytest.param(["scan", "--output", "gitlab", "x.yaml"], id="no such choice"),
        pytest.param(["scan", "--output", "github"], id="no PATHS"),
        pytest.param(["check", "x:1"], id="not scan"),
    ],
)
def test_a_broken_command_line_fails_the_parse(words: list[str]) -> None:
    with pytest.raises((click.UsageError, AssertionError)):
        parse_scan(words)


def test_shell_variables_become_dummy_values() -> None:
    script = 'printf x | imagecheck scan -u "$USER" --output github -- "${files[@]}" > out'
    assert imagecheck_commands(script) == [
        ["scan", "-u", "$USER", "--output", "github", "--", "${files[@]}"]
    ]
    assert with_dummy_values(imagecheck_commands(script)[0]) == [
        "scan", "-u", DUMMY_VALUE, "--output", "github", "--", DUMMY_PATH,
    ]  # fmt: skip


# --- The changed-files scripts, run on a real history ------------------------------------------


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, str]:
    """A repository with a base commit and a branch commit on it; ``(repo, base sha)``."""
    system_tool("git")  # and bash, which Debian always has (Essential: yes)
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "ci@example.com")
    _git(repo, "config", "user.name", "CI")
    for name in ("deploy/old.yaml", "deploy/kept.yaml", "README.md"):
        _write(repo / name)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    return repo, _git(repo, "rev-parse", "HEAD")


def _write(path: Path, text: str | None = None) -> None:
    """Contents that name the file: equal contents would make git see a deleted manifest and
    an added template as one rename (and list only the template)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        text = f"kind: ConfigMap\nmetadata: {{name: {path.stem}}}\n"
    path.write_text(f"# {path}\n{text}", encoding="utf-8")


def _run_script(script: str, repo: Path, env: dict[str, str], tmp: Path) -> tuple[str, list[str]]:
    """Run ``script`` as the CI runner would (bash -eo pipefail) with a stub imagecheck;
    its output, and the arguments imagecheck got (empty: not run)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "imagecheck"
    stub.write_text('#!/usr/bin/env bash\nprintf "%s\\0" "$@" > "$IMAGECHECK_ARGS"\n')
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    args_file = tmp / "args"
    full_env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp),
        "IMAGECHECK_ARGS": str(args_file),
        **env,
    }
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=repo,
        env=full_env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    called = args_file.read_text().split("\0")[:-1] if args_file.exists() else []
    return done.stdout, called


def _script_for(which: str, base: str) -> tuple[str, dict[str, str]]:
    """The changed-files script of ``which`` CI host, with the environment the host gives it."""
    if which == "github":
        workflow = load(GITHUB)
        step = next(s for _, s in github_steps(workflow) if "git diff" in str(s.get("run", "")))
        env = {k: str(v) for k, v in workflow["env"].items()}
        return step["run"], {**env, "BASE_SHA": base}
    job = load(GITLAB)["imagecheck"]
    env = {k: str(v) for k, v in job["variables"].items()}
    return gitlab_script(job), {**env, "CI_MERGE_REQUEST_DIFF_BASE_SHA": base}


@pytest.mark.parametrize("which", ["github", "gitlab"])
def test_script_with_no_manifest_changed_does_not_run_imagecheck(
    which: str, history: tuple[Path, str], tmp_path: Path
) -> None:
    repo, base = history
    _write(repo / "README.md", "changed\n")
    _write(repo / "charts/app/templates/deployment.yaml", "image: {{ .Values.image }}\n")
    _git(repo, "rm", "-q", "deploy/old.yaml")  # deleted: nothing to check
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "docs")
    script, env = _script_for(which, base)
    output, called = _run_script(script, repo, env, tmp_path)
    assert called == []
    assert "nothing to check" in output


@pytest.mark.parametrize("which", ["github", "gitlab"])
def test_script_scans_exactly_the_changed_manifests(
    which: str, history: tuple[Path, str], tmp_path: Path
) -> None:
    repo, base = history
    changed = [
        "build/Dockerfile.prod",
        "deploy/app.yaml",
        "deploy/kept.yaml",
        "docker-compose.yml",
        "Dockerfile",
        "my service/job.YML",  # a space, and upper case
    ]
    for name in changed:
        _write(repo / name, "FROM scratch\n" if "ockerfile" in name else "kind: Job\n")
    _write(repo / "README.md", "changed\n")
    _write(repo / "charts/app/templates/deployment.yaml", "image: {{ .Values.image }}\n")
    _git(repo, "rm", "-q", "deploy/old.yaml")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "change")
    script, env = _script_for(which, base)
    _, called = _run_script(script, repo, env, tmp_path)
    assert called[0] == "scan"
    separator = called.index("--")
    assert sorted(called[separator + 1 :]) == sorted(changed)
    parse_scan(called)  # the real arguments, not dummies
