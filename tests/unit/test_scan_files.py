"""Tests for which files a scan reads and which it skips with a note (issue #13): ``.json``
manifests, Helm charts' raw templates, and scan_files' progress."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from imagecheck.scanning import FileNote, FileProblem, ScanReport, scan_files, scan_paths, scan_text

POD_JSON = """\
{
\t"apiVersion": "v1",
\t"kind": "Pod",
\t"metadata": {"name": "web"},
\t"spec": {
\t\t"containers": [
\t\t\t{"name": "app", "image": "nginx:1.27"},
\t\t\t{"name": "side",
\t\t\t "image": "busybox:1.36"}
\t\t]
\t}
}
"""
NOT_JSON = "not scanned: not valid JSON ({}), nor a Kubernetes manifest or Compose file"
CHART = (
    "Helm chart templates not scanned ({}): scan the rendered chart instead "
    "(helm template CHART | imagecheck scan -)"
)


def found(report: ScanReport, root: Path) -> list[tuple[str, int, str]]:
    return [(os.path.relpath(o.file, root), o.line, o.image) for o in report.occurrences]


# --- .json ----------------------------------------------------------------------------------


def test_a_json_manifest_indented_with_tabs_has_exact_lines() -> None:
    occurrences, problems = scan_text(POD_JSON, "pod.json")
    assert [(o.line, o.kind, o.name, o.container, o.image) for o in occurrences] == [
        (7, "Pod", "web", "app", "nginx:1.27"),
        (9, "Pod", "web", "side", "busybox:1.36"),
    ]
    assert problems == []


def test_a_tab_before_the_top_level_object_is_whitespace() -> None:
    text = '\t{"kind": "Pod", "spec": {"containers": [{"image": "a:1"}]}}\n\t\n'
    assert [(o.line, o.image) for o in scan_text(text, "x.json")[0]] == [(1, "a:1")]
    # The same text read as YAML is an error: the tab is why JSON is read on its own.
    assert scan_text(text, "x.yaml")[1] != []


def test_compose_in_json_and_a_list_of_manifests() -> None:
    compose = '{"services": {"api": {"image": "api:2"}, "db": {"build": ".", "image": "db"}}}'
    assert [(o.image, o.skipped) for o in scan_text(compose, "compose.json")[0]] == [
        ("api:2", None),
        ("db", "built by compose (service db has build:)"),
    ]
    items = '{"kind": "List", "items": [\n' + POD_JSON + "]}"
    assert [o.line for o in scan_text(items, "list.json")[0]] == [8, 10]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"name": "app", "dependencies": {"image": "x"}}', id="package.json"),
        pytest.param('[{"kind": "Pod", "spec": {"containers": [{"image": "a"}]}}]', id="array"),
        pytest.param('"kind"', id="string"),
        pytest.param('{"image": "nginx"}', id="image-without-kind"),
    ],
)
def test_valid_json_that_is_not_a_manifest_holds_no_images(text: str, tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text(text)
    assert scan_files([str(tmp_path)]) == ScanReport([], [], [])


def test_invalid_json_is_a_note_unless_it_looks_like_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "tsconfig.json").write_text('{\n  // comments\n  "compilerOptions": {}\n}\n')
    (tmp_path / "tasks.json").write_text('{"kind": "build",}')  # kind alone: not a manifest
    (tmp_path / "pod.json").write_text('{\n"apiVersion": "v1",\n"kind": "Pod",,\n}')
    (tmp_path / "compose.json").write_text('{"services": {"a": {"image": "a:1"}}')
    (tmp_path / "deep.json").write_text("[" * 100_000)
    report = scan_files([str(tmp_path)])
    assert report.occurrences == []
    assert report.problems == [
        FileProblem(str(tmp_path / "compose.json"), 1, "invalid JSON: Expecting ',' delimiter"),
        FileProblem(
            str(tmp_path / "pod.json"),
            3,
            "invalid JSON: Expecting property name enclosed in double quotes",
        ),
    ]
    quotes = "Expecting property name enclosed in double quotes"
    assert report.notes == [
        FileNote(str(tmp_path / "deep.json"), NOT_JSON.format("nested too deeply")),
        FileNote(str(tmp_path / "tasks.json"), NOT_JSON.format(f"{quotes} at line 1 column 18")),
        FileNote(str(tmp_path / "tsconfig.json"), NOT_JSON.format(f"{quotes} at line 2 column 3")),
    ]


def test_json_named_on_the_command_line_is_read(tmp_path: Path) -> None:
    (tmp_path / "pod.json").write_text(POD_JSON)
    occurrences, problems = scan_paths([str(tmp_path / "pod.json")])
    assert [o.image for o in occurrences] == ["nginx:1.27", "busybox:1.36"]
    assert problems == []


# --- Helm charts ----------------------------------------------------------------------------


def chart(root: Path) -> Path:
    """A chart in a repository, with a subchart; raw templates are not YAML."""
    top = root / "deploy" / "chart"
    for directory in ("templates/sub", "charts/db/templates", "crds"):
        (top / directory).mkdir(parents=True)
    (top / "Chart.yaml").write_text("apiVersion: v2\nname: app\nversion: 1.0.0\n")
    (top / "charts" / "db" / "Chart.yaml").write_text("apiVersion: v2\nname: db\n")
    (top / "values.yaml").write_text("image:\n  repository: app\n  tag: '1'\n")
    template = "{{- if .Values.x }}\nkind: Pod\nspec:\n  containers: [{image: {{ .Values.i }}}]\n"
    (top / "templates" / "deploy.yaml").write_text(template)
    (top / "templates" / "sub" / "job.yaml").write_text(template)
    (top / "templates" / "NOTES.txt").write_text("{{ .Release.Name }}")
    (top / "charts" / "db" / "templates" / "sts.yaml").write_text(template)
    (top / "crds" / "crd.yaml").write_text("kind: Pod\nspec:\n  containers: [{image: crd:1}]\n")
    # Not a chart: a directory named templates without a Chart.yaml beside it.
    (root / "templates").mkdir()
    (root / "templates" / "pod.yaml").write_text("kind: Pod\nspec:\n  containers: [{image: t:1}]\n")
    return top


def test_chart_templates_are_skipped_with_one_note_per_chart(tmp_path: Path) -> None:
    top = chart(tmp_path)
    report = scan_files([str(tmp_path)])
    assert found(report, tmp_path) == [
        (os.path.join("deploy", "chart", "crds", "crd.yaml"), 3, "crd:1"),
        (os.path.join("templates", "pod.yaml"), 3, "t:1"),
    ]
    assert report.problems == []
    assert report.notes == [
        FileNote(str(top / "charts" / "db" / "templates"), CHART.format("1 file")),
        FileNote(str(top / "templates"), CHART.format("2 files")),
    ]


def test_a_named_template_is_skipped_however_it_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = chart(tmp_path)
    monkeypatch.chdir(top / "templates")
    report = scan_files(["deploy.yaml", "../templates/sub/job.yaml", "../values.yaml"])
    assert report == ScanReport([], [], [FileNote(str(top / "templates"), CHART.format("2 files"))])
    monkeypatch.chdir(tmp_path)
    report = scan_files([os.path.join("deploy", "chart", "templates", "deploy.yaml")])
    assert report.notes == [
        FileNote(os.path.join("deploy", "chart", "templates"), CHART.format("1 file"))
    ]


def test_notes_keep_file_order_with_problems_and_stdin(tmp_path: Path) -> None:
    top = chart(tmp_path)
    (tmp_path / "bad.json").write_text("{")
    stdin = io.StringIO("kind: Pod\nspec:\n  containers: [{image: s:1}]\n")
    report = scan_files(
        [str(tmp_path / "bad.json"), str(top / "templates"), "-", "missing"], stdin=stdin
    )
    assert [o.image for o in report.occurrences] == ["s:1"]
    assert report.problems == [FileProblem("missing", None, "no such file or directory")]
    assert [n.file for n in report.notes] == [str(tmp_path / "bad.json"), str(top / "templates")]


# --- progress -------------------------------------------------------------------------------


def test_progress_counts_every_file_once(tmp_path: Path) -> None:
    chart(tmp_path)
    calls: list[tuple[int, int]] = []
    scan_files(
        [str(tmp_path), str(tmp_path / "templates"), "nowhere"], progress=lambda *a: calls.append(a)
    )
    # values, Chart.yaml x2, 3 templates, crd, templates/pod.yaml: 8 files, each once
    assert calls == [(done, 8) for done in range(1, 9)]


def test_a_deleted_working_directory_is_a_problem_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    report = scan_files(["templates/x.yaml"])
    assert report == ScanReport(
        [], [FileProblem("templates/x.yaml", None, "no such file or directory")], []
    )
