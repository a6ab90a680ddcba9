"""``imagecheck scan`` against the real registry: a mixed tree where exactly the missing images
fail, each with its file and line; stdin; invalid files; GitHub annotations."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

from tests.support.clirun import run_cli
from tests.support.endpoint import RegistryEndpoint


def write_tree(root: Path, reg: RegistryEndpoint) -> dict[str, list[tuple[str, int]]]:
    """A small repository of manifests; returns image -> [(file, line)] as written."""
    (root / "k8s").mkdir(parents=True)
    (root / "k8s" / "app.yaml").write_text(
        f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      initContainers:
        - name: migrate
          image: {reg.ref("public/tool:2.1")}
      containers:
        - name: web
          image: {reg.ref("sample/app:1.0.0")}
        - name: typo
          image: "{reg.ref("sample/app:1.0.O")}"
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: job
              image: {reg.ref("sample/app:1.0.0")}
            - name: helm
              image: "{{{{ .Values.image }}}}"
"""
    )
    (root / "compose.yaml").write_text(
        f"""\
services:
  api:
    image: {reg.ref("sample/app:docker")}
  gone:
    image: {reg.ref("sample/nothing:1")}
"""
    )
    (root / "Dockerfile").write_text(
        f"""\
ARG BASE={reg.ref("sample/app:multi")}
FROM $BASE AS build
FROM build
"""
    )
    return {
        reg.ref("public/tool:2.1"): [("k8s/app.yaml", 10)],
        reg.ref("sample/app:1.0.0"): [("k8s/app.yaml", 13), ("k8s/app.yaml", 30)],
        reg.ref("sample/app:1.0.O"): [("k8s/app.yaml", 15)],
        reg.ref("sample/app:docker"): [("compose.yaml", 3)],
        reg.ref("sample/nothing:1"): [("compose.yaml", 5)],
        reg.ref("sample/app:multi"): [("Dockerfile", 2)],
    }


