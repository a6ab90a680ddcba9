"""``imagecheck scan`` on the command line (issue #13): ``--list`` (exact output, exit codes,
no network, no credentials), notes in every output, and the progress counter, which a real
pseudo-terminal must see and a pipe or CI must not."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import respx
from click.testing import CliRunner, Result

from imagecheck.cli import cli

DIGEST = "sha256:" + "ab" * 32
CHART_NOTE = (
    "Helm chart templates not scanned (1 file): scan the rendered chart instead "
    "(helm template CHART | imagecheck scan -)"
)
APP = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
        - name: app
          image: registry.test/app:1.0
        - name: tpl
          image: "{{ .Values.image }}"
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A manifest, a chart's template, a tsconfig.json with comments; the working directory."""
    root = tmp_path / "repo"
    (root / "chart" / "templates").mkdir(parents=True)
    (root / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: c\n")
    (root / "chart" / "templates" / "d.yaml").write_text("{{- if .Values.x }}\n")
    (root / "app.yaml").write_text(APP)
    (root / "tsconfig.json").write_text("{\n  // no comments in JSON\n}\n")
    monkeypatch.chdir(root)
    return root


def run(args: list[str], env: dict[str, str | None]) -> Result:
    return CliRunner().invoke(cli, args, env=env)


# --- --list ---------------------------------------------------------------------------------


def test_list_text_is_every_occurrence_then_the_notes(
    repo: Path, env: dict[str, str | None], network: respx.MockRouter
) -> None:
    result = run(["scan", "--list", "."], env)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "FILE:LINE      KIND/NAME       CONTAINER  IMAGE",
        "./app.yaml:10  Deployment/web  app        registry.test/app:1.0",
        "./app.yaml:12  Deployment/web  tpl        {{ .Values.image }}"
        "  (skipped: template placeholder {{ .Values.image }})",
        f"note     chart/templates  {CHART_NOTE}",
        "note     ./tsconfig.json  not scanned: not valid JSON (Expecting property name "
        "enclosed in double quotes at line 2 column 3), nor a Kubernetes manifest or "
        "Compose file",
    ]
    assert not network.calls


def test_list_json_shape_and_invalid_references_exit_2(
    repo: Path, env: dict[str, str | None], network: respx.MockRouter
) -> None:
    (repo / "bad.json").write_text('{"kind": "Pod", "spec": {"containers": [{"image": "A b"}]}}')
    result = run(["scan", "--list", "--output", "json", "bad.json", "app.yaml", "nowhere"], env)
    assert result.exit_code == 2
    place = {"kind": "Pod", "name": None, "container": None, "skipped": None, "origin": None}
    deployment = {"kind": "Deployment", "name": "web", "origin": None, "invalid": None}
    assert json.loads(result.stdout) == {
        "occurrences": [
            {"file": "bad.json", "line": 1, "image": "A b", **place,
             "invalid": "whitespace is not allowed (check for spaces or a newline pasted "
                        "with it)"},
            {"file": "app.yaml", "line": 10, "container": "app",
             "image": "registry.test/app:1.0", "skipped": None, **deployment},
            {"file": "app.yaml", "line": 12, "container": "tpl", "image": "{{ .Values.image }}",
             "skipped": "template placeholder {{ .Values.image }}", **deployment},
        ],
        "problems": [{"file": "nowhere", "line": None, "message": "no such file or directory"}],
        "notes": [],
    }  # fmt: skip
    assert result.stderr == "imagecheck: error: nowhere:0: no such file or directory\n"
    assert not network.calls


def test_list_strict_counts_placeholders_invalid(repo: Path, env: dict[str, str | None]) -> None:
    result = run(["scan", "--list", "--strict", "app.yaml"], env)
    assert result.exit_code == 2
    assert result.stdout.splitlines()[2] == (
        "app.yaml:12  Deployment/web  tpl        '{{ .Values.image }}'  (invalid: whitespace is "
        "not allowed (check for spaces or a newline pasted with it))"
    )


def test_list_needs_no_credentials_host_and_reads_no_password(
    repo: Path, env: dict[str, str | None]
) -> None:
    with_password = {**env, "IMAGECHECK_USERNAME": "me", "IMAGECHECK_PASSWORD": "secret"}
    assert run(["scan", "app.yaml"], with_password).exit_code == 2  # --credentials-for needed
    assert run(["scan", "--list", "app.yaml"], with_password).exit_code == 0
    assert run(["scan", "--list", "--password-stdin", "-u", "me", "app.yaml"], env).exit_code == 0


def test_list_has_no_github_output(repo: Path, env: dict[str, str | None]) -> None:
    result = run(["scan", "--list", "--output", "github", "app.yaml"], env)
    assert result.exit_code == 2
    assert "--list prints text or json, not github" in result.stderr


def scan_process(args: list[str]) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("IMAGECHECK_", "CI"))}
    return subprocess.run(
        [sys.executable, "-m", "imagecheck", "scan", *args],
        capture_output=True, text=True, env=environ, timeout=60, check=False,
    )  # fmt: skip


def test_list_opens_no_connection(tmp_path: Path) -> None:
    """A registry listening where the files point: --list never connects to it; the same scan
    without --list does (so this test can fail)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        host = f"127.0.0.1:{server.getsockname()[1]}"
        (tmp_path / "pod.yaml").write_text(
            f"kind: Pod\nspec:\n  containers: [{{image: {host}/app:1}}]\n"
        )
        listed = scan_process(["--list", "--insecure-registry", host, str(tmp_path)])
        assert listed.returncode == 0, listed.stderr
        assert f"{host}/app:1" in listed.stdout
        with pytest.raises(BlockingIOError):
            server.accept()
        checked = scan_process(
            ["--insecure-registry", host, "--retries", "0", "--timeout", "1", str(tmp_path)]
        )
        assert checked.returncode == 4
        server.accept()[0].close()  # it did connect


# --- notes in the checking outputs -------------------------------------------------------------


def test_scan_shows_notes_in_text_json_and_github(
    repo: Path, env: dict[str, str | None], network: respx.MockRouter
) -> None:
    network.get("https://registry.test/v2/").respond(200)
    network.head("https://registry.test/v2/app/manifests/1.0").respond(
        200, headers={"Docker-Content-Digest": DIGEST}
    )
    text = run(["scan", "app.yaml", "chart"], env)
    assert text.exit_code == 0, text.output
    assert text.stdout.splitlines() == [
        f"note     chart/templates  {CHART_NOTE}",
        "found (1)",
        f"  registry.test/app:1.0  {DIGEST}",
        "    app.yaml:10 (Deployment/web, container app)",
        "skipped (1)",
        "  {{ .Values.image }}  template placeholder {{ .Values.image }}",
        "    app.yaml:12 (Deployment/web, container tpl)",
    ]
    data = json.loads(run(["scan", "-o", "json", "app.yaml", "chart"], env).stdout)
    assert data["notes"] == [{"file": "chart/templates", "message": CHART_NOTE}]
    assert [o["origin"] for o in data["occurrences"]] == [None, None]
    github = run(["scan", "-o", "github", "chart"], env)
    assert github.stdout == ("::notice file=chart/templates,title=imagecheck::" + CHART_NOTE + "\n")
    assert github.exit_code == 0
