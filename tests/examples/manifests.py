"""Load the YAML under ``examples/`` and sort each document into what it is.

Every ``*.yaml`` file under ``examples/`` is one of:

* a **kustomization** (``kustomization.yaml``: a ``Kustomization`` or a ``Component``), which is
  not a Kubernetes API object;
* a **patch** named by a kustomization's ``patches``: a partial object, not valid on its own;
* a **base**: Kubernetes objects named by a kustomization's ``resources``, which the
  kustomization changes (here: adds the imagecheck initContainer);
* **standalone** Kubernetes objects, applied as they are (``kubectl apply -f``).

PyYAML is imported by name: it comes with kubernetes-validate, which may be absent locally
(the tests then skip), and it ships no type information (mypy sees ``Any``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")

Json = dict[str, Any]


def optional_module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


yaml = optional_module("yaml")


class Role(Enum):
    KUSTOMIZATION = "kustomization"
    PATCH = "patch"
    BASE = "base"
    STANDALONE = "standalone"


@dataclass(frozen=True)
class Document:
    """One YAML document of one file."""

    path: Path
    index: int
    body: Json
    role: Role

    @property
    def file(self) -> str:
        return str(self.path.relative_to(EXAMPLES))

    @property
    def label(self) -> str:
        """``job-from-pod.yaml#3 Job/train-from-pod``: the test id."""
        name = (self.body.get("metadata") or {}).get("name")
        kind = self.body.get("kind", "?")
        return f"{self.file}#{self.index} {kind}" + (f"/{name}" if name else "")


@dataclass
class YamlFile:
    path: Path
    documents: list[Any] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def file(self) -> str:
        return str(self.path.relative_to(EXAMPLES))


def yaml_files() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*") if p.suffix in (".yaml", ".yml") or is_kz(p))


def is_kz(path: Path) -> bool:
    return path.name in KUSTOMIZATION_NAMES


def load(path: Path) -> YamlFile:
    """Every non-empty document, and what is wrong with the file as YAML (parse errors,
    duplicate keys: PyYAML silently keeps the last of two equal keys, Kubernetes rejects them)."""
    assert yaml is not None
    loaded = YamlFile(path)
    text = path.read_text(encoding="utf-8")
    try:
        for node in yaml.compose_all(text, Loader=yaml.SafeLoader):
            loaded.problems.extend(_duplicate_keys(node))
        loaded.documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        loaded.problems.append(f"not valid YAML: {exc}")
    return loaded


def _duplicate_keys(node: Any) -> Iterator[str]:
    assert yaml is not None
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    yield f"line {key.start_mark.line + 1}: duplicate key {key.value!r}"
                seen.add(key.value)
            yield from _duplicate_keys(value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _duplicate_keys(item)


def kustomize_references(kustomizations: list[tuple[Path, Json]]) -> tuple[set[Path], set[Path]]:
    """The files named as ``resources`` (bases) and as ``patches[].path``, resolved."""
    resources: set[Path] = set()
    patches: set[Path] = set()
    for path, body in kustomizations:
        for entry in body.get("resources") or []:
            resources.add((path.parent / str(entry)).resolve())
        for patch in body.get("patches") or []:
            if isinstance(patch, dict) and "path" in patch:
                patches.add((path.parent / str(patch["path"])).resolve())
    return resources, patches


def collect() -> tuple[list[YamlFile], list[Document]]:
    """All files, and all their documents with their roles; empty without PyYAML."""
    if yaml is None:
        return [], []
    files = [load(p) for p in yaml_files()]
    kustomizations = [
        (f.path, d) for f in files if is_kz(f.path) for d in f.documents if isinstance(d, dict)
    ]
    resources, patches = kustomize_references(kustomizations)
    documents = []
    for f in files:
        role = _role(f.path, resources, patches)
        for index, body in enumerate(f.documents):
            if not isinstance(body, dict):
                f.problems.append(f"document {index} is not a mapping")
                continue
            documents.append(Document(f.path, index, body, role))
    return files, documents


def _role(path: Path, resources: set[Path], patches: set[Path]) -> Role:
    if is_kz(path):
        return Role.KUSTOMIZATION
    if path.resolve() in patches:
        return Role.PATCH
    if path.resolve() in resources:
        return Role.BASE
    return Role.STANDALONE


# --- Where the pods and Jobs are in an object -------------------------------------------------

_POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
}
_JOB_SPEC_PATHS = {"Job": ("spec",), "CronJob": ("spec", "jobTemplate", "spec")}


def _dig(body: Json, keys: tuple[str, ...]) -> Json | None:
    node: Any = body
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def pod_spec(body: Json) -> Json | None:
    """The pod template's spec of a workload (or the Pod's own); None for other kinds."""
    keys = _POD_SPEC_PATHS.get(str(body.get("kind")))
    return None if keys is None else _dig(body, keys)


def job_spec(body: Json) -> Json | None:
    """A Job's spec, or a CronJob's jobTemplate spec."""
    keys = _JOB_SPEC_PATHS.get(str(body.get("kind")))
    return None if keys is None else _dig(body, keys)


def containers(spec: Json) -> Iterator[tuple[str, Json]]:
    """``("initContainers", {...})``, then ``("containers", {...})``, in spec order."""
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind) or []:
            yield kind, container
