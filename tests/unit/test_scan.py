"""Tests for imagecheck.scanning: images found in manifests, Compose files and Dockerfiles.

The fixture files under tests/fixtures/scan/ are the cases; each table row names a file and
every (line, image) expected from it, in order, so a missed, extra or duplicated occurrence
fails the row.
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
from pathlib import Path

import pytest
import yaml

from imagecheck.scanning import FileProblem, Occurrence, scan_paths, scan_text
from imagecheck.scanning._manifests import images_in_document
from imagecheck.scanning._yamltree import SyntaxProblem, documents
from tests.support.dockerfilescan import assert_dockerfile

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "scan"
DIGEST = "sha256:7cc4b5aefd1d0cadf8d97d4350462ba51c694ebca145b08d7d41b41acc8db5aa"
ENVOY = "envoyproxy/envoy:v1.31.0"


def fixture(name: str) -> str:
    return str(FIXTURES / name)


def lines_and_images(occurrences: list[Occurrence]) -> list[tuple[int, str]]:
    return [(o.line, o.image) for o in occurrences]


# --- every fixture file: the exact (line, image) list and the exact problems -------------

# (id, file, [(line, image)], [(line, message)])
FILES: list[tuple[str, str, list[tuple[int, str]], list[tuple[int | None, str]]]] = [
    ("workloads-every-kind", "k8s/workloads.yaml", [
        (13, "busybox:1.36"),  # Pod initContainers, trailing comment
        (16, "ghcr.io/example/app:1.0"),  # Pod containers; the next container has no image
        (20, "busybox:1.36"),  # Pod ephemeralContainers: a duplicate image, its own line
        (31, f"ghcr.io/example/migrate@{DIGEST}"),  # Job
        (43, "nginx:1.27"),  # Deployment
        (45, "nginx:1.27"),  # the same image twice in one pod
        (54, "postgres:16"),  # StatefulSet, flow-style container
        (65, "quay.io/example/agent:v2"),  # DaemonSet
        (76, "registry.example.com:5000/team/rs:3"),  # ReplicaSet
        (87, "Invalid/UPPER:case"),  # ReplicationController; invalid, still returned
        (97, "alpine:3.20"),  # PodTemplate
    ], []),
    ("cronjob", "k8s/cronjob.yaml", [
        (13, "busybox:1.36"),
        (16, "ghcr.io/example/report:2024.1"),
    ], []),
    ("list-and-podlist", "k8s/list.yaml", [
        (16, "ghcr.io/example/api:3.1"),
        (24, "ghcr.io/example/api:3.1"),
        (41, "alpine:3.20"),
    ], []),
    ("custom-resources-with-pod-template", "k8s/rollout.yaml", [
        (15, "ghcr.io/example/canary:0.9"),
        (25, "gcr.io/knative-samples/helloworld-go"),
    ], []),
    ("anchors-and-aliases", "k8s/anchors.yaml", [
        (12, ENVOY),  # the anchored container, where it is written
        (15, "ghcr.io/example/app:1.0"),  # &app, where it is written
        (17, "ghcr.io/example/app:1.0"),  # image: *app -> the alias line
        (18, ENVOY),  # - *sidecar -> the alias line
        (19, ENVOY),  # <<: *sidecar -> the merge line
        (21, "from-merge-list:1"),  # <<: [{...}, {image: ...}] written inline
        (25, ENVOY),  # image: *proxy wins over the merged image
    ], []),
    ("flow-style", "k8s/flow.yaml", [
        (2, "alpine:3.20"),
        (2, "busybox:1.36"),
        (4, "nginx:1.27"),
        (9, "x"),
    ], []),
    ("quoting-and-block-scalars", "k8s/quoting.yaml", [
        (8, "alpine:3.20"),
        (10, "busybox:1.36"),
        (13, "nginx:1.27"),  # |- : the content line, not the indicator
        (16, "redis:7"),  # >-
        (20, "\npostgres:16\n"),  # | keeps its newlines; the checker reports it invalid
        (23, "memcached:1.6"),  # plain scalar on the next line
        (25, "ghcr.io/example/tagged:1"),  # !!str
        (27, ""),  # "" is a value (invalid); null is none
        (31, "42"),
    ], [(33, "Pod quoting, container not-a-string: image is not a string")]),
    ("compose", "compose/docker-compose.yml", [
        (7, "nginx:1.27"),
        (10, "ghcr.io/example/base:1"),  # from <<: *defaults, on the merge line
        (15, "ghcr.io/example/worker:latest"),  # its own image wins; ${TAG:-latest} its default
        (18, "postgres:16"),
        (20, "redis:7"),
        (22, "redis:7"),
    ], []),
    ("dockerfile-args-stages-continuations", "docker/Dockerfile", [
        (1, "docker/dockerfile:1"),  # the # syntax= directive: BuildKit's frontend
        (8, "golang:1.22"),
        (19, "python:3.12-slim"),  # ARG default built from another ARG
        (24, "docker.io/library/debian:${RUNTIME_TAG}"),
        (25, "alpine:3.20"),  # ${UNDECLARED:-alpine:3.20}
        (26, "$STAGE_ONLY"),  # an ARG after the first FROM is not seen by FROM
    ], [(28, "FROM requires either one or three arguments")]),
    ("dockerfile-copy-from-and-mounts", "docker/sources.Dockerfile", [
        (1, "docker/dockerfile:1"),
        (4, "golang:1.22"),
        (8, "ghcr.io/example/protos:2.1"),  # the flag's own line in a continued RUN
        (10, "tonistiigi/xx:1.4"),
        (12, "gcr.io/distroless/static-debian12"),  # --from=build and --from=0 are stages
        (16, "docker.io/library/busybox:1.36"),
        (17, "$TOOLS_IMAGE"),  # BuildKit substitutes no ARG in --from: skipped
    ], []),  # a heredoc's COPY --from is text
    ("dockerfile-suffix", "docker/app.Dockerfile", [(1, "node:22-alpine")], []),
    ("dockerfile-prefix", "docker/Dockerfile.dev", [(1, "node:22")], []),
    ("containerfile", "docker/Containerfile", [
        (1, "registry.access.redhat.com/ubi9/ubi-minimal:9.4"),
    ], []),
    ("dockerfile-escape-backtick", "docker/windows.Dockerfile", [
        (3, "mcr.microsoft.com/windows/servercore:ltsc2022"),
    ], []),
    ("helm-raw-template", "helm/deployment.yaml", [], [
        (7, "invalid YAML: did not find expected node content (while parsing a flow node)"),
    ]),
    ("helm-placeholders", "helm/rendered-with-placeholders.yaml", [
        (11, "{{ .Values.image.repository }}:{{ .Values.image.tag }}"),
        (13, "{{ .Values.image }}"),
        (15, "${IMAGE}"),
        (17, "registry.example.com/app:$(TAG)"),
        (19, "$IMAGE"),
        (21, "busybox:1.36"),
    ], []),
    ("invalid-yaml-other-documents-scanned", "invalid/broken.yaml", [
        (8, "alpine:3.20"),
        (26, "nginx:1.27"),
        (43, "redis:7"),
    ], [
        (17, "invalid YAML: mapping values are not allowed in this context"),
        (30, "invalid YAML: did not find expected ',' or ']' "
             "(while parsing a flow sequence from line 29)"),
        (36, "invalid YAML: found undefined alias 'undefined'"),
    ]),
    ("invalid-yaml-tab", "invalid/tabs.yaml", [], [
        (3, "invalid YAML: found character that cannot start any token "
            "(while scanning for the next token)"),
    ]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "expected", "expected_problems"),
    [row[1:] for row in FILES],
    ids=[row[0] for row in FILES],
)
def test_images_and_problems_per_file(
    path: str, expected: list[tuple[int, str]], expected_problems: list[tuple[int | None, str]]
) -> None:
    occurrences, problems = scan_paths([fixture(path)])
    assert lines_and_images(occurrences) == expected
    assert [(p.line, p.message) for p in problems] == expected_problems
    assert {o.file for o in occurrences} <= {fixture(path)}
    assert {p.file for p in problems} <= {fixture(path)}


# --- kind, name, container and skipped ----------------------------------------------------

# (id, file, line, image, kind, name, container, skipped)
DETAILS: list[tuple[str, str, int, str, str, str | None, str | None, str | None]] = [
    ("pod-init", "k8s/workloads.yaml", 13, "busybox:1.36", "Pod", "debug", "setup", None),
    ("pod-ephemeral", "k8s/workloads.yaml", 20, "busybox:1.36", "Pod", "debug", "debugger",
     None),
    ("job", "k8s/workloads.yaml", 31, f"ghcr.io/example/migrate@{DIGEST}", "Job", "migrate",
     "migrate", None),
    ("deployment-second-container", "k8s/workloads.yaml", 45, "nginx:1.27", "Deployment",
     "web", "proxy", None),
    ("statefulset-flow", "k8s/workloads.yaml", 54, "postgres:16", "StatefulSet", "db",
     "postgres", None),
    ("podtemplate", "k8s/workloads.yaml", 97, "alpine:3.20", "PodTemplate", "tpl", "tpl", None),
    ("cronjob", "k8s/cronjob.yaml", 16, "ghcr.io/example/report:2024.1", "CronJob", "nightly",
     "report", None),
    ("list-item-kind", "k8s/list.yaml", 16, "ghcr.io/example/api:3.1", "Deployment", "api",
     "api", None),
    ("list-item-generate-name", "k8s/list.yaml", 24, "ghcr.io/example/api:3.1", "Pod",
     "api-7d9f-", "api", None),
    ("rollout", "k8s/rollout.yaml", 15, "ghcr.io/example/canary:0.9", "Rollout", "canary",
     "canary", None),
    ("container-without-name", "k8s/rollout.yaml", 25, "gcr.io/knative-samples/helloworld-go",
     "Service", "hello", None, None),
    ("alias-container", "k8s/anchors.yaml", 18, ENVOY, "Deployment", "anchors", "sidecar",
     None),
    ("merge-key-name-overrides", "k8s/anchors.yaml", 19, ENVOY, "Deployment", "anchors",
     "merged", None),
    ("compose", "compose/docker-compose.yml", 7, "nginx:1.27", "compose", "web", "web", None),
    ("compose-merge", "compose/docker-compose.yml", 10, "ghcr.io/example/base:1", "compose",
     "api", "api", None),
    # Interpolation with a default is checked as the default (issue #13).
    ("compose-interpolation", "compose/docker-compose.yml", 15,
     "ghcr.io/example/worker:latest", "compose", "worker", "worker", None),
    ("dockerfile-stage", "docker/Dockerfile", 8, "golang:1.22", "Dockerfile", "build", None,
     None),
    ("dockerfile-stage-name-as-written", "docker/Dockerfile", 19, "python:3.12-slim",
     "Dockerfile", "Runtime", None, None),
    ("dockerfile-arg-without-default", "docker/Dockerfile", 24,
     "docker.io/library/debian:${RUNTIME_TAG}", "Dockerfile", "final", None,
     "template placeholder ${RUNTIME_TAG}: ARG RUNTIME_TAG has no default"),
    ("dockerfile-stage-arg", "docker/Dockerfile", 26, "$STAGE_ONLY", "Dockerfile", None, None,
     "template placeholder $STAGE_ONLY: STAGE_ONLY is not declared with ARG before the "
     "first FROM"),
    ("helm-quoted", "helm/rendered-with-placeholders.yaml", 11,
     "{{ .Values.image.repository }}:{{ .Values.image.tag }}", "Deployment", "placeholders",
     "helm-quoted", "template placeholder {{ .Values.image.repository }}"),
    ("helm-unquoted-is-a-flow-mapping", "helm/rendered-with-placeholders.yaml", 13,
     "{{ .Values.image }}", "Deployment", "placeholders", "helm-unquoted",
     "template placeholder {{ .Values.image }}"),
    ("envsubst", "helm/rendered-with-placeholders.yaml", 15, "${IMAGE}", "Deployment",
     "placeholders", "envsubst", "template placeholder ${IMAGE}"),
    ("tekton", "helm/rendered-with-placeholders.yaml", 17, "registry.example.com/app:$(TAG)",
     "Deployment", "placeholders", "tekton", "template placeholder $(TAG)"),
    ("shell", "helm/rendered-with-placeholders.yaml", 19, "$IMAGE", "Deployment",
     "placeholders", "shell", "template placeholder $IMAGE"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "line", "image", "kind", "name", "container", "skipped"),
    [row[1:] for row in DETAILS],
    ids=[row[0] for row in DETAILS],
)
def test_occurrence_details(
    path: str,
    line: int,
    image: str,
    kind: str,
    name: str | None,
    container: str | None,
    skipped: str | None,
) -> None:
    occurrences, _ = scan_paths([fixture(path)])
    expected = Occurrence(image, fixture(path), line, kind, name, container, skipped)
    assert expected in occurrences


def test_only_placeholders_are_skipped() -> None:
    occurrences, _ = scan_paths([str(FIXTURES / "k8s"), fixture("docker/Dockerfile")])
    skipped = {(Path(o.file).name, o.line) for o in occurrences if o.skipped}
    assert skipped == {("Dockerfile", 24), ("Dockerfile", 26)}


# --- Dockerfiles, inline ------------------------------------------------------------------


def arg_doubling(lines: int) -> str:
    """ARG A0=x, ARG A1=$A0$A0, ...: A27 would be 2^27 characters (issue #10)."""
    args = ["ARG A0=x"] + [f"ARG A{i}=${{A{i - 1}}}${{A{i - 1}}}" for i in range(1, lines)]
    return "\n".join([*args, f"FROM ${{A{lines - 1}}}", ""])


def nested_defaults(depth: int) -> str:
    """ARG IMAGE=${UNSET:-${UNSET:-...alpine}}: each level one more call, without a bound."""
    default = "${UNSET:-" * depth + "alpine" + "}" * depth
    return f"ARG UNSET\nARG IMAGE={default}\nFROM $IMAGE\n"


# (id, Dockerfile text, [(line, image, stage name, skipped)], [(line, message)])
DOCKERFILES: list[
    tuple[str, str, list[tuple[int, str, str | None, str | None]], list[tuple[int, str]]]
] = [
    ("braces-and-bare", "ARG A=alpine\nARG T=3.20\nFROM ${A}:$T\n",
     [(3, "alpine:3.20", None, None)], []),
    ("several-args-one-line", "ARG A=alpine T=3.20\nFROM $A:$T\n",
     [(2, "alpine:3.20", None, None)], []),
    ("quoted-default", "ARG BASE='alpine:3.20'\nFROM \"$BASE\"\n",
     [(2, "alpine:3.20", None, None)], []),
    ("default-when-unset", "ARG A\nFROM ${A:-busybox}:${B-1.36}\n",
     [(2, "busybox:1.36", None, None)], []),
    ("default-when-empty", "ARG A=\"\"\nFROM ${A:-busybox}${A-x}\n",
     [(2, "busybox", None, None)], []),
    ("alternative", "ARG SET=1\nARG UNSET\nFROM alpine${SET:+:3.20}${UNSET:+:never}\n",
     [(3, "alpine:3.20", None, None)], []),
    ("nested-default", "ARG T=3.20\nFROM ${IMAGE:-alpine:${T}}\n",
     [(2, "alpine:3.20", None, None)], []),
    ("redeclared", "ARG A=one\nARG A=two\nFROM $A\n", [(3, "two", None, None)], []),
    ("declared-again-without-default", "ARG A=one\nARG A\nFROM $A\n",
     [(3, "one", None, None)], []),
    # A literal "$A" is no placeholder: an invalid reference, for the checker to report.
    ("escaped-dollar", "FROM \\$A\n", [(1, "$A", None, None)], []),
    ("single-quotes-do-not-expand", "ARG A=x\nFROM '$A'\n", [(2, "$A", None, None)], []),
    ("arg-from-unresolved-arg", "ARG V\nARG IMG=python:${V}\nFROM ${IMG}\n",
     [(3, "python:${V}", None, "template placeholder ${V}: ARG V has no default")], []),
    ("platform-arg", "FROM --platform=$BUILDPLATFORM alpine:$TARGETARCH\n",
     [(1, "alpine:$TARGETARCH", None, "template placeholder $TARGETARCH: TARGETARCH is set "
                                      "by the builder for each platform")], []),
    ("unsupported-substitution", "ARG A=x.y\nFROM ${A%.y}\n",
     [(2, "${A%.y}", None, "template placeholder ${A%.y}: unsupported substitution")], []),
    ("lone-dollar", "FROM alpine$\n", [(1, "alpine$", None, None)], []),
    ("lowercase-and-tab", "from\talpine:3.20\tas\tbase\n", [(1, "alpine:3.20", "base", None)],
     []),
    ("crlf", "ARG A=alpine\r\nFROM \\\r\n  $A AS x\r\n", [(3, "alpine", "x", None)], []),
    ("split-word", "FROM alp\\\nine:3.20\n", [(1, "alpine:3.20", None, None)], []),
    ("flag-and-as-on-later-lines", "FROM --platform=linux/arm64 \\\n  alpine:3.20 \\\n  AS a\n",
     [(2, "alpine:3.20", "a", None)], []),
    ("stage-reference-after-substitution", "ARG S=base\nFROM alpine AS base\nFROM ${S}\n",
     [(2, "alpine", "base", None)], []),
    ("stage-name-before-definition-is-an-image", "FROM base\nFROM alpine AS base\n",
     [(1, "base", None, None), (2, "alpine", "base", None)], []),
    ("scratch-silent", "FROM scratch\nFROM scratch AS s\nFROM s\n", [], []),
    ("heredoc-dash-and-quoted", "FROM a\nRUN <<-'EOT' bash\n\tFROM b\n\tEOT\nFROM c\n",
     [(1, "a", None, None), (5, "c", None, None)], []),
    ("two-heredocs", "FROM a\nCOPY <<one <<two /d/\nFROM b\none\nFROM c\ntwo\nFROM d\n",
     [(1, "a", None, None), (7, "d", None, None)], []),
    ("here-string-is-no-heredoc", "FROM a\nRUN cat <<< x\nFROM b\n",
     [(1, "a", None, None), (3, "b", None, None)], []),
    ("unterminated-heredoc-is-no-heredoc", "FROM a\nRUN echo \"<<x\"\nFROM b\n",
     [(1, "a", None, None), (3, "b", None, None)], []),
    ("continuation-at-end-of-file", "FROM alpine \\\n", [(1, "alpine", None, None)], []),
    ("comment-not-a-directive-after-instruction", "FROM a\n# escape=`\nFROM b `\n  AS c\n",
     [(1, "a", None, None)], [(3, "FROM requires either one or three arguments")]),
    ("jinja-template", "FROM {{ base_image }}\n",
     [(1, "{{ base_image }}", None, "template placeholder {{ base_image }}")], []),
    ("go-template-after-flag", "FROM --platform=linux/amd64 \\\n  {{.Base}}:{{ .Tag }}\n",
     [(2, "{{.Base}}:{{ .Tag }}", None, "template placeholder {{.Base}}")], []),
    ("from-without-image", "FROM\nFROM --platform=linux/amd64\n", [], [
        (1, "FROM requires either one or three arguments"),
        (2, "FROM requires either one or three arguments"),
    ]),
    ("template-in-flag-only", "FROM --platform={{ .P }}\n", [],
     [(1, "FROM requires either one or three arguments")]),
    ("not-as", "FROM a TO b\n", [], [(1, "FROM requires either one or three arguments")]),
    # Bounded substitution (issue #10): the FROM that needs the value is the problem.
    ("arg-doubling", arg_doubling(28), [],
     [(29, "FROM: ARG A13 (line 14) expands to over 4096 characters")]),
    ("arg-over-the-limit-unused-is-no-problem", f"ARG LONG={'x' * 5000}\nFROM alpine\n",
     [(2, "alpine", None, None)], []),
    ("arg-over-the-limit-through-another", f"ARG A={'x' * 5000}\nARG B=$A\nFROM ${{B}}\n",
     [], [(3, "FROM: ARG A (line 1) expands to over 4096 characters")]),
    ("image-over-the-limit-after-substitution", f"ARG A={'x' * 3000}\nFROM $A$A\n", [],
     [(2, "FROM: the image expands to over 4096 characters")]),
    ("image-over-the-limit-as-written", f"FROM {'x' * 5000}\n", [],
     [(1, "FROM: longer than 4096 characters")]),
    ("substitutions-nested-32-deep", nested_defaults(32), [(3, "alpine", None, None)], []),
    ("substitutions-nested-too-deep", nested_defaults(2000), [],
     [(3, "FROM: ARG IMAGE (line 2) nests substitutions more than 32 deep")]),
    ("continuation-comment-then-end-of-file", "FROM alpine \\\n# c\n\n",
     [(1, "alpine", None, None)], []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected", "expected_problems"),
    [row[1:] for row in DOCKERFILES],
    ids=[row[0] for row in DOCKERFILES],
)
def test_dockerfile(
    text: str,
    expected: list[tuple[int, str, str | None, str | None]],
    expected_problems: list[tuple[int, str]],
) -> None:
    assert_dockerfile(text, expected, expected_problems)


# --- YAML, inline -------------------------------------------------------------------------

POD = "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: "


def merge_chain(length: int) -> str:
    """m0 holds the image; each next mapping merges the one before; a Pod merges the last."""
    chain = ["m0: &m0 {image: alpine:3.20}"]
    chain += [f"m{i}: &m{i} {{<<: *m{i - 1}}}" for i in range(1, length + 1)]
    return "\n".join([*chain, "kind: Pod", f"spec: {{containers: [{{<<: *m{length}}}]}}", ""])


# (id, YAML text, [(line, image, skipped)], [(line, message)])
YAML_CASES: list[
    tuple[str, str, list[tuple[int, str, str | None]], list[tuple[int | None, str]]]
] = [
    ("plain", POD + "alpine:3.20\n", [(6, "alpine:3.20", None)], []),
    ("null-image-is-no-image", POD + "~\n", [], []),
    ("tagged-null", POD + "!!null x\n", [], []),
    ("quoted-null-is-a-value", POD + "'null'\n", [(6, "null", None)], []),
    ("placeholder-inside", POD + "ghcr.io/org/app:{{ .Chart.AppVersion }}\n",
     [(6, "ghcr.io/org/app:{{ .Chart.AppVersion }}",
       "template placeholder {{ .Chart.AppVersion }}")], []),
    ("placeholder-unclosed", POD + "'x:${TAG'\n",
     [(6, "x:${TAG", "template placeholder ${TAG")], []),
    ("mapping-image-is-a-problem", POD + "{repository: a, tag: b}\n", [],
     [(6, "Pod p, container c: image is not a string")]),
    ("repeated-key-last-wins", POD + "first:1\n    image: second:1\n", [(7, "second:1", None)],
     []),
    ("no-kind-no-services", "spec:\n  containers:\n  - image: x\n", [], []),
    ("services-not-a-mapping", "services: [docker:dind]\nimage: x\n", [], []),
    ("compose-service-alias", "x: &s {image: a:1}\nservices:\n  one: *s\n  two: *s\n",
     [(3, "a:1", None), (4, "a:1", None)], []),
    ("kind-not-a-string", "kind: [Pod]\nspec: {containers: [{image: x}]}\n", [], []),
    # Containers are found by shape (issue #13), so a List in a List is read too.
    ("nested-list-read-by-shape",
     "kind: List\nitems:\n- kind: List\n  items:\n  - " + POD.replace("\n", "\n    ")
     + "x\n", [(10, "x", None)], []),
    # Recursive structures are valid YAML; the walk does not enter a node inside itself.
    ("recursive-merge", "kind: Pod\nspec: &s\n  <<: *s\n  containers: [{image: x}]\n",
     [(4, "x", None)], []),
    ("recursive-pod-template", "kind: Job\nspec: &s {template: {spec: *s}, containers: [\n"
     "  {image: y}]}\n", [(3, "y", None)], []),
    ("anchors-do-not-cross-documents", "a: &x alpine\n---\n" + POD + "*x\n", [],
     [(8, "invalid YAML: found undefined alias 'x'")]),
    ("control-character", POD + "a\x07b\n---\n" + POD + "c\n", [(13, "c", None)],
     [(6, "invalid YAML: character 0x7: control characters are not allowed")]),
    ("nesting-too-deep", "a: " + "[" * 5000 + "\n---\n" + POD + "d\n", [(8, "d", None)],
     [(1, "invalid YAML: exceeded maximum nesting depth (while increasing flow level)")]),
    ("only-comments", "# nothing\n---\n# here\n", [], []),
    ("byte-order-mark", "\ufeff" + POD + "e\n", [(6, "e", None)], []),
    ("document-end-marker", POD + "f\n...\n---\n" + POD + "g\n", [(6, "f", None),
                                                                 (14, "g", None)], []),
    # Bounded walks (issue #10): a problem where the alias is used; other documents are read.
    ("merge-chain-100-deep", merge_chain(99), [(102, "alpine:3.20", None)], []),
    ("merge-chain-101-deep", merge_chain(100), [],
     [(103, "merge keys (<<) nested more than 100 deep")]),
    # Every mapping is walked, so the chain's 101st link is where the problem is.
    ("merge-chain-5000-deep", merge_chain(5000) + "---\n" + POD + "h\n", [(5010, "h", None)],
     [(102, "merge keys (<<) nested more than 100 deep")]),
    ("image-over-the-limit", POD + "x" * 5000 + "\n", [],
     [(6, "Pod p, container c: image longer than 4096 characters")]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected", "expected_problems"),
    [row[1:] for row in YAML_CASES],
    ids=[row[0] for row in YAML_CASES],
)
def test_yaml(
    text: str,
    expected: list[tuple[int, str, str | None]],
    expected_problems: list[tuple[int | None, str]],
) -> None:
    occurrences, problems = scan_text(text, "in.yaml")
    assert [(o.line, o.image, o.skipped) for o in occurrences] == expected
    assert [(p.line, p.message) for p in problems] == expected_problems


def test_an_alias_bomb_is_not_expanded() -> None:
    """Billion laughs: the walk reads every value of an object (containers are found by
    shape), so it reads the bomb until the file's alias budget ends it, on the first line
    that crosses it, in well under a second."""
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    levels += [
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    text = "\n".join([*levels, "kind: Pod", "spec: {containers: *i}", ""])
    message = (
        "aliases lead to more than 100,000 values to read: the rest of the file is not scanned"
    )
    assert scan_text(text, "bomb.yaml") == ([], [FileProblem("bomb.yaml", 5, message)])


def test_an_alias_bomb_that_the_walk_would_expand_ends_in_a_problem() -> None:
    """Items x containers: 500 aliases each way are 250,000 occurrences from 4 KB."""
    text = "\n".join(
        [
            "c: &c {name: c, image: alpine:3.20}",
            "cs: &cs [" + ", ".join(["*c"] * 500) + "]",
            "p: &p {kind: Pod, metadata: {name: p}, spec: {containers: *cs}}",
            "kind: List",
            "items: [" + ", ".join(["*p"] * 500) + "]",
            "---",
            POD + "after:1",
            "",
        ]
    )
    occurrences, problems = scan_text(text, "bomb.yaml")
    message = (
        "aliases lead to more than 100,000 values to read: the rest of the file is not scanned"
    )
    assert problems == [FileProblem("bomb.yaml", 5, message)]
    assert 0 < len(occurrences) < 100_000
    assert "after:1" not in {o.image for o in occurrences}


def test_nesting_is_bounded_whichever_parser_reads_it() -> None:
    """libyaml refuses more than 1,000 levels; PyYAML's own parser would go on."""
    text = "[" * 1001 + "]" * 1001 + "\n---\n" + POD + "z\n"
    for loader in (yaml.SafeLoader, yaml.CSafeLoader):
        [problem, document] = documents(text, loader=loader)
        assert isinstance(problem, SyntaxProblem)
        assert problem.line == 1
        assert "nest" in problem.message
        assert not isinstance(document, SyntaxProblem)
        [(_, occurrence)] = images_in_document(document, "f")
        assert isinstance(occurrence, Occurrence)
        assert occurrence.image == "z"


def test_a_file_has_at_most_100_problems() -> None:
    """Each syntax error parses the rest of the file again: 100 errors, then one line."""
    occurrences, problems = scan_text("---\n[\n" * 5000 + "---\n" + POD + "x\n", "f.yaml")
    assert occurrences == []
    assert len(problems) == 101
    assert problems[-1] == FileProblem(
        "f.yaml", None, "more than 100 problems: the rest is not scanned"
    )


# --- which files, in which order ------------------------------------------------------------


def test_directory_is_recursive_sorted_reads_hidden_files_and_skips_node_modules() -> None:
    tree = fixture("tree")
    occurrences, problems = scan_paths([tree])
    assert [(os.path.relpath(o.file, tree), o.image, o.line) for o in occurrences] == [
        (".dotfile.yaml", "hidden:1", 5),
        (os.path.join(".hidden", "x.yaml"), "hidden:1", 5),
        (os.path.join("a", "deploy.yml"), "a:1", 5),
        (os.path.join("a", "sub", "Dockerfile"), "sub:1", 1),
        (os.path.join("a", "z-compose.YAML"), "c:1", 3),
        ("b.yaml", "b:1", 5),
        ("e.yaml", "e:1", 3),
    ]  # not node_modules/ or notes.txt
    assert problems == []


def test_directory_paths_start_with_the_path_as_given() -> None:
    occurrences, _ = scan_paths([fixture("tree") + os.sep])
    assert occurrences[0].file == os.path.join(fixture("tree"), ".dotfile.yaml")


def test_hidden_directory_given_explicitly_is_scanned() -> None:
    occurrences, _ = scan_paths([fixture("tree/.hidden")])
    assert lines_and_images(occurrences) == [(5, "hidden:1")]


def test_files_in_the_order_given_each_once() -> None:
    compose, cron = fixture("compose/docker-compose.yml"), fixture("k8s/cronjob.yaml")
    occurrences, _ = scan_paths([cron, compose, cron, fixture("compose")])
    files = [o.file for o in occurrences]
    assert files == [cron] * 2 + [compose] * 6


def test_explicit_file_is_scanned_whatever_its_name() -> None:
    occurrences, _ = scan_paths([fixture("tree/notes.txt")])
    assert occurrences == []  # read as YAML: a mapping without kind or services


def test_missing_path_is_a_problem_and_the_rest_is_scanned() -> None:
    missing = fixture("no/such/file.yaml")
    occurrences, problems = scan_paths([missing, fixture("docker/app.Dockerfile")])
    assert problems == [FileProblem(missing, None, "no such file or directory")]
    assert lines_and_images(occurrences) == [(1, "node:22-alpine")]


def test_stdin_is_yaml_named_stdin() -> None:
    stdin = io.StringIO("services:\n  web:\n    image: nginx:1.27\n")
    occurrences, problems = scan_paths(["-", "-"], stdin=stdin)
    assert occurrences == [Occurrence("nginx:1.27", "<stdin>", 3, "compose", "web", "web")]
    assert problems == []


def test_file_that_is_not_utf8_is_a_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"kind: Pod\nmetadata:\n  name: caf\xe9\n")
    good = tmp_path / "good.yaml"
    shutil.copy(fixture("k8s/cronjob.yaml"), good)
    occurrences, problems = scan_paths([str(tmp_path)])
    assert problems == [FileProblem(str(bad), 3, "not UTF-8 text: byte 0xe9")]
    assert len(occurrences) == 2


def test_symlinked_directory_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    shutil.copy(fixture("k8s/cronjob.yaml"), tmp_path / "real" / "cron.yaml")
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    occurrences, _ = scan_paths([str(tmp_path)])
    assert {o.file for o in occurrences} == {str(tmp_path / "real" / "cron.yaml")}


def hostile_tree(tmp_path: Path) -> Path:
    """A repository with one good manifest and every special file a pull request can hold."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.yaml").write_text(POD + "leak:SECRET\n")
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "sub" / "good.yaml").write_text(POD + "good:1\n")
    (repo / "inside.yaml").symlink_to("sub/good.yaml")
    (repo / "zero.yaml").symlink_to("/dev/zero")
    (repo / "shadow.yaml").symlink_to("/etc/shadow")
    (repo / "environ.yaml").symlink_to("/proc/self/environ")
    (repo / "secret.yaml").symlink_to("../outside/secret.yaml")
    (repo / "sub" / "up").symlink_to("..", target_is_directory=True)  # a cycle, never entered
    os.mkfifo(repo / "fifo.yaml")
    return repo


def test_a_tree_is_read_only_through_its_own_regular_files(tmp_path: Path) -> None:
    repo = hostile_tree(tmp_path)
    occurrences, problems = scan_paths([str(repo)])
    outside = f"not scanned: a symbolic link to outside {repo}"
    assert [(p.file, p.line, p.message) for p in problems] == [
        (str(repo / "environ.yaml"), None, outside),
        (
            str(repo / "fifo.yaml"),
            None,
            f"cannot use file {repo}/fifo.yaml: a FIFO, not a regular file",
        ),
        (str(repo / "secret.yaml"), None, outside),
        (str(repo / "shadow.yaml"), None, outside),
        (str(repo / "zero.yaml"), None, outside),
    ]
    # The link inside the tree is read (once: its target is the same file).
    assert [(o.file, o.image) for o in occurrences] == [(str(repo / "inside.yaml"), "good:1")]


def test_special_files_named_explicitly_are_not_read(tmp_path: Path) -> None:
    repo = hostile_tree(tmp_path)
    occurrences, problems = scan_paths([str(repo / "zero.yaml"), str(repo / "fifo.yaml")])
    assert occurrences == []
    assert [p.message for p in problems] == [
        f"cannot use file {repo}/zero.yaml: a device, not a regular file",
        f"cannot use file {repo}/fifo.yaml: a FIFO, not a regular file",
    ]


def test_a_relative_path_stays_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`imagecheck scan $(git diff --name-only)`: the pull request chose those names."""
    repo = hostile_tree(tmp_path)
    (tmp_path / "outside" / "dir").mkdir()
    (repo / "deploy").symlink_to("../outside/dir", target_is_directory=True)
    monkeypatch.chdir(repo)
    occurrences, problems = scan_paths(["secret.yaml", "deploy", "sub/good.yaml"])
    assert [(p.file, p.message) for p in problems] == [
        ("secret.yaml", f"not scanned: a symbolic link to outside {repo}"),
        ("deploy", f"not scanned: a symbolic link to outside {repo}"),
    ]
    assert [o.image for o in occurrences] == ["good:1"]


def test_a_path_written_out_of_the_working_directory_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = hostile_tree(tmp_path)
    monkeypatch.chdir(repo)
    for path in ("../outside/secret.yaml", str(tmp_path / "outside" / "secret.yaml")):
        occurrences, problems = scan_paths([path])
        assert problems == []
        assert [o.image for o in occurrences] == ["leak:SECRET"]


def test_a_file_over_4_mib_is_a_problem(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (4 * 1024 * 1024) + b"\n")
    assert scan_paths([str(big)]) == (
        [],
        [FileProblem(str(big), None, f"cannot use file {big}: larger than 4 MiB")],
    )


def test_stdin_is_read_up_to_32_mib() -> None:
    with open("/dev/zero", encoding="utf-8") as endless:
        assert scan_paths(["-"], stdin=endless) == (
            [],
            [FileProblem("<stdin>", None, "not scanned: larger than 32 MiB")],
        )


# --- formats --------------------------------------------------------------------------------

FROM_OR_YAML = "FROM alpine:3.20\n"


@pytest.mark.parametrize(
    ("file", "is_dockerfile"),
    [
        ("Dockerfile", True),
        ("dockerfile", True),
        ("build/Dockerfile.prod", True),
        ("api.Dockerfile", True),
        ("Containerfile", True),
        ("Containerfile.arm64", True),
        ("Dockerfile-dev", True),
        ("Dockerfile_arm64", True),
        ("Containerfile-ubi9", True),
        ("dev.containerfile", True),
        ("Dockerfile.j2", True),
        ("Dockerfile.md", False),
        ("Dockerfile.dockerignore", False),
        ("api.Dockerfile.dockerignore", False),
        ("dockerfile_test.go", False),
        ("dockerfile-lint.yml", False),
        ("mydockerfile", False),
        ("deploy.yaml", False),
        ("Dockerfiles.yaml", False),
        ("<stdin>", False),
    ],
)
def test_format_guessed_from_file_name(file: str, is_dockerfile: bool) -> None:
    occurrences, _ = scan_text(FROM_OR_YAML, file)
    assert lines_and_images(occurrences) == ([(1, "alpine:3.20")] if is_dockerfile else [])


def test_format_given_wins_over_the_name() -> None:
    assert lines_and_images(scan_text(FROM_OR_YAML, "<stdin>", fmt="dockerfile")[0]) == [
        (1, "alpine:3.20")
    ]
    assert scan_text(FROM_OR_YAML, "Dockerfile", fmt="yaml") == ([], [])


def test_unknown_format_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown format 'toml'"):
        scan_text("{}", "x.toml", fmt="toml")


def test_results_are_immutable() -> None:
    occurrence = Occurrence("a", "f", 1, "Pod", None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        occurrence.image = "b"  # type: ignore[misc]


YAML_FIXTURES = sorted(
    str(path.relative_to(FIXTURES))
    for path in FIXTURES.rglob("*")
    if path.suffix in (".yaml", ".yml") and ".hidden" not in path.parts
)


@pytest.mark.parametrize("path", YAML_FIXTURES)
def test_pure_python_parser_finds_the_same(path: str) -> None:
    """Without libyaml, PyYAML's own parser sends the same events: same results."""
    text = Path(fixture(path)).read_text(encoding="utf-8")

    def results(loader: type[yaml.SafeLoader] | type[yaml.CSafeLoader]) -> list[object]:
        found: list[object] = []
        for document in documents(text, loader=loader):
            if isinstance(document, SyntaxProblem):
                found.append(document.line)  # the messages differ in wording
            else:
                found.extend(images_in_document(document, path))
        return found

    assert results(yaml.SafeLoader) == results(yaml.CSafeLoader)
