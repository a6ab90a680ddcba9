"""``imagecheck.kube._workload_json``: the webhook's walk of parsed JSON finds exactly the slots the
generic walk (``workload.containers(JSON, ...)``, the one ``scan`` shares) finds, in the same
order, naming the same image values: over every manifest the tests and examples hold, the
webhook review tests' workloads, one object per operator table entry, the shapes at the edge
of each rule, and random trees of the keys the rules read (issue #14)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from imagecheck.kube import JSON
from imagecheck.kube import _workload_json as workload_json
from imagecheck.kube._workload import OPERATOR_FIELDS, containers
from tests.support.workloads import ARGO_WORKFLOW, TEKTON_TASK, WORKLOADS

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = sorted(
    path
    for folder in (REPO / "tests" / "fixtures", REPO / "examples")
    for suffix in ("*.yaml", "*.yml", "*.json")
    for path in folder.rglob(suffix)
)


def as_json(document: Any) -> Any:
    """What the API server would send: YAML's dates, numbers as keys... as JSON has them."""
    return json.loads(json.dumps(document, default=str))


def manifest_documents() -> list[Any]:
    found = []
    for path in MANIFESTS:
        try:
            documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue  # the fixtures of bad input
        found += [as_json(d) for d in documents if isinstance(d, (dict, list))]
    return found


def operator_documents() -> list[Any]:
    documents = []
    for (group, kind), paths in sorted(OPERATOR_FIELDS.items()):
        document: dict[str, Any] = {"apiVersion": f"{group}/v1", "kind": kind.strip("*") or "X"}
        for number, path in enumerate(paths):
            holder = document
            for key in path[:-1]:
                holder = holder.setdefault(key, {})
            # An operator's image field that also has a container's shape: named by the table.
            holder[path[-1]] = f"registry.example/i{number}:1"
            holder.setdefault("resources", {})
        documents.append(document)
    return documents


EDGES: list[Any] = [
    None,
    "image",
    [],
    {},
    {"image": None, "command": ["x"]},
    {"image": "", "command": ["x"]},
    {"image": ["not", "text"], "env": []},
    {"image": "a", "name": ""},
    {"spec": {"name": "", "containers": [{"image": "a", "name": 3}, {"image": 4}, "x", None]}},
    {"containers": [[{"image": "nested-list"}], {"name": "n"}]},
    {
        "name": "g",
        "spec": {
            "name": "",
            "container": {"image": "a"},
            "volumes": [{"image": {"reference": "b"}}],
        },
    },
    {"name": "g", "spec": {"name": 7, "script": {"image": "a"}}},
    {"template": {"name": "tpl", "container": {"image": "b"}, "script": {"image": {}}}},
    {"stepTemplate": {"image": "c", "name": ""}},
    {"volumes": [{"name": "v", "image": {"reference": "d", "pullPolicy": "Always"}}]},
    {"name": "o", "image": {"reference": 5, "image": "e", "args": []}},
    {"image": {"reference": "f"}},
    {"steps": [[{"name": "s", "template": "t"}]], "sidecars": [{"image": "g"}]},
    {"metadata": {"managedFields": [{"fieldsV1": {"f:spec": {"f:containers": {}}}}]}},
]

_KEYS = [
    "image", "name", "containers", "initContainers", "steps", "sidecars", "container",
    "script", "stepTemplate", "command", "env", "reference", "spec", "template", "volumes",
    "metadata", "apiVersion", "kind", "items",
]  # fmt: skip
_SCALARS = ["x:1", "", None, 0, True, "monitoring.coreos.com/v1", "Prometheus"]


def random_tree(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 5 or roll < 0.3:
        return rng.choice(_SCALARS)
    if roll < 0.45:
        return [random_tree(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = rng.sample(_KEYS, rng.randrange(6))
    return {key: random_tree(rng, depth + 1) for key in keys}


def random_trees() -> list[Any]:
    rng = random.Random(14)
    return [random_tree(rng) for _ in range(3000)]


def assert_same_slots(document: Any) -> None:
    generic = list(containers(JSON, document))
    fast = workload_json.containers(document)
    assert [(s.image, s.container, s.field) for s in fast] == [
        (s.image, s.container, s.field) for s in generic
    ]
    assert all(a.image is b.image for a, b in zip(fast, generic, strict=True))


def test_the_corpora_are_read() -> None:
    documents = manifest_documents()
    assert len(documents) > 100
    assert sum(1 for d in documents for _ in containers(JSON, d)) > 100


@pytest.mark.parametrize(
    "documents",
    [
        pytest.param(manifest_documents, id="tests-fixtures-and-examples"),
        pytest.param(lambda: [p.values[0] for p in WORKLOADS], id="webhook-review-workloads"),
        pytest.param(lambda: [TEKTON_TASK, ARGO_WORKFLOW], id="webhook-review-shapes"),
        pytest.param(operator_documents, id="operator-fields"),
        pytest.param(lambda: EDGES, id="edges"),
        pytest.param(random_trees, id="random-trees"),
    ],
)
def test_the_json_walk_finds_what_the_generic_walk_finds(documents: Any) -> None:
    for document in documents():
        assert_same_slots(document)
