"""Tests for CI configuration in a scan: each system's image fields, its placeholders, and how a
file is recognised (its path, else its shape), whether named or found in a directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imagecheck.scanning import Occurrence, scan_files, scan_text

# (line, kind, name, container, image, skipped)
Row = tuple[int, str, str | None, str | None, str, str | None]


def rows(occurrences: list[Occurrence]) -> list[Row]:
    return [(o.line, o.kind, o.name, o.container, o.image, o.skipped) for o in occurrences]


def scanned(text: str, file: str) -> list[Row]:
    occurrences, problems = scan_text(text, file)
    assert problems == []
    return rows(occurrences)


WORKFLOW = """\
on: [push]
jobs:
  test:
    runs-on: ubuntu-latest
    container: node:22
    services:
      db:
        image: postgres:16
      off:
        image: ''
    steps:
      - uses: actions/checkout@v4
      - name: lint
        uses: docker://ghcr.io/rhysd/actionlint:1.7.7
      - uses: ./local-action
  matrix:
    strategy: {matrix: {img: [a, b]}}
    container:
      image: ${{ matrix.img }}
      credentials: {username: x}
  reuse:
    uses: org/repo/.github/workflows/w.yml@v1
"""


def test_github_workflow_containers_services_and_docker_steps() -> None:
    assert scanned(WORKFLOW, ".github/workflows/ci.yml") == [
        (5, "github-actions", "test", None, "node:22", None),
        (8, "github-actions", "test", "db", "postgres:16", None),
        (14, "github-actions", "test", "lint", "ghcr.io/rhysd/actionlint:1.7.7", None),
        (19, "github-actions", "matrix", None, "${{ matrix.img }}",
         "template placeholder ${{ matrix.img }}"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "name: x\nruns:\n  using: docker\n  image: docker://alpine:3.20\n",
            [(4, "github-action", "x", None, "alpine:3.20", None)],
            id="docker-image",
        ),
        pytest.param(
            "name: x\nruns:\n  using: docker\n  image: Dockerfile\n", [], id="dockerfile-is-a-build"
        ),
        pytest.param(
            "name: x\nruns:\n  using: composite\n  steps:\n    - uses: docker://busybox:1\n",
            [(5, "github-action", "x", None, "busybox:1", None)],
            id="composite-step",
        ),
    ],
)
def test_github_action_metadata(text: str, expected: list[Row]) -> None:
    assert scanned(text, "sub/action.yml") == expected


GITLAB = """\
variables:
  RUBY: ruby:3.3
  BUILD_IMAGE: {value: golang:1.22, description: the build image}
  PER_JOB: node:20
image: $RUBY
default:
  services: [{name: postgres:16, alias: db}]
.template: &tpl
  image: ${BUILD_IMAGE}
  services:
    - docker:dind
build:
  extends: .template
  script: make
test:
  <<: *tpl
  script: [make test]
lint:
  image: {name: $PER_JOB, entrypoint: [""]}
  variables: {PER_JOB: node:22}
  script: lint
deploy:
  image: $CI_REGISTRY_IMAGE/deploy:$CI_COMMIT_SHA
  script: deploy
"""


def test_gitlab_images_once_where_written_and_top_level_variables() -> None:
    assert scanned(GITLAB, ".gitlab-ci.yml") == [
        (5, "gitlab-ci", None, None, "ruby:3.3", None),
        (7, "gitlab-ci", "default", "db", "postgres:16", None),
        (9, "gitlab-ci", ".template", None, "golang:1.22", None),
        (11, "gitlab-ci", ".template", None, "docker:dind", None),
        # through the merge key, where the alias is: the job's own copy of the template
        (16, "gitlab-ci", "test", None, "golang:1.22", None),
        (16, "gitlab-ci", "test", None, "docker:dind", None),
        # a job sets PER_JOB itself: the image depends on the job, not substituted
        (19, "gitlab-ci", "lint", None, "$PER_JOB", "template placeholder $PER_JOB"),
        (23, "gitlab-ci", "deploy", None, "$CI_REGISTRY_IMAGE/deploy:$CI_COMMIT_SHA",
         "template placeholder $CI_REGISTRY_IMAGE"),
    ]  # fmt: skip


def test_gitlab_component_inputs_and_reference_tags() -> None:
    text = (
        "spec:\n  inputs:\n    image: {default: alpine}\n---\n"
        "job:\n  image: $[[ inputs.image ]]\n  script: x\n"
        "other:\n  image: !reference [job, image]\n  script: y\n"
    )
    assert scanned(text, "templates/component.gitlab-ci.yml") == [
        (6, "gitlab-ci", "job", None, "$[[ inputs.image ]]",
         "template placeholder $[[ inputs.image ]]"),
    ]  # fmt: skip


CIRCLECI = """\
version: 2.1
orbs:
  inline:
    executors:
      small: {docker: [{image: cimg/base:2024.01}]}
