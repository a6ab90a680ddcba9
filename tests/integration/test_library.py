"""``imagecheck.check()`` against the real registry: the Python guide's example as
it is written, the command's credential sources, and the command's exit codes."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import imagecheck
from tests.support.clirun import run_cli, tls_args
from tests.support.endpoint import RegistryEndpoint

# Over the fast paths and over stock httpx (conftest.fastpath_mode).
pytestmark = pytest.mark.usefixtures("fastpath_mode")

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "python.md"
# What the example names, and what the test registry holds in its place.
EXAMPLE_REPOSITORY = "registry.example.com/team/train"
SAMPLE_REPOSITORY = "sample/app"
PRIVATE = "private/secret:1.0"


def guide_example() -> tuple[str, str]:
    """The Python guide's first example, and the output it shows."""
    section = GUIDE.read_text(encoding="utf-8").split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    [output] = re.findall(r"```text\n(.*?)```", section, re.DOTALL)
    return code, output


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No credential source of this machine's: a clean HOME, no DOCKER_*/IMAGECHECK_*/
    REGISTRY_AUTH_FILE/XDG_RUNTIME_DIR (the library reads the environment, as the CLI does)."""
    dropped = ("DOCKER_", "IMAGECHECK_", "REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR")
    for name in [n for n in os.environ if n.startswith(dropped)]:
        monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def test_the_guide_example_runs_as_written(
    registry_plain: RegistryEndpoint, isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, shown = guide_example()
    repository = registry_plain.ref(SAMPLE_REPOSITORY)
    assert EXAMPLE_REPOSITORY in code
    namespace: dict[str, Any] = {}
    exec(compile(code.replace(EXAMPLE_REPOSITORY, repository), "python.md", "exec"), namespace)
    [guide_digest] = re.findall(r"sha256:[0-9a-f]{64}", shown)
    expected = shown.replace(EXAMPLE_REPOSITORY, repository)
    expected = expected.replace(guide_digest, registry_plain.images["sample/app:1.0.0"].digest)
    assert capsys.readouterr().out == expected
    assert namespace["code"] == 1


def test_the_guide_example_refuses_an_invalid_reference_in_one_line(
    registry_plain: RegistryEndpoint, isolated: Path
) -> None:
    code, _ = guide_example()
    code = code.replace(f"{EXAMPLE_REPOSITORY}:1.0.1", "Team/Train:1.0.1")
    code = code.replace(EXAMPLE_REPOSITORY, registry_plain.ref(SAMPLE_REPOSITORY))
    with pytest.raises(SystemExit, match=r"^imagecheck: invalid reference 'Team/Train:1.0.1': "):
        exec(compile(code, "python.md", "exec"), {})


# -- the same exit code as the command, for the same images -------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# (id, endpoint fixture, images (names in it, or full references), exit code)
SAME_CODES: list[tuple[str, str, list[str], int]] = [
    ("found", "registry_plain", ["sample/app:1.0.0", "sample/app:multi"], 0),
    ("missing", "registry_plain", ["sample/app:1.0.0", "sample/app:0.0.0"], 1),
    ("invalid", "registry_plain", ["sample/app:1.0.0", "Sample/App"], 2),
    ("denied", "registry_basic", [PRIVATE], 3),
    ("missing-beats-error", "registry_plain", ["127.0.0.1:{closed}/a:1", "sample/app:0.0.0"], 1),
    ("unreachable", "registry_plain", ["127.0.0.1:{closed}/sample/app:1.0.0"], 4),
]  # fmt: skip


@pytest.mark.parametrize(
    ("fixture", "names", "code"), [c[1:] for c in SAME_CODES], ids=[c[0] for c in SAME_CODES]
)
def test_exit_code_is_the_commands(
    request: pytest.FixtureRequest, isolated: Path, fixture: str, names: list[str], code: int
) -> None:
    endpoint: RegistryEndpoint = request.getfixturevalue(fixture)
    port = closed_port()
    images = [n.format(closed=port) if n.startswith("127.") else endpoint.ref(n) for n in names]
    ca_files = [endpoint.ca_file] if endpoint.ca_file else []
    try:
        results = imagecheck.check(images, ca_files=ca_files, retries=0, deadline=20)
        got = imagecheck.exit_code(results)
    except imagecheck.UsageError as error:
        got = imagecheck.error_exit_code(error)
    command = run_cli(["check", *tls_args(endpoint), "--retries", "0", *images], isolated)
    assert got == command.code == code, command.stderr


# -- the command's credential sources -------------------------------------------------------

Options = Callable[[RegistryEndpoint, Path], dict[str, Any]]


def _auths(endpoint: RegistryEndpoint) -> str:
    secret = base64.b64encode(f"{endpoint.username}:{endpoint.password}".encode()).decode()
    return json.dumps({"auths": {endpoint.host: {"auth": secret}}})


def _credentials(ep: RegistryEndpoint, tmp: Path) -> dict[str, Any]:
    assert ep.username is not None and ep.password is not None
    creds = imagecheck.Credentials(username=ep.username, password=ep.password)
    return {"credentials": creds, "credentials_for": [ep.host]}


def _docker_config(ep: RegistryEndpoint, tmp: Path) -> dict[str, Any]:
    (tmp / "config.json").write_text(_auths(ep), encoding="utf-8")
    return {"docker_config": tmp}


def _docker_config_env(ep: RegistryEndpoint, tmp: Path) -> dict[str, Any]:
    (tmp / "config.json").write_text(_auths(ep), encoding="utf-8")
    return {"env": {"DOCKER_CONFIG": str(tmp)}}


def _docker_auth_config(ep: RegistryEndpoint, tmp: Path) -> dict[str, Any]:
    return {"env": {"DOCKER_AUTH_CONFIG": _auths(ep)}}


def _pull_secret(ep: RegistryEndpoint, tmp: Path) -> dict[str, Any]:
    (tmp / ".dockerconfigjson").write_text(_auths(ep), encoding="utf-8")
    return {"pull_secrets": [tmp]}


def _podman_auth_json(ep: RegistryEndpoint, tmp: Path) -> dict[str, Any]:
    (tmp / "auth.json").write_text(_auths(ep), encoding="utf-8")
    return {"env": {"REGISTRY_AUTH_FILE": str(tmp / "auth.json")}}


SOURCES: list[tuple[str, Options]] = [
    ("credentials", _credentials),
    ("docker-config", _docker_config),
    ("DOCKER_CONFIG", _docker_config_env),
    ("DOCKER_AUTH_CONFIG", _docker_auth_config),
    ("pull-secret", _pull_secret),
    ("podman-auth-json", _podman_auth_json),
]


@pytest.mark.parametrize("options", [s[1] for s in SOURCES], ids=[s[0] for s in SOURCES])
def test_each_credential_source_opens_a_private_repository(
    registry_basic: RegistryEndpoint, isolated: Path, tmp_path: Path, options: Options
) -> None:
    image = registry_basic.ref(PRIVATE)
    assert registry_basic.ca_file is not None
    ca_files = [registry_basic.ca_file]
    [denied] = imagecheck.check([image], ca_files=ca_files)
    assert denied.status is imagecheck.Status.DENIED
    source = tmp_path / "source"
    source.mkdir()
    [result] = imagecheck.check([image], ca_files=ca_files, **options(registry_basic, source))
    assert result.status is imagecheck.Status.FOUND, result.message
    assert result.digest == registry_basic.images[PRIVATE].digest


def test_credentials_go_only_where_credentials_for_says(
    registry_basic: RegistryEndpoint, isolated: Path, tmp_path: Path
) -> None:
    options = _credentials(registry_basic, tmp_path)
    options["credentials_for"] = ["registry.example.com"]
    image = registry_basic.ref(PRIVATE)
    assert registry_basic.ca_file is not None
    [result] = imagecheck.check([image], ca_files=[registry_basic.ca_file], **options)
    assert result.status is imagecheck.Status.DENIED


def test_acheck_in_an_event_loop(registry_plain: RegistryEndpoint, isolated: Path) -> None:
    async def main() -> list[imagecheck.CheckResult]:
        with pytest.raises(RuntimeError, match=r"await imagecheck\.acheck"):
            imagecheck.check([registry_plain.ref("sample/app:1.0.0")])
        return await imagecheck.acheck([registry_plain.ref("sample/app:1.0.0")])

    [result] = asyncio.run(main())
    assert result.status is imagecheck.Status.FOUND
