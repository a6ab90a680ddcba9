"""Tests for images the build itself makes (skipped, scan-wide), named build contexts, and the
build tools' files: Skaffold, Tilt, docker buildx bake (HCL and JSON), compose contexts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imagecheck.scanning import ScanReport, scan_text
from imagecheck.scanning._builds import repository
from imagecheck.scanning._hcl import MAX_DEPTH, Text, read_hcl
from tests.support.scantree import scan_tree

SKAFFOLD = """\
apiVersion: skaffold/v4beta14
kind: Config
build:
  artifacts:
    - image: leeroy-web
      context: leeroy-web
profiles:
  - name: p
    build:
      artifacts:
        - image: gcr.io/team/leeroy-app
verify:
  - name: smoke
    container:
      name: smoke
      image: alpine:3.20
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
        - {name: web, image: leeroy-web}
        - {name: app, image: "gcr.io/team/leeroy-app:v2@sha256:%s"}
        - {name: db, image: postgres:16}
""" % ("a" * 64)
BAKE = """\
# comment
variable "REPO" {
  default = "docker/buildx-bin"
}
variable "TAG" {}
/* a block
   comment */
target "default" {
  tags = ["${REPO}:master", "${REPO}:${TAG}",
          "other/name:1"]
  contexts = {
    alpine = "docker-image://alpine:3.20"
    "golang" = "target:golang"
    src = "./src"
  }
  args = { X = notequal("", "a") ? "b" : "c", Y = "${format("%s", "}")}" }
  platforms = [for p in ["a", "b"]: p]
}
"""


def rows(report: ScanReport) -> list[tuple[str, int, str, str | None]]:
    return [(os.path.normpath(o.file), o.line, o.image, o.skipped) for o in report.occurrences]


def test_skaffold_artifacts_are_built_and_so_is_their_repository_elsewhere(
    tmp_path: Path,
) -> None:
    # The manifest is read before skaffold.yaml: the pass over the scan is order-free.
    report = scan_tree(tmp_path, {"k8s/a.yaml": DEPLOYMENT, "skaffold.yaml": SKAFFOLD})
    assert report.problems == []
    digest = "a" * 64
    assert rows(report) == [
        ("k8s/a.yaml", 8, "leeroy-web", "built by skaffold (leeroy-web at ./skaffold.yaml:5)"),
        (
            "k8s/a.yaml",
            9,
            f"gcr.io/team/leeroy-app:v2@sha256:{digest}",
            "built by skaffold (gcr.io/team/leeroy-app at ./skaffold.yaml:11)",
        ),
        ("k8s/a.yaml", 10, "postgres:16", None),
        ("skaffold.yaml", 5, "leeroy-web", "built by skaffold"),
        ("skaffold.yaml", 11, "gcr.io/team/leeroy-app", "built by skaffold"),
        ("skaffold.yaml", 16, "alpine:3.20", None),  # a verify container is pulled
    ]
    assert [o.kind for o in report.occurrences][3:5] == ["skaffold", "skaffold"]


def test_a_built_image_with_a_placeholder_is_built_not_a_placeholder() -> None:
    text = SKAFFOLD.replace("leeroy-web\n", "${REGISTRY}/web\n", 1)
    found, _ = scan_text(text, "skaffold.yaml")
    assert found[0].skipped == "built by skaffold"


def test_tilt_builds_by_string_literal_only() -> None:
    text = (
        "# docker_build('commented', '.')\n"
        "docker_build('example-html', '.')\n"
        "x = 1  # docker_build('after-a-comment', '.')\n"
        "custom_build(\n"
        '  ref="example-custom",\n'
        "  command='x')\n"
        "docker_build('gcr.io/' + project, '.')\n"
        "docker_build_with_restart('restarted', '.', entrypoint='/app')\n"
    )
    found, problems = scan_text(text, "Tiltfile")
    assert problems == []
    assert [(o.line, o.image, o.container, o.skipped) for o in found] == [
        (2, "example-html", "docker_build", "built by tilt"),
        (5, "example-custom", "custom_build", "built by tilt"),
        (8, "restarted", "docker_build_with_restart", "built by tilt"),
    ]


def test_bake_tags_are_built_and_image_contexts_checked() -> None:
    found, problems = scan_text(BAKE, "docker-bake.hcl")
    assert problems == []
    assert [(o.line, o.image, o.container, o.skipped) for o in found] == [
        (9, "docker/buildx-bin:master", "tags", "built by docker buildx bake"),
        (9, "docker/buildx-bin:${TAG}", "tags", "built by docker buildx bake"),
        (10, "other/name:1", "tags", "built by docker buildx bake"),
        (12, "alpine:3.20", "contexts.alpine", None),
    ]


def test_bake_json() -> None:
    text = """{
  "variable": {"V": {"default": "3.20"}},
  "target": {
    "app": {
      "tags": ["me/app:1"],
      "contexts": {"base": "docker-image://alpine:${V}", "t": "target:x"}
    }
  }
}"""
    found, problems = scan_text(text, "docker-bake.json")
    assert problems == []
    assert [(o.line, o.image, o.skipped) for o in found] == [
        (5, "me/app:1", "built by docker buildx bake"),
        (6, "alpine:3.20", None),
    ]


def test_from_a_named_context_is_the_context_and_bake_tags_are_built(tmp_path: Path) -> None:
    compose = (
        "services:\n"
        "  app:\n"
        "    build:\n"
        "      context: .\n"
        "      additional_contexts:\n"
        "        base: docker-image://alpine:3.19\n"
        "        src: ./src\n"
        "  other:\n"
        "    build:\n"
        "      context: .\n"
        "      additional_contexts:\n"
        "        - tools=docker-image://golang:1.22\n"
    )
    dockerfile = "FROM base\nCOPY --from=src / /\nFROM golang\nFROM docker/buildx-bin:9\n"
    report = scan_tree(
        tmp_path, {"compose.yaml": compose, "Dockerfile": dockerfile, "docker-bake.hcl": BAKE}
    )
    assert report.problems == []
    assert rows(report)[:4] == [
        ("Dockerfile", 1, "base", "named build context base (./compose.yaml:6)"),
        ("Dockerfile", 2, "src", "named build context src (./compose.yaml:7)"),
        ("Dockerfile", 3, "golang", "named build context golang (./docker-bake.hcl:13)"),
        (
            "Dockerfile",
            4,
            "docker/buildx-bin:9",
            "built by docker buildx bake (docker/buildx-bin:master at ./docker-bake.hcl:9)",
        ),
    ]
    assert ("compose.yaml", 6, "alpine:3.19", None) in rows(report)
    assert ("compose.yaml", 12, "golang:1.22", None) in rows(report)


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("nginx", "nginx"),
        ("nginx:1", "nginx"),
        ("registry:5000/a/b", "registry:5000/a/b"),
        ("registry:5000/a/b:1@sha256:00", "registry:5000/a/b"),
    ],
)
def test_repository(image: str, expected: str) -> None:
    assert repository(image) == expected


@pytest.mark.parametrize(
    ("text", "line", "why"),
    [
        ('target "a" {\n  tags = ["x"\n', 3, "expected ']'"),
        ('target "a" {\n', 2, "unbalanced braces"),
        ('tags = "unterminated\n', 1, "unterminated string"),
        ("a = 1\n}\n", 2, "unbalanced braces"),
        ("x = " + "[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2) + "\n", 1, "nested more than"),
        ('a = "${"${"${x}"}"}"\n@\n', 2, "unexpected character"),
    ],
    ids=["open-list", "open-block", "string", "closer", "deep", "character"],
)
def test_hcl_problems_are_one_line_with_where(text: str, line: int, why: str) -> None:
    result = read_hcl(text)
    assert isinstance(result, tuple)
    assert result[0] == line and why in result[1]
    found, problems = scan_text(text, "docker-bake.hcl")
    assert found == [] and len(problems) == 1 and problems[0].message.startswith("HCL: ")


def test_hcl_heredoc_and_nested_template_strings() -> None:
    body = read_hcl('a = <<EOT\nline\nEOT\nb = "x${f("}")}y"\n')
    assert not isinstance(body, tuple)
    assert body.attributes == {"a": Text("line\n", 1), "b": Text('x${f("}")}y', 4)}
