"""Where workloads keep their containers (issue #13): one model for scan, the webhook and
``--from-pod``, shown on the shapes of Tekton, Argo Workflows, Ray, JobSet, LeaderWorkerSet,
Kubeflow, ECK, Knative, Argo Rollouts, prometheus-operator and image volumes.

The fixtures under ``tests/fixtures/scan/shapes/`` mark each line that holds an image with
``# expect CONTAINER`` (``None`` for a container without a name) or ``# expect-skip
CONTAINER PLACEHOLDER``; every other line must give nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from imagecheck.kube import JSON, pull_secrets
from imagecheck.kube._incluster import images_of
from imagecheck.kube._workload import OPERATOR_FIELDS, containers
from imagecheck.scanning import scan_text
from imagecheck.webhook._review import ContainerImage, parse_review

SHAPES = Path(__file__).parent.parent / "fixtures" / "scan" / "shapes"
FILES = sorted(SHAPES.glob("*.yaml"))
_MARK = re.compile(r"#\s*expect(-skip)?\s+(\S+)(?:\s+(\S+))?\s*$")
_IMAGE = re.compile(r"(?:image|reference):\s*(?:\"([^\"]+)\"|([^\s,}#]+))")

Row = tuple[int, str, str | None, str | None]  # line, image, container, placeholder


def marked(text: str) -> list[Row]:
    rows: list[Row] = []
    for number, line in enumerate(text.splitlines(), start=1):
        mark = _MARK.search(line)
        if mark is None:
            continue
        image = _IMAGE.search(line)
        assert image is not None, f"line {number} is marked but names no image"
        container = None if mark.group(2) == "None" else mark.group(2)
        rows.append((number, image.group(1) or image.group(2), container, mark.group(3)))
    return rows


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_scan_finds_exactly_the_marked_images(path: Path) -> None:
    text = path.read_text()
    occurrences, problems = scan_text(text, path.name)
    assert problems == []
    found: list[Row] = []
    for o in occurrences:
        placeholder = None
        if o.skipped is not None:
            placeholder = o.skipped.removeprefix("template placeholder ")
        found.append((o.line, o.image, o.container, placeholder))
    assert found == marked(text)


def test_the_fixtures_cover_every_container_shape() -> None:
    """Every rule of the model is exercised, so that a rule that stops working fails here."""
    fields = set()
    for path in FILES:
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and "kind" in document:
                fields |= {slot.field for slot in containers(JSON, document)}
    expected = {"containers", "initContainers", "steps", "sidecars", "stepTemplate"}
    expected |= {"container", "script", "spec", "spec.image", "spec.thanos.image"}
    expected |= {"volumes.image"}
    assert expected <= fields


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in FILES:
        for index, document in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(document, dict) and "kind" in document:
                found.append((f"{path.stem}-{index}-{document['kind']}", document))
    return found


@pytest.mark.parametrize(("name", "document"), documents(), ids=[n for n, _ in documents()])
def test_the_webhook_sees_what_scan_sees(name: str, document: dict[str, Any]) -> None:
    """One model: the images of an AdmissionReview's object are scan's for the same text,
    in the same order, with the same container names."""
    text = yaml.safe_dump(document, sort_keys=False)
    occurrences, _ = scan_text(text, "doc.yaml")
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "object": document},
    }
    review = parse_review(body)
    from_scan = [ContainerImage(o.container or "", o.image) for o in occurrences]
    from_webhook = sorted([*review.images, *review.templated], key=from_scan.index)
    assert from_webhook == from_scan


def test_from_pod_reads_a_pod_as_scan_does() -> None:
    pod = {
        "kind": "Pod",
        "spec": {
            "initContainers": [{"name": "imagecheck", "image": "ghcr.io/acme/imagecheck:1"}],
            "containers": [{"name": "app", "image": "debian:12"}],
            "volumes": [{"name": "m", "image": {"reference": "quay.io/acme/models:v1"}}],
            "imagePullSecrets": [{"name": "pull"}],
        },
    }
    found = images_of(pod, skip_container="imagecheck")
    assert (found.images, found.pull_secret_names) == (
        ["debian:12", "quay.io/acme/models:v1"],
        ["pull"],
    )


def test_pull_secrets_anywhere_in_the_object() -> None:
    """Tekton's podTemplate, Argo's spec, an operator's spec: the pods they make get them."""
    documents_ = dict(documents())
    assert pull_secrets(JSON, documents_["tekton-4-PipelineRun"]) == ["tekton-pull"]
    pod = {"spec": {"imagePullSecrets": [{"name": "a"}, {"name": "a"}, {"x": 1}, "b"]}}
    assert pull_secrets(JSON, pod) == ["a"]


def test_a_recursive_structure_is_walked_once() -> None:
    text = "kind: Job\nspec: &s {template: {spec: *s}, containers: [{image: y}]}\n"
    occurrences, problems = scan_text(text, "r.yaml")
    assert [(o.line, o.image) for o in occurrences] == [(2, "y")]
    assert problems == []


@pytest.mark.parametrize(("group", "kind"), sorted(OPERATOR_FIELDS))
def test_every_operator_field_is_read(group: str, kind: str) -> None:
    """Each table entry reads an image at each of its paths (a list on the way crossed)."""
    document: dict[str, Any] = {"apiVersion": f"{group}/v1", "kind": "X" if kind == "*" else kind}
    expected = []
    for number, path in enumerate(OPERATOR_FIELDS[(group, kind)]):
        holder = document
        for key in path[:-1]:
            holder = holder.setdefault(key, {})
        holder[path[-1]] = f"registry.example/i{number}:1"
        expected.append(f"registry.example/i{number}:1")
    assert [slot.image for slot in containers(JSON, document)] == expected
