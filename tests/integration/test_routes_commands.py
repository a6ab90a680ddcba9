"""The node's registry configuration reaches every command with registry options, not only
``check``: ``scan`` (a pre-merge pipeline asking what the nodes would ask) and ``serve`` (read
once at start; a bad file stops it before it listens). A registries.conf that rewrites an
unresolvable name to the real registry proves the route was taken: without it, no host
answers at all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.admission import pod_spec, workload
from tests.support.clirun import run_cli
from tests.support.endpoint import RegistryEndpoint
from tests.support.pki import TLSMaterial
from tests.support.webhook import running

SOURCE = "registry.example.test"


@pytest.fixture
def conf(tmp_path: Path, registry_plain: RegistryEndpoint) -> Path:
    path = tmp_path / "registries.conf"
    path.write_text(
        f'[[registry]]\nprefix = "{SOURCE}"\nlocation = "{registry_plain.host}"\ninsecure = true\n',
        encoding="utf-8",
    )
    return path


def test_scan_asks_the_hosts_the_configuration_names(
    conf: Path, tmp_path: Path, registry_plain: RegistryEndpoint
) -> None:
    manifests = tmp_path / "deploy"
    manifests.mkdir()
    (manifests / "job.yaml").write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n"
        "      restartPolicy: Never\n      containers:\n"
        f"      - {{name: a, image: {SOURCE}/sample/app:1.0.0}}\n"
        f"      - {{name: b, image: {SOURCE}/sample/app:not-published}}\n",
        encoding="utf-8",
    )
    args = ["scan", "--registries-conf", str(conf), "--output", "json", str(manifests)]
    run = run_cli(args, tmp_path)
    assert run.code == 1, run.stderr
    assert f"{SOURCE}/sample/app:not-published" in run.stdout
    assert registry_plain.host in run.stdout  # the host that answered
    without = run_cli(["scan", str(manifests)], tmp_path)
    assert without.code == 4, without.stdout  # nobody answers for the name itself


def test_serve_checks_pods_through_the_configuration(
    conf: Path, tmp_path: Path, tls_material: TLSMaterial
) -> None:
    with running(tmp_path / "serve", tls_material, "--registries-conf", str(conf)) as hook:
        found = hook.review(
            workload("Pod", pod_spec([], [("a", f"{SOURCE}/sample/app:1.0.0")], []))
        )
        missing = hook.review(
            workload("Pod", pod_spec([], [("a", f"{SOURCE}/sample/app:nope")], []))
        )
    assert found["allowed"] is True, found
    assert missing["allowed"] is False
    assert f"{SOURCE}/sample/app:nope" in missing["status"]["message"]


def test_serve_refuses_to_start_on_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "registries.conf"
    bad.write_text('[[registry]]\nlocation = "a.example"\ninsecure = "yes"\n', encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "imagecheck", "serve", "--listen", "127.0.0.1:1", "--insecure-http",
         "--registries-conf", str(bad)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{bad}:3:" in lines[0], proc.stderr