executors:
  py:
    parameters: {tag: {type: string, default: "3.12"}}
    docker:
      - image: cimg/python:<< parameters.tag >>
      - image: cimg/postgres:16.1
jobs:
  build:
    docker:
      - image: cimg/go:1.22
        auth: {username: x, password: $PASS}
  vm:
    machine:
      image: ubuntu-2204:current
"""


def test_circleci_docker_images_not_machine_images() -> None:
    assert scanned(CIRCLECI, ".circleci/config.yml") == [
        (5, "circleci", "small", None, "cimg/base:2024.01", None),
        (10, "circleci", "py", None, "cimg/python:<< parameters.tag >>",
         "template placeholder << parameters.tag >>"),
        (11, "circleci", "py", None, "cimg/postgres:16.1", None),
        (15, "circleci", "build", None, "cimg/go:1.22", None),
    ]  # fmt: skip


DRONE = """\
kind: pipeline
type: docker
name: default
steps:
  - name: test
    image: golang:1.22
  - name: publish
    image: plugins/docker
services:
  - name: cache
    image: redis:7
---
kind: secret
name: token
get: {path: secrets, name: token}
"""


def test_drone_steps_and_services() -> None:
    assert scanned(DRONE, ".drone.yml") == [
        (6, "drone", "default", "test", "golang:1.22", None),
        (8, "drone", "default", "publish", "plugins/docker", None),
        (11, "drone", "default", "cache", "redis:7", None),
    ]


@pytest.mark.parametrize(
    ("text", "file"),
    [
        pytest.param(
            "steps:\n  - name: build\n    image: golang:1.22\nservices:\n"
            "  - name: db\n    image: postgres:16\n",
            ".woodpecker.yml",
            id="lists",
        ),
        pytest.param(
            "steps:\n  build:\n    image: golang:1.22\nservices:\n  db:\n    image: postgres:16\n",
            ".woodpecker/build.yaml",
            id="mappings",
        ),
    ],
)
def test_woodpecker_steps_and_services_as_lists_or_mappings(text: str, file: str) -> None:
    assert [(line, kind, container, image) for line, kind, _, container, image, _ in
            scanned(text, file)] == [(3, "woodpecker", "build", "golang:1.22"),
                                     (6, "woodpecker", "db", "postgres:16")]  # fmt: skip


BITBUCKET = """\
image:
  name: python:3.12
  username: $USER
definitions:
  services:
    pg:
      image: postgres:16
    docker:
      memory: 2048
  steps:
    - step: &deploy
        name: Deploy
        image: alpine:3.20
pipelines:
  default:
    - parallel:
        - step:
            name: Test
            image: {name: node:22}
        - step: *deploy
  branches:
    main:
      - stage:
          steps:
            - step:
                name: Build
                image: golang:1.22
"""


def test_bitbucket_images_steps_at_any_depth_definitions_where_used() -> None:
    assert scanned(BITBUCKET, "bitbucket-pipelines.yml") == [
        (2, "bitbucket-pipelines", None, None, "python:3.12", None),
        (7, "bitbucket-pipelines", None, "pg", "postgres:16", None),
        (19, "bitbucket-pipelines", "Test", None, "node:22", None),
        (20, "bitbucket-pipelines", "Deploy", None, "alpine:3.20", None),
        (27, "bitbucket-pipelines", "Build", None, "golang:1.22", None),
    ]


AZURE = """\
resources:
  containers:
    - container: u22
      image: ubuntu:22.04
    - container: db
      image: postgres:16
container: u22
stages:
  - stage: A
    jobs:
      - job: inline
        container:
          image: mcr.microsoft.com/dotnet/sdk:8.0
      - job: direct
        container: node:22
      - job: runtime
        container: $[ variables.image ]
      - deployment: d
        container: u22
        services: {pg: db}
