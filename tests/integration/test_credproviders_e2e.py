"""The kubelet's credential provider plugins, end to end: ``python -m imagecheck check`` with
``--image-credential-provider-config`` and ``--image-credential-provider-bin-dir``, a real
plugin executable, and the real registry accepting only the plugin's credentials."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clirun import Run, run_cli, tls_args
from tests.support.credproviders import (
    answer,
    install_plugin,
    plugin_runs,
    provider,
    write_provider_config,
)
from tests.support.endpoint import RegistryEndpoint

PRIVATE = "private/secret:1.0"
PLUGIN = "test-credential-provider"
LEAK = "plugin-stdout-token"


@pytest.fixture(params=["registry_basic", "registry_token"])
def endpoint(request: pytest.FixtureRequest) -> RegistryEndpoint:
    value = request.getfixturevalue(request.param)
    assert isinstance(value, RegistryEndpoint)
    return value


def good_body(ep: RegistryEndpoint) -> str:
    assert ep.username is not None and ep.password is not None
    return answer({ep.host: (ep.username, ep.password)}, cache_duration="5m")


def check_with_plugin(
    ep: RegistryEndpoint, tmp: Path, body: str, *extra: str, match: str | None = None
) -> tuple[Run, Path]:
    script = install_plugin(tmp / "bin", PLUGIN, body)
    config = write_provider_config(tmp / "config.json", provider(PLUGIN, match or ep.host))
    args = [
        "check",
        *tls_args(ep),
        "--image-credential-provider-config",
        str(config),
        "--image-credential-provider-bin-dir",
        str(tmp / "bin"),
        *extra,
        ep.ref(PRIVATE),
    ]
    return run_cli(args, tmp), script


def test_the_plugins_credentials_give_access(endpoint: RegistryEndpoint, tmp_path: Path) -> None:
    run, script = check_with_plugin(endpoint, tmp_path, good_body(endpoint))
    assert run.code == 0, run.stdout + run.stderr
    assert run.stdout.startswith("found")
    (only,) = plugin_runs(script)
    assert only["request"]["image"] == f"{endpoint.host}/private/secret"
    assert only["request"]["kind"] == "CredentialProviderRequest"


def test_a_glob_match_with_the_port(registry_basic: RegistryEndpoint, tmp_path: Path) -> None:
    port = registry_basic.host.rsplit(":", 1)[1]
    run, _ = check_with_plugin(
        registry_basic, tmp_path, good_body(registry_basic), match=f"*.0.0.*:{port}/private"
    )
    assert run.code == 0, run.stdout + run.stderr


def test_a_plugin_that_does_not_match_is_not_run(
    registry_basic: RegistryEndpoint, tmp_path: Path
) -> None:
    run, script = check_with_plugin(
        registry_basic, tmp_path, good_body(registry_basic), match="*.dkr.ecr.*.amazonaws.com"
    )
    assert run.code == 3  # anonymous, so denied
    assert plugin_runs(script) == []


PROBLEMS = [
    ("exits-non-zero", "print(LEAK); sys.stderr.write('no instance role\\n'); sys.exit(3)",
     f"credential provider plugin {PLUGIN} failed (exit 3): no instance role"),
    ("prints-too-much", "sys.stdout.write('x' * (1 << 20)); sys.stdout.flush(); time.sleep(30)",
     f"credential provider plugin {PLUGIN} printed more than 64 KiB"),
    ("malformed", "print('{\"apiVersion\": ' + LEAK)",
     f"credential provider plugin {PLUGIN} printed something that is not a JSON object"),
    ("wrong-kind", "print(json.dumps({'apiVersion': request['apiVersion'], 'kind': 'Pod'}))",
     f"credential provider plugin {PLUGIN} answered kind 'Pod'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "expected"), [p[1:] for p in PROBLEMS], ids=[p[0] for p in PROBLEMS]
)
def test_plugin_problems_are_one_line_usage_errors(
    registry_basic: RegistryEndpoint, tmp_path: Path, body: str, expected: str
) -> None:
    assert registry_basic.password is not None
    before = registry_basic.registry.request_count()
    run, _ = check_with_plugin(registry_basic, tmp_path, f"LEAK = {LEAK!r}\n{body}")
    assert run.code == 2, run.stdout + run.stderr
    assert run.stdout == ""
    assert run.stderr == f"imagecheck: error: {expected}\n"
    assert registry_basic.registry.request_count() == before  # nothing was sent
    assert LEAK not in run.stderr  # what a plugin prints on stdout may be the secret


def test_a_hanging_plugin_is_killed_at_the_deadline(
    registry_basic: RegistryEndpoint, tmp_path: Path
) -> None:
    body = "open(__file__ + '.pid', 'w').write(str(os.getpid())); time.sleep(120)"
    run, script = check_with_plugin(registry_basic, tmp_path, body, "--deadline", "2")
    assert run.code == 4, run.stdout + run.stderr
    assert "deadline" in (run.stdout + run.stderr)
    pid = int(script.with_name(script.name + ".pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]
    except OSError:
        return "Z"


def test_one_flag_without_the_other_is_a_usage_error(tmp_path: Path) -> None:
    for flag in ("--image-credential-provider-config", "--image-credential-provider-bin-dir"):
        run = run_cli(["check", flag, str(tmp_path), "registry.example/app:1"], tmp_path)
        assert run.code == 2
        assert len(run.stderr.splitlines()) == 1
        assert "needs --image-credential-provider-" in run.stderr


def test_a_bad_config_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    install_plugin(tmp_path / "bin", PLUGIN, "pass")
    config = write_provider_config(
        tmp_path / "config.json", provider(PLUGIN, "registry.example", defaultCacheDuration="1d")
    )
    args = ["check", "--image-credential-provider-config", str(config)]
    args += ["--image-credential-provider-bin-dir", str(tmp_path / "bin"), "registry.example/a:1"]
    run = run_cli(args, tmp_path)
    assert run.code == 2
    assert run.stderr == (
        f"imagecheck: error: {config}: providers[0].defaultCacheDuration: '1d' is not a "
        "duration >= 0 (as Go writes one: 12h, 90m, 0)\n"
    )
