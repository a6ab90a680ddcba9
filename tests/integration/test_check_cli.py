"""``imagecheck check`` as a real subprocess against the real Distribution registry, in its
three modes: no auth over HTTP, htpasswd Basic over TLS, token auth over TLS.

Each mode: found, missing tag, missing repository, digest found and missing, denied without
credentials, found with credentials; exit codes and stdout as a user sees them.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.support.clirun import Run, run_cli, tls_args
from tests.support.endpoint import RegistryEndpoint

# Over the fast paths and over stock httpx (conftest.fastpath_mode).
pytestmark = pytest.mark.usefixtures("fastpath_mode")

MODES = ["registry_plain", "registry_basic", "registry_token"]
MISSING_DIGEST = "sha256:" + "0" * 64


def cred_args(endpoint: RegistryEndpoint) -> tuple[list[str], str]:
    if endpoint.username is None or endpoint.password is None:
        return [], ""
    return ["--username", endpoint.username, "--password-stdin"], endpoint.password + "\n"


@pytest.fixture(params=MODES)
def endpoint(request: pytest.FixtureRequest) -> RegistryEndpoint:
    value = request.getfixturevalue(request.param)
    assert isinstance(value, RegistryEndpoint)
    return value


def check(endpoint: RegistryEndpoint, home: Path, *images: str, creds: bool = True) -> Run:
    extra, stdin = cred_args(endpoint) if creds else ([], "")
    args = ["check", "--output", "json", *tls_args(endpoint), *extra]
    return run_cli([*args, *(endpoint.ref(i) for i in images)], home, stdin=stdin)


@pytest.mark.parametrize(
    "name",
    ["sample/app:1.0.0", "sample/app:docker", "sample/app:multi", "sample/app:list"],
    ids=["oci-manifest", "docker-schema2", "oci-index", "docker-manifest-list"],
)
def test_found_reports_digest_and_media_type(
    endpoint: RegistryEndpoint, tmp_path: Path, name: str
) -> None:
    run = check(endpoint, tmp_path, name)
    assert run.code == 0, run.stderr
    [result] = run.json()
    pushed = endpoint.images[name]
    assert result["status"] == "found"
    assert result["digest"] == pushed.digest
    assert result["media_type"] == pushed.media_type
    assert result["size"] == pushed.size
    assert result["reference"] == endpoint.ref(name)


def test_missing_tag_exits_1(endpoint: RegistryEndpoint, tmp_path: Path) -> None:
    run = check(endpoint, tmp_path, "sample/app:9.9.9")
    assert run.code == 1
    [result] = run.json()
    assert result["status"] == "missing"
    assert "9.9.9" in result["message"]


def test_missing_repository_exits_1(endpoint: RegistryEndpoint, tmp_path: Path) -> None:
    run = check(endpoint, tmp_path, "sample/nothing-here:1.0")
    assert run.code == 1
    assert run.json()[0]["status"] == "missing"


def test_digest_reference_found(endpoint: RegistryEndpoint, tmp_path: Path) -> None:
    digest = endpoint.images["sample/app:multi"].digest
    run = check(endpoint, tmp_path, f"sample/app@{digest}")
    assert run.code == 0, run.stderr
    assert run.json()[0]["digest"] == digest


def test_tag_and_digest_checks_the_digest(endpoint: RegistryEndpoint, tmp_path: Path) -> None:
    # The kubelet pulls name:tag@digest by digest: a tag that does not exist does not matter.
    digest = endpoint.images["sample/app:1.0.0"].digest
    run = check(endpoint, tmp_path, f"sample/app:no-such-tag@{digest}")
    assert run.code == 0, run.stderr
    [result] = run.json()
    assert result["reference"] == endpoint.ref(f"sample/app:no-such-tag@{digest}")
    assert result["digest"] == digest


def test_digest_reference_missing(endpoint: RegistryEndpoint, tmp_path: Path) -> None:
    run = check(endpoint, tmp_path, f"sample/app@{MISSING_DIGEST}")
    assert run.code == 1
    assert run.json()[0]["status"] == "missing"


def test_results_in_input_order_with_mixed_exit_code(
    endpoint: RegistryEndpoint, tmp_path: Path
) -> None:
    names = ["sample/app:9.9.9", "sample/app:1.0.0", "public/tool:2.1", "sample/app:0.0.1"]
    run = check(endpoint, tmp_path, *names)
    assert run.code == 1
    assert [r["image"] for r in run.json()] == [endpoint.ref(n) for n in names]
    assert [r["status"] for r in run.json()] == ["missing", "found", "found", "missing"]


@pytest.mark.parametrize("mode", ["registry_basic", "registry_token"])
def test_denied_without_credentials(
    request: pytest.FixtureRequest, mode: str, tmp_path: Path
) -> None:
    endpoint: RegistryEndpoint = request.getfixturevalue(mode)
    run = check(endpoint, tmp_path, "private/secret:1.0", creds=False)
    assert run.code == 3
    [result] = run.json()
    assert result["status"] == "denied"
    assert "does not exist or requires authorization" in result["message"]


@pytest.mark.parametrize("mode", ["registry_basic", "registry_token"])
def test_wrong_password_is_denied(
    request: pytest.FixtureRequest, mode: str, tmp_path: Path
) -> None:
    endpoint: RegistryEndpoint = request.getfixturevalue(mode)
    args = ["check", *tls_args(endpoint), "--username", "alice", "--password-stdin"]
    run = run_cli([*args, endpoint.ref("private/secret:1.0")], tmp_path, stdin="wrong\n")
    assert run.code == 3
    assert run.stdout.startswith("denied")
    assert "wrong" not in run.stdout + run.stderr


def test_token_mode_anonymous_pull_of_public_repository(
    registry_token: RegistryEndpoint, tmp_path: Path
) -> None:
    run = check(registry_token, tmp_path, "public/tool:2.1", creds=False)
    assert run.code == 0, run.stderr
    assert registry_token.token_server is not None
    [token_request] = registry_token.token_server.requests
    assert token_request.authorization is None
    assert token_request.scopes == ["repository:public/tool:pull"]


def test_docker_config_credentials(registry_token: RegistryEndpoint, tmp_path: Path) -> None:
    assert registry_token.password is not None
    raw = f"{registry_token.username}:{registry_token.password}".encode()
    config = {"auths": {registry_token.host: {"auth": base64.b64encode(raw).decode()}}}
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(json.dumps(config))
    args = ["check", *tls_args(registry_token), registry_token.ref("private/secret:1.0")]
    run = run_cli(args, tmp_path, env={"DOCKER_CONFIG": str(tmp_path / "cfg")})
    assert run.code == 0, run.stdout + run.stderr


def test_one_ping_and_one_token_per_scope(registry_token: RegistryEndpoint, tmp_path: Path) -> None:
    """Many images in two repositories: 1 ping, 1 token per repository, 1 HEAD per image."""
    server = registry_token.token_server
    assert server is not None
    names = [f"sample/app:{t}" for t in ("1.0.0", "docker", "multi", "list", "9.9.9")]
    names += ["public/tool:2.1", "public/tool:0.1"]
    before = registry_token.registry.request_count()
    run = check(registry_token, tmp_path, *names)
    assert run.code == 1  # two tags are missing
    scopes = sorted(s for r in server.requests for s in r.scopes)
    assert scopes == ["repository:public/tool:pull", "repository:sample/app:pull"]
    assert registry_token.registry.request_count() - before == 1 + len(names)


def test_text_output_for_a_person(registry_plain: RegistryEndpoint, tmp_path: Path) -> None:
    found, missing = registry_plain.ref("sample/app:1.0.0"), registry_plain.ref("sample/app:9")
    run = run_cli(["check", found, missing], tmp_path)
    assert run.code == 1
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["found", found, registry_plain.images["sample/app:1.0.0"].digest]
    assert lines[1].startswith(f"missing  {missing}")
    assert "tag '9' not found" in lines[1]


def test_invalid_reference_sends_nothing(registry_plain: RegistryEndpoint, tmp_path: Path) -> None:
    before = registry_plain.registry.request_count()
    run = run_cli(["check", registry_plain.ref("sample/app:1.0.0"), "Bad/Name"], tmp_path)
    assert run.code == 2
    assert "uppercase letters are not allowed" in run.stdout
    assert registry_plain.registry.request_count() == before


def test_untrusted_certificate_is_a_clear_error(
    registry_basic: RegistryEndpoint, tmp_path: Path
) -> None:
    run = run_cli(["check", registry_basic.ref("sample/app:1.0.0")], tmp_path)
    assert run.code == 4
    assert "certificate" in run.stdout
    assert "--ca-file" in run.stdout
    assert "Traceback" not in run.stderr


def test_python_dash_m_and_version(tmp_path: Path) -> None:
    run = run_cli(["--version"], tmp_path)
    assert run.code == 0
    assert run.stdout.startswith("imagecheck, version ")
