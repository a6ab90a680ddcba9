"""Tests for dev environments: devcontainer.json (JSON with comments, the files it names
followed once and confined) and Podman Quadlet units."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imagecheck.scanning import scan_text
from imagecheck.scanning._jsonc import strict_json
from tests.support.scantree import scan_tree

DEVCONTAINER = """\
// A comment, "with quotes"
{
  "name": "dev", /* inline */
  "image": "mcr.microsoft.com/devcontainers/base:ubuntu",
  "url": "http://example.com//not-a-comment",
  "features": {"ghcr.io/devcontainers/features/node:1": {},},
}
"""


def test_jsonc_keeps_lines_and_drops_comments_and_trailing_commas() -> None:
    clean = strict_json(DEVCONTAINER)
    assert clean.count("\n") == DEVCONTAINER.count("\n")
    assert "//not-a-comment" in clean and "inline" not in clean
    found, problems = scan_text(DEVCONTAINER, ".devcontainer/devcontainer.json")
    assert problems == []
    assert [(o.line, o.kind, o.name, o.image, o.skipped) for o in found] == [
        (4, "devcontainer", "dev", "mcr.microsoft.com/devcontainers/base:ubuntu", None)
    ]


def test_a_devcontainer_placeholder_is_skipped_and_invalid_json_is_a_problem() -> None:
    text = '{"image": "mcr.microsoft.com/devcontainers/python:3-${templateOption:v}"}'
    (found,), _ = scan_text(text, "devcontainer.json")
    assert found.skipped == "template placeholder ${templateOption:v}"
    found_none, problems = scan_text('{\n  "image": "a",\n  "x": [1 2]\n}', "devcontainer.json")
    assert found_none == [] and [(p.line, p.message[:12]) for p in problems] == [
        (3, "invalid JSON")
    ]


def test_the_dockerfile_and_compose_files_named_are_read_once(tmp_path: Path) -> None:
    files = {
        ".devcontainer/devcontainer.json": (
            '{"build": {"dockerfile": "../docker/dev-env", "context": ".."},\n'
            ' "dockerComposeFile": ["compose.yml", "../compose.yaml"]}\n'
        ),
        "docker/dev-env": "FROM golang:1.22\n",  # not a Dockerfile by its name
        ".devcontainer/compose.yml": "services:\n  db:\n    image: postgres:16\n",
        "compose.yaml": "services:\n  cache:\n    image: redis:7\n",
    }
    report = scan_tree(tmp_path, files)
    assert report.problems == []
    assert sorted((os.path.normpath(o.file), o.line, o.image) for o in report.occurrences) == [
        (".devcontainer/compose.yml", 3, "postgres:16"),
        ("compose.yaml", 3, "redis:7"),
        ("docker/dev-env", 1, "golang:1.22"),
    ]


def test_a_named_file_outside_the_tree_is_not_read(tmp_path: Path) -> None:
    files = {
        "repo/.devcontainer/devcontainer.json": '{"build": {"dockerfile": "../../Dockerfile"}}',
        "Dockerfile": "FROM secret:1\n",
    }
    report = scan_tree(tmp_path, files, ("repo",))
    assert report.occurrences == []
    assert [p.message for p in report.problems] == [
        "not scanned: outside repo (named at repo/.devcontainer/devcontainer.json:1)"
    ]


def test_a_missing_named_file_is_a_problem_naming_where(tmp_path: Path) -> None:
    files = {".devcontainer.json": '{\n  "dockerComposeFile": "missing.yml"\n}'}
    report = scan_tree(tmp_path, files)
    assert len(report.problems) == 1
    assert report.problems[0].message.endswith("(named at ./.devcontainer.json:2)")


QUADLET = """\
[Unit]
Description=web
[Container]
# Image=commented
; Image=commented too
Image=docker.io/library/nginx:1.27
Exec=sleep \\
  infinity
[Service]
Image=not-a-container-key
"""


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("web.container", QUADLET, [(6, "docker.io/library/nginx:1.27", None)]),
        (
            "pull.image",
            "[Image]\nImage=quay.io/centos/centos:latest\n",
            [(2, "quay.io/centos/centos:latest", None)],
        ),
        (
            "a.container",
            "[Container]\nImage=base.image\n",
            [(2, "base.image", "pulled by the quadlet unit base.image")],
        ),
        (
            "b.container",
            "[Container]\nImage=app.build\n",
            [(2, "app.build", "built by a podman quadlet .build unit (app.build)")],
        ),
        (
            "c.container",
            '[Container]\nImage="registry.example/x:${TAG}"\n',
            [(2, "registry.example/x:${TAG}", "template placeholder ${TAG}")],
        ),
        ("d.container", "[Container]\nImage=\\\n  quay.io/a/b:1\n", [(2, "quay.io/a/b:1", None)]),
    ],
    ids=["container", "image-unit", "image-ref", "build-ref", "placeholder", "continued"],
)
def test_quadlet(name: str, text: str, expected: list[tuple[int, str, str | None]]) -> None:
    found, problems = scan_text(text, name)
    assert problems == []
    assert [(o.line, o.image, o.skipped) for o in found] == expected
    assert {o.kind for o in found} == {"quadlet"}