def test_scan_finds_exactly_the_missing_images_with_their_lines(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    expected = write_tree(tmp_path / "repo", registry_plain)
    before = registry_plain.registry.request_count()
    run = run_cli(["scan", "-o", "json", str(tmp_path / "repo")], tmp_path)
    assert run.code == 1, run.stdout + run.stderr
    data = json.loads(run.stdout)
    assert data["problems"] == []
    seen: dict[str, list[tuple[str, int]]] = {}
    status: dict[str, str] = {}
    for o in data["occurrences"]:
        if o["skipped"]:
            assert o["image"] == "{{ .Values.image }}"
            continue
        relative = str(Path(o["file"]).relative_to(tmp_path / "repo"))
        seen.setdefault(o["image"], []).append((relative, o["line"]))
        status[o["image"]] = o["result"]["status"]
    assert seen == expected
    missing = {registry_plain.ref("sample/app:1.0.O"), registry_plain.ref("sample/nothing:1")}
    assert {i for i, s in status.items() if s == "missing"} == missing
    assert {i for i, s in status.items() if s == "found"} == set(expected) - missing
    # Each distinct image once: one ping, one HEAD per distinct image.
    assert registry_plain.registry.request_count() - before == 1 + len(expected)


def test_scan_text_groups_by_status(registry_plain: RegistryEndpoint, tmp_path: Path) -> None:
    write_tree(tmp_path / "repo", registry_plain)
    run = run_cli(["scan", str(tmp_path / "repo")], tmp_path)
    assert run.code == 1
    lines = run.stdout.splitlines()
    assert lines[0] == "missing (2)"
    typo = lines.index(f"  {registry_plain.ref('sample/app:1.0.O')}  tag '1.0.O' not found in "
                       f"{registry_plain.host}/sample/app (manifest unknown)")  # fmt: skip
    assert (
        lines[typo + 1]
        == f"    {tmp_path / 'repo' / 'k8s' / 'app.yaml'}:15 (Deployment/web, container typo)"
    )
    assert "found (4)" in lines
    assert "skipped (1)" in lines


def test_scan_github_annotations(registry_plain: RegistryEndpoint, tmp_path: Path) -> None:
    write_tree(tmp_path / "repo", registry_plain)
    run = run_cli(["scan", "-o", "github", str(tmp_path / "repo")], tmp_path)
    assert run.code == 1
    errors = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    compose = str(tmp_path / "repo" / "compose.yaml")
    assert len(errors) == 2
    assert any(
        e.startswith(f"::error file={compose},line=5,title=image missing::missing: ")
        for e in errors
    )
    assert any(line.startswith("::notice ") for line in run.stdout.splitlines())


def test_scan_stdin(registry_plain: RegistryEndpoint, tmp_path: Path) -> None:
    manifest = f"""\
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  containers: [{{name: a, image: "{registry_plain.ref("sample/app:1.0.0")}"}}]
"""
    run = run_cli(["scan", "-o", "json", "-"], tmp_path, stdin=manifest)
    assert run.code == 0, run.stdout + run.stderr
    [o] = json.loads(run.stdout)["occurrences"]
    assert (o["file"], o["line"], o["kind"], o["container"]) == ("<stdin>", 5, "Pod", "a")


def test_invalid_yaml_is_exit_2_and_the_rest_is_still_checked(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    write_tree(tmp_path / "repo", registry_plain)
    (tmp_path / "repo" / "k8s" / "broken.yaml").write_text("kind: Pod\nspec: [unclosed\n")
    run = run_cli(["scan", "-o", "json", str(tmp_path / "repo")], tmp_path)
    assert run.code == 2
    data = json.loads(run.stdout)
    [problem] = data["problems"]
    assert problem["file"].endswith("broken.yaml")
    assert problem["line"] == 3
    assert len([o for o in data["occurrences"] if o["result"]]) == 7
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("imagecheck: error: ") and "broken.yaml:3: invalid YAML" in line


def test_strict_makes_placeholders_invalid(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    write_tree(tmp_path / "repo", registry_plain)
    (tmp_path / "repo" / "compose.yaml").unlink()
    relaxed = run_cli(["scan", str(tmp_path / "repo")], tmp_path)
    strict = run_cli(["scan", "--strict", str(tmp_path / "repo")], tmp_path)
    assert relaxed.code == 1  # the typo
    assert strict.code == 2
    assert "invalid (1)" in strict.stdout


class _Recorder(BaseHTTPRequestHandler):
    """A registry that challenges for Basic and records what it was sent."""

    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        self._challenge()

    def do_HEAD(self) -> None:
        self._challenge()

    def _challenge(self) -> None:
        type(self).seen.append(self.headers.get("Authorization"))
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="elsewhere"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_scan_offers_flag_credentials_only_to_the_named_registry(
    registry_basic: RegistryEndpoint, tmp_path: Path
) -> None:
    """A pull request can name any registry: --username credentials go to --credentials-for."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    elsewhere = f"127.0.0.1:{server.server_address[1]}"
    try:
        manifest = tmp_path / "pod.yaml"
        manifest.write_text(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            f"    - {{name: a, image: {registry_basic.ref('private/secret:1.0')}}}\n"
            f"    - {{name: b, image: {elsewhere}/steal/creds:1}}\n"
        )
        assert registry_basic.username is not None
        assert registry_basic.password is not None
        base = ["scan", "--ca-file", str(registry_basic.ca_file), "--insecure-registry", elsewhere]
        base += ["--username", registry_basic.username, "--password-stdin"]
        refused = run_cli([*base, str(manifest)], tmp_path, stdin=registry_basic.password + "\n")
        assert refused.code == 2
        assert "needs --credentials-for HOST" in refused.stderr
        run = run_cli(
            [*base, "--credentials-for", registry_basic.host, str(manifest)],
            tmp_path,
            stdin=registry_basic.password + "\n",
        )
        assert run.code == 3, run.stdout + run.stderr  # elsewhere denies; ours is found
        assert "found (1)" in run.stdout
        assert _Recorder.seen
        assert all(auth is None for auth in _Recorder.seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_scan_ignores_named_files_it_cannot_read_images_from(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    write_tree(tmp_path / "repo", registry_plain)
    (tmp_path / "README.md").write_text("# not: [yaml\n")
    files = [str(tmp_path / "README.md"), str(tmp_path / "repo" / "compose.yaml")]
    run = run_cli(["scan", *files], tmp_path)
    assert run.code == 1  # compose.yaml's missing image; README.md is not a problem
    assert "error " not in run.stdout