pool: {vmImage: ubuntu-latest}
"""


def test_azure_resources_and_job_containers_aliases_resolved() -> None:
    assert scanned(AZURE, "azure-pipelines.yml") == [
        (4, "azure-pipelines", None, "u22", "ubuntu:22.04", None),
        (6, "azure-pipelines", None, "db", "postgres:16", None),
        (13, "azure-pipelines", "inline", None, "mcr.microsoft.com/dotnet/sdk:8.0", None),
        (15, "azure-pipelines", "direct", None, "node:22", None),
        (17, "azure-pipelines", "runtime", None, "$[ variables.image ]",
         "template placeholder $[ variables.image ]"),
    ]  # fmt: skip


def test_azure_template_alias_of_the_including_pipeline_is_not_an_image() -> None:
    text = "jobs:\n  - job: a\n    container: linux\n  - job: b\n    container: alpine:3.20\n"
    assert scanned(text, ".azure-pipelines/jobs.yml") == [
        (3, "azure-pipelines", "a", None, "linux",
         "container resource alias of the including pipeline (linux)"),
        (5, "azure-pipelines", "b", None, "alpine:3.20", None),
    ]  # fmt: skip


# --- recognised by shape, or not at all --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        pytest.param(WORKFLOW, "github-actions", id="workflow"),
        pytest.param("runs: {using: docker, image: docker://a:1}\n", "github-action", id="action"),
        pytest.param(GITLAB, "gitlab-ci", id="gitlab-include"),
        pytest.param(CIRCLECI, "circleci", id="circleci"),
        pytest.param(DRONE, "drone", id="drone"),
        pytest.param(BITBUCKET, "bitbucket-pipelines", id="bitbucket"),
        pytest.param(AZURE, "azure-pipelines", id="azure-template"),
    ],
)
def test_a_ci_file_under_another_name_is_known_by_its_shape(text: str, kind: str) -> None:
    found = scanned(text, "ci/included.yml")
    assert found != []
    assert {row[1] for row in found} == {kind}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: a, image: nginx}]\n",
            id="kubernetes",
        ),
        pytest.param("services:\n  web:\n    image: nginx\n", id="compose"),
        pytest.param("tasks:\n  build:\n    cmds: [make]\n    image: x\n", id="taskfile"),
        pytest.param("jobs:\n  build:\n    container: nginx\n", id="jobs-without-on"),
    ],
)
def test_other_yaml_is_not_read_as_ci(text: str) -> None:
    assert {row[1] for row in scanned(text, "ci/other.yml")} <= {"Pod", "compose"}


def test_a_kubernetes_manifest_under_a_ci_name_stays_a_manifest() -> None:
    text = "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: a, image: nginx}]\n"
    assert scanned(text, ".gitlab-ci.yml") == [(4, "Pod", None, "a", "nginx", None)]


def test_an_alias_bomb_in_a_ci_file_ends_in_a_problem() -> None:
    # Bitbucket's steps are found at any depth: ten to the seventh through aliases.
    lines = ["definitions:", "  a0: &a0 {step: {image: x}}"]
    lines += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    lines.append("pipelines:\n  default: *a7")
    occurrences, problems = scan_text("\n".join(lines) + "\n", "bitbucket-pipelines.yml")
    assert len(problems) == 1
    assert problems[0].line == 11
    assert "aliases lead to more than" in problems[0].message
    assert len(occurrences) < 100_000


# --- files named, and files found in a directory -------------------------------------------

REPOSITORY = {
    ".github/workflows/ci.yml": "on: push\njobs:\n  t:\n    container: node:22\n",
    ".github/actions/tool/action.yml": "runs:\n  using: docker\n  image: docker://a:1\n",
    ".gitlab-ci.yml": "job:\n  image: ruby:3.3\n  script: x\n",
    ".circleci/config.yml": "version: 2.1\njobs:\n  b:\n    docker: [{image: cimg/go:1.22}]\n",
    ".drone.yml": "kind: pipeline\nsteps:\n  - name: t\n    image: golang:1.22\n",
    ".woodpecker/test.yaml": "steps:\n  t:\n    image: golang:1.22\n",
    "bitbucket-pipelines.yml": "image: python:3.12\n",
    "azure-pipelines.yml": "container: ubuntu:22.04\n",
}
EXPECTED = [
    (".circleci/config.yml", "circleci", "cimg/go:1.22"),
    (".drone.yml", "drone", "golang:1.22"),
    (".github/actions/tool/action.yml", "github-action", "a:1"),
    (".github/workflows/ci.yml", "github-actions", "node:22"),
    (".gitlab-ci.yml", "gitlab-ci", "ruby:3.3"),
    (".woodpecker/test.yaml", "woodpecker", "golang:1.22"),
    ("azure-pipelines.yml", "azure-pipelines", "ubuntu:22.04"),
    ("bitbucket-pipelines.yml", "bitbucket-pipelines", "python:3.12"),
]


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    for name, text in REPOSITORY.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def found(paths: list[str], root: Path) -> list[tuple[str, str, str]]:
    report = scan_files(paths)
    assert report.problems == []
    return sorted(
        (Path(os.path.relpath(o.file, root)).as_posix(), o.kind, o.image)
        for o in report.occurrences
    )


def test_ci_files_named_explicitly_are_read_as_ci(repository: Path) -> None:
    assert found([str(repository / name) for name in REPOSITORY], repository) == EXPECTED


def test_ci_files_under_a_hidden_directory_named_as_the_root_of_a_walk(repository: Path) -> None:
    assert found([str(repository / ".github")], repository) == [
        (".github/actions/tool/action.yml", "github-action", "a:1"),
        (".github/workflows/ci.yml", "github-actions", "node:22"),
    ]


def test_a_scan_of_a_repository_root_reads_its_ci_files(repository: Path) -> None:
    # Needs the directory walk to enter hidden directories and read hidden files.
    assert found([str(repository)], repository) == EXPECTED
